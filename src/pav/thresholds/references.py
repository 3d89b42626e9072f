"""Reference gates: each throughput figure against what healthy machines of the same GPU model measured with
the same workload (thresholds/references/MODEL.yml, written by scripts/fit-references).

The derived gates bound a figure by the host's own facts (datasheet, links, ports) at a fraction loose
enough for any machine; the relative gates compare a part with its peers. Neither sees a fault that hits a
whole node by a few percent: every GPU at 90% clocks moves its peers and stays far over 0.70 of the
datasheet. A reference is the median of healthy runs on other machines of the model, for one workload
fingerprint (pav.workload) and one GPU count, so a node-wide fault fails against it and a workload change
never meets a reference of another workload (the gate is then not applicable, saying why).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from pav import paths
from pav.errors import PavError
from pav.thresholds.derive import DerivedGate, NotApplicable
from pav.thresholds.gate import lookup
from pav.thresholds.hardware import HostHardware
from pav.yamlfile import load_mapping

FOLDER = "thresholds/references"
PER = ("gpu", "pair", "host")


@dataclass(frozen=True)
class Figure:
    """One reference: a test's figure for a GPU model, GPU count and workload."""

    test: str
    metric: str  # per gpu/pair: the family (gemm_bf16_tflops); per host: the dotted path
    per: str  # gpu | pair | host
    gpus: int  # the host's GPU count it holds for; 0: any (a figure of one GPU or one pair)
    workload: str  # the fingerprint (pav.workload)
    reference: float
    fraction: float
    source: str  # the runs it was fitted on
    hosts: int = 1  # a test across hosts: how many, each of `gpus` GPUs
    fabric: str = ""  # across hosts: the fabric they were set up for (facts.nccl_env.fabric)

    def applies(self, test: str, gpus: int, hosts: int = 1, fabric: str = "") -> bool:
        shape = self.hosts == hosts and (hosts == 1 or self.fabric == fabric)
        return self.test == test and self.gpus in (0, gpus) and shape


@dataclass(frozen=True)
class Model:
    name: str  # as NVML names it
    file: str  # under the project, for the gates' source
    figures: tuple[Figure, ...]


@cache
def references() -> dict[str, Model]:
    """Every model's references, by NVML name."""
    folder = paths.THRESHOLDS / "references"
    models = [_read(path) for path in sorted(folder.glob("*.yml"))] if folder.is_dir() else []
    return {m.name: m for m in models}


def _read(path: Path) -> Model:
    data = load_mapping(path)
    rel = f"{FOLDER}/{path.name}"
    try:
        figures = tuple(_figure(raw) for raw in data["figures"] or [])
        return Model(str(data["model"]), rel, figures)
    except (KeyError, TypeError, ValueError) as exc:
        raise PavError(
            f"{rel}: each figure needs test, metric, per ({'/'.join(PER)}), gpus, workload, reference, "
            f"fraction and fit ({exc}); write it with scripts/fit-references"
        ) from None


def _figure(raw: dict[str, Any]) -> Figure:
    per = str(raw["per"])
    if per not in PER:
        raise ValueError(f"per {per!r}")
    runs = ", ".join(str(r) for r in raw["fit"])
    return Figure(
        str(raw["test"]), str(raw["metric"]), per, int(raw["gpus"]), str(raw["workload"]),
        float(raw["reference"]), float(raw["fraction"]), f"fitted on {runs}", int(raw.get("hosts", 1)),
        str(raw.get("fabric", "")),
    )  # fmt: skip


def reference_gates(
    test: str,
    metrics: dict[str, Any],
    workload: dict[str, Any],
    hw: HostHardware,
    labels: dict[str, str],
    hosts: list[HostHardware] | None = None,
) -> list[DerivedGate | NotApplicable]:
    """The reference gates of one host's test: each figure the test measured that a reference of this
    host's GPU model, GPU count and the test's workload covers. labels: the test's GPU keys -> part names.
    hosts: a test across hosts, every host's hardware (`hw` is the first): the reference of that many hosts
    of that shape on that fabric, whose figure is the network's between them."""
    count = len(hosts or [hw])
    model = references().get(hw.model or "")
    fabric = hw.fabric
    figures = [f for f in model.figures if f.applies(test, len(hw.gpus), count, fabric)] if model else []
    if not figures:
        return []
    fingerprint = workload.get("fingerprint")
    matching = [f for f in figures if f.workload == fingerprint]
    if not matching:
        known = ", ".join(sorted({f.workload for f in figures}))
        why = (
            f"no reference for this workload ({fingerprint or 'not recorded'}) on {hw.model}: "
            f"{model.file if model else FOLDER} holds {known}; refit with scripts/fit-references"
        )
        return [NotApplicable(test, "reference", why)]
    out: list[DerivedGate | NotApplicable] = []
    for figure in matching:
        out += _expand(figure, metrics, hw, labels, model.file if model else FOLDER)
    return out


def _expand(
    figure: Figure, metrics: dict[str, Any], hw: HostHardware, labels: dict[str, str], file: str
) -> list[DerivedGate | NotApplicable]:
    count = f"{len(hw.gpus)} GPU{'s' if len(hw.gpus) > 1 else ''}" if figure.gpus else "any GPU count"
    if figure.hosts > 1:
        count = f"{figure.hosts} hosts of {count} on {figure.fabric or 'an unnamed fabric'}"
    source = (
        f"{hw.model} reference {figure.reference:.4g} for this workload ({figure.workload}) on {count}, "
        f"{file}, {figure.source}"
    )

    def gate(path: str, part: str) -> DerivedGate:
        return DerivedGate(figure.test, path, figure.reference, figure.fraction, "reference", source, part)

    row = metrics.get(figure.metric)
    if figure.per == "gpu":
        keys = sorted(row) if isinstance(row, dict) else []
        return [gate(f"{figure.metric}.{k}", labels.get(str(k), f"GPU {k}")) for k in keys]
    if figure.per == "pair":
        pairs = [(s, d) for s, dsts in (row or {}).items() if isinstance(dsts, dict) for d in dsts]
        return [gate(f"{figure.metric}.{s}.{d}", f"GPU {s} -> GPU {d}") for s, d in sorted(pairs)]
    if lookup(metrics, figure.metric) is None:
        why = f"{figure.metric} not recorded by this run's payload (a figure added later)"
        return [NotApplicable(figure.test, figure.metric, why)]
    part = "fabric" if figure.hosts > 1 else _part(metrics, hw, labels)
    return [gate(figure.metric, part)]


def _part(metrics: dict[str, Any], hw: HostHardware, labels: dict[str, str]) -> str:
    """A one-rank test ran on the first GPU its process was given (CUDA's device 0): that GPU is the part;
    a test over the host's GPUs names the host."""
    if metrics.get("world_size") == 1 and hw.gpus:
        first = hw.gpus[0]
        return labels.get("0", first.label())
    return "host"
