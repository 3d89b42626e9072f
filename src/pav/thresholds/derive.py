"""Gates derived from what a host's facts say it should do (docs/thresholds.md, "Derived gates").

Every performance metric gets an absolute gate, a fraction of a limit the facts give (the GPU model's
datasheet figures, NVLink links up x per-link rate, PCIe generation x width, the RDMA ports' rate); the
per-GPU and per-pair metrics also get relative ones (relative.py). A metric whose limit cannot be
derived is `Missing`, with the fact that is lacking and the fix: a GPU host never passes without its
performance gates.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from pav import paths
from pav.catalog import CATALOG, probe
from pav.errors import PavError
from pav.thresholds.gate import lookup
from pav.thresholds.hardware import Gpu, HostHardware
from pav.thresholds.links import (
    Wiring,
    hardware_data,
    host_nvlink_rate,
    nvlink_wiring,
    pair_links,
    pcie_gbps,
)
from pav.yamlfile import load_mapping

SIZE = 8 << 30  # the largest size the collective tests measure (catalog.BIG_SIZES, nccl-tests -e 8G)
PER_GPU = ("gemm_bf16_tflops", "hbm_copy_gbps", "h2d_gbps", "d2h_gbps")
UNITS = {"gemm_bf16_tflops": "TFLOP/s", "scaling_efficiency": "", "steps_per_s_per_host": "steps/s"}
UNITS |= {
    f"{what}_per_s{kind}_per_rank_min": f"{what}/s"
    for what in ("tokens", "samples")
    for kind in ("", "_steady")
}
# The tests across hosts gated on the fabric (derive_fabric), in catalog order.
INTER_NODE = tuple(spec.name for spec in CATALOG.values() if spec.inter_node_metric)
SPECS = "thresholds/hardware/gpus.yml"
NVML_FACTS = "facts.gpus, read through NVML by the torch_payload role: configure with this release"
PROFILE_FIX = "or set pav_threshold_profile to a profile that gates it (docs/thresholds.md)"


@dataclass(frozen=True)
class DerivedGate:
    test: str
    metric: str  # dotted path into the test's metrics
    limit: float
    fraction: float
    basis: str  # absolute | relative
    source: str  # the facts the limit came from
    part: str  # the GPU, pair, host or fabric the figure belongs to

    @property
    def min(self) -> float:
        return round(self.limit * self.fraction, 3)

    def check(self, metrics: dict[str, Any]) -> dict[str, Any]:
        """The gate as results.json records it, with the measured value, its status and any reason."""
        value = lookup(metrics, self.metric)
        status = "not measured" if value is None else "pass" if value >= self.min else "fail"
        out = self.describe() | {"value": value, "status": status}
        if status != "pass":
            out["reason"] = self.reason(value)
        return out

    def reason(self, value: float | None) -> str:
        unit = UNITS.get(self.metric.split(".")[0], "GB/s")
        measured = "not measured" if value is None else f"{value:.4g} {unit}".rstrip()
        return (
            f"{self.part}: {self.metric} {measured}, expected >= {self.min:.4g} "
            f"= {self.fraction:g} x {self.limit:.4g} ({self.source})"
        )

    def describe(self) -> dict[str, Any]:
        return {
            "metric": self.metric, "min": self.min, "limit": round(self.limit, 3), "fraction": self.fraction,
            "basis": self.basis, "source": self.source, "part": self.part,
        }  # fmt: skip


@dataclass(frozen=True)
class Missing:
    test: str
    metric: str
    fact: str  # what is lacking and how to supply it

    def describe(self) -> dict[str, Any]:
        return {"metric": self.metric, "missing": self.fact}


@dataclass(frozen=True)
class NotApplicable:
    """A gate the setup rules out on purpose (an inter-node bandwidth gate where the fabric is sockets):
    recorded with why, neither a pass nor a missing fact."""

    test: str
    metric: str
    why: str

    def describe(self) -> dict[str, Any]:
        return {"metric": self.metric, "not_applicable": self.why}


Derived = DerivedGate | Missing | NotApplicable


@dataclass(frozen=True)
class Fraction:
    value: float
    source: str


@cache
def fractions() -> dict[str, dict[str, Fraction]]:
    path = paths.THRESHOLDS / "hardware" / "fractions.yml"
    data = load_mapping(path)
    try:
        return {
            basis: {
                k: Fraction(float(v["fraction"]), str(v["source"])) for k, v in (data[basis] or {}).items()
            }
            for basis in ("absolute", "relative")
        }
    except (KeyError, TypeError, ValueError) as exc:
        raise PavError(f"{path}: each entry needs a number 'fraction' and a 'source' ({exc})") from None


def derive_host(hw: HostHardware) -> list[Derived]:
    """The absolute gates (or what is missing for them) of every host-scope GPU test on this host."""
    if not hw.gpus:
        return []
    out = probe_gates(hw)
    if len(hw.gpus) >= 2:
        out += _collectives(hw)
    return out


def probe_gates(hw: HostHardware) -> list[Derived]:
    """gpu_probe's absolute gates: per GPU and per ordered pair, keyed as the probe keys its figures."""
    return [*_per_gpu(hw), *_pairs(hw)]


def derive_fabric(hosts: list[HostHardware], test: str) -> Derived:
    """A test across hosts is bounded by the slowest host's RDMA ports (NCCL_ALGO=Ring), each host counted
    with its full complement: every port of its link layer (or the number the env expects), a port that is
    down or slow counted at the rate its healthy ports run, so a down port never lowers the bar (gpu_health
    names it)."""
    metric = f"{CATALOG[test].inter_node_metric}.{SIZE}"
    if hosts and all(h.fabric == "socket" for h in hosts):
        why = (
            "the fabric is sockets (nccl_env_fabric: socket): no RDMA rate bounds the bandwidth between hosts"
        )
        return NotApplicable(test, metric, why)
    lacking = [h.host for h in hosts if not h.rdma_gbps]
    if lacking:
        fact = (
            f"no active InfiniBand or RoCE port on {', '.join(lacking)} (facts.rdma.ports): the rate its "
            f"ports run at, so the inter-node limit, is unknown; check the HCAs (ibstat), {PROFILE_FIX}"
        )
        return Missing(test, metric, fact)
    # Of hosts with the same limit, the one with the fewest ports active: its source names what is down.
    slowest = min(hosts, key=lambda h: (h.rdma_gbps or 0.0, len(h.rdma.healthy)))
    frac = fractions()["absolute"]["busbw_inter_node.all_reduce"]
    return DerivedGate(
        test, metric, slowest.rdma_gbps or 0.0, frac.value, "absolute", rdma_source(slowest), "fabric"
    )


def _per_gpu(hw: HostHardware) -> list[Derived]:
    test = probe()  # the per-GPU probe: whose figures these gates judge
    specs = hardware_data()["gpus"]
    out: list[Derived] = []
    for gpu in hw.gpus:
        spec = specs.get(gpu.name)
        for metric, key in (("gemm_bf16_tflops", "bf16_dense_tflops"), ("hbm_copy_gbps", "hbm_gbps")):
            path = f"{metric}.{gpu.metric_key}"
            if spec is None:
                fact = f"GPU model '{gpu.name}' has no entry in {SPECS}: add it, {PROFILE_FIX}"
                out.append(Missing(test, path, fact))
                continue
            what = "TFLOP/s dense bf16" if metric == "gemm_bf16_tflops" else "GB/s HBM"
            source = f"{gpu.name}: {float(spec[key]):g} {what} ({SPECS})"
            out.append(_gate(test, path, float(spec[key]), metric, source, gpu.label()))
        out += _host_copies(gpu)
    return out


def _host_copies(gpu: Gpu) -> list[Derived]:
    test = probe()  # the per-GPU probe: whose figures these gates judge
    out: list[Derived] = []
    for metric in ("h2d_gbps", "d2h_gbps"):
        path = f"{metric}.{gpu.metric_key}"
        limit = pcie_gbps(gpu)
        if limit is None:
            fact = f"PCIe generation and width of {gpu.label()} ({NVML_FACTS})"
            out.append(Missing(test, path, fact))
            continue
        source = f"PCIe gen{gpu.pcie_gen} x{gpu.pcie_width}"
        out.append(_gate(test, path, limit, metric, source, gpu.label()))
    return out


def _pairs(hw: HostHardware) -> list[Derived]:
    test = probe()  # the per-GPU probe: whose figures these gates judge
    out: list[Derived] = []
    for src in hw.gpus:
        for dst in hw.gpus:
            if src.index == dst.index:
                continue
            path = f"p2p_gbps.{src.metric_key}.{dst.metric_key}"
            part = f"GPU {src.index} -> GPU {dst.index}"
            found = pair_limit(hw, src, dst)
            if isinstance(found, str):
                out.append(Missing(test, path, found))
            else:
                out.append(_gate(test, path, found[0], "p2p_gbps", found[1], part))
    return out


def pair_limit(hw: HostHardware, src: Gpu, dst: Gpu) -> tuple[float, str] | str:
    """The pair's link limit and where it came from, or the fact that is missing. NVLink counts the links as
    wired, down ones included (nvlink_wiring): a link down never lowers the bar, gpu_health names it."""
    if not hw.nvlink_known:
        return f"NVLink link state of every GPU ({NVML_FACTS}; these facts came from {hw.source})"
    wiring = nvlink_wiring(hw)
    rate, version = host_nvlink_rate(hw, src)
    direct, unknown = pair_links(hw, wiring, src, dst)
    if direct and rate:
        up = src.nvlink_peers.get(dst.bus_id, 0)
        notes = [_placed(g, wiring[g.index]) for g in (src, dst)]
        if unknown:
            notes.append(
                f"{unknown} down links of GPU {src.index} and of GPU {dst.index}, their far end unknown, "
                "counted as between them"
            )
        state = "all up" if up >= direct else f"{up} up"
        return direct * rate, (
            f"the full complement of {direct} NVLink{version} links {src.label()} to {dst.label()} "
            f"({_wired_note(direct, state, notes)}) x {rate:g} GB/s"
        )
    ends = wiring[src.index], wiring[dst.index]
    if ends[0].switch and ends[1].switch and rate:
        links = min(end.switch for end in ends)
        degraded = [g for g in (src, dst) if g.nvlink_switch_links < wiring[g.index].switch]
        state = ", ".join(f"{g.nvlink_switch_links} up on GPU {g.index}" for g in degraded) or "all up"
        notes = [_placed(g, wiring[g.index]) for g in degraded]
        return links * rate, (
            f"the full complement of {links} NVLink{version} links to NVSwitch "
            f"({_wired_note(links, state, notes)}) x {rate:g} GB/s"
        )
    limits = {g.index: pcie_gbps(g) for g in (src, dst)}
    if None in limits.values():
        return f"PCIe generation and width of {src.label()} and {dst.label()} (no NVLink between them)"
    slower = min((src, dst), key=lambda g: limits[g.index] or 0.0)
    limit = limits[slower.index] or 0.0
    return limit, f"no NVLink between them: PCIe gen{slower.pcie_gen} x{slower.pcie_width}"


def _collectives(hw: HostHardware) -> list[Derived]:
    found = bus_limit(hw)
    wanted = [
        (spec.name, f"busbw_gbps.{op}.{SIZE}" if spec.busbw_per_op else f"busbw_gbps.{SIZE}", op)
        for spec in CATALOG.values()
        for op in spec.busbw_ops
    ]
    out: list[Derived] = []
    for test, metric, op in wanted:
        if isinstance(found, str):
            out.append(Missing(test, metric, found))
        else:
            out.append(_gate(test, metric, found[0], f"busbw.{op}", found[1], "host"))
    return out


def bus_limit(hw: HostHardware) -> tuple[float, str] | str:
    """What one host's collectives can reach: the slowest GPU's NVLink total when NVLink joins every GPU
    to every other (through NVSwitch or directly), else the slowest GPU's PCIe link. The total is the full
    complement, every link the GPU has, down ones included: a link down never lowers the bar."""
    if not hw.nvlink_known:
        return f"NVLink link state of every GPU ({NVML_FACTS}; these facts came from {hw.source})"
    wiring = nvlink_wiring(hw)
    pairs = [(a, b) for a in hw.gpus for b in hw.gpus if a.index < b.index]
    joined = all(
        (wiring[a.index].switch and wiring[b.index].switch) or pair_links(hw, wiring, a, b)[0]
        for a, b in pairs
    )
    rates = {g.index: host_nvlink_rate(hw, g) for g in hw.gpus}
    if joined and all(g.nvlink_wired and rates[g.index][0] for g in hw.gpus):
        slowest = min(hw.gpus, key=lambda g: g.nvlink_wired * (rates[g.index][0] or 0))
        rate, version = rates[slowest.index]
        links = slowest.nvlink_wired
        same = all(g.nvlink_wired == links for g in hw.gpus)
        where = "per GPU" if same else f"of {slowest.label()}"
        degraded = [g for g in hw.gpus if g.nvlink_down]
        state = ", ".join(f"{g.nvlink_up} up on GPU {g.index}" for g in degraded) or "all up"
        return links * (rate or 0.0), (
            f"the full complement of {links} NVLink{version} links {where} ({links} wired, {state}) "
            f"x {rate:g} GB/s"
        )
    if not hw.pcie_known:
        return "PCIe generation and width of every GPU (NVLink does not join every GPU pair)"
    slowest = min(hw.gpus, key=lambda g: pcie_gbps(g) or 0.0)
    return pcie_gbps(
        slowest
    ) or 0.0, f"NVLink does not join every GPU: PCIe gen{slowest.pcie_gen} x{slowest.pcie_width}"


def _placed(gpu: Gpu, wiring: Wiring) -> str:
    if not wiring.placed:
        return ""
    return f"GPU {gpu.index}'s {gpu.nvlink_down} down links taken to end where {wiring.placed} do"


def _wired_note(wired: int, state: str, notes: list[str]) -> str:
    return "; ".join([f"{wired} wired, {state}", *(n for n in notes if n)])


def rdma_source(hw: HostHardware) -> str:
    """E.g. 'the full complement of 8 InfiniBand ports on n1 (8 listed, 7 active) x 400 Gb/s = 400 GB/s
    per direction'."""
    rdma = hw.rdma
    listed = f"{len(rdma.ports)} listed, {len(rdma.up)} active"
    slow = len(rdma.up) - len(rdma.healthy)
    listed += f", {slow} below that rate" if slow else ""
    if rdma.expected:
        listed = f"{rdma.expected} expected (preflight_rdma_ports_expected); {listed}"
    return (
        f"the full complement of {rdma.counted} {rdma.layer} ports on {hw.host} ({listed}) "
        f"x {rdma.port_gbit or 0:g} Gb/s = {hw.rdma_gbps or 0:g} GB/s per direction"
    )


def _gate(test: str, metric: str, limit: float, key: str, source: str, part: str) -> DerivedGate:
    frac = fractions()["absolute"][key]
    return DerivedGate(test, metric, limit, frac.value, "absolute", source, part)
