"""gates RUN_DIR|results.json [--json] (or --results FILE): the gates the record's host facts derive, host by
host, then every gate `judge` applies to each recorded test (given the run dir, judged as `judge RUN_DIR`
judges it: from its raw host results too).

Each derived gate with its limit, fraction and the facts it came from, or the fact that is missing. Works on
a results.json of any release: what its facts allow is derived, the rest is named as missing. The applied
gates are what `provision-and-validate judge` judges the record by (pav.commands.judge.rejudge): a profile's
own gate where it overrides a derived one, the relative and reference gates, the declared bars.
Exit 0 when every gate could be derived, 1 when a fact is missing, 2 when the file cannot be read.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from pav.commands.judge import rejudge
from pav.errors import PavError
from pav.thresholds.derive import (
    INTER_NODE,
    Derived,
    Missing,
    NotApplicable,
    derive_fabric,
    derive_host,
    fractions,
)
from pav.thresholds.hardware import HostHardware, read_hardware

EXIT_ALL, EXIT_MISSING, EXIT_UNREADABLE = 0, 1, 2
NO_GPU = "no GPU: correctness gates only (thresholds/cpu.yml)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "run", nargs="?", type=Path, metavar="RUN_DIR|results.json",
        help="a run dir (the gates judge RUN_DIR applies, its raw host results read too) or a results.json",
    )  # fmt: skip
    parser.add_argument(
        "--results", type=Path, metavar="FILE", help="a run's results.json (as RUN_DIR|results.json)"
    )
    parser.add_argument(
        "--json", action="store_true",
        help="print one JSON object: host -> derived gates ([] for a host without GPU, `no_gpu` says why), "
        "`applied`",
    )  # fmt: skip


def run(args: argparse.Namespace) -> int:
    given = [p for p in (getattr(args, "run", None), args.results) if p is not None]
    if len(given) != 1:
        print("error: pass one run dir or results.json (RUN_DIR, or --results FILE)", file=sys.stderr)
        return EXIT_UNREADABLE
    path = given[0]
    file = path / "results.json" if path.is_dir() else path
    try:
        data = json.loads(file.read_text())
        hosts = data["hosts"]
        if not isinstance(hosts, dict):
            raise TypeError("'hosts' is not a mapping")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(
            f"error: cannot read {file} as results.json ({exc}); pass a run dir or its results.json",
            file=sys.stderr,
        )
        return EXIT_UNREADABLE
    hardware = [read_hardware(name, (rec or {}).get("facts") or {}) for name, rec in hosts.items()]
    table = derive_all(hardware)
    judged = applied(path)
    if args.json:
        print(json.dumps(as_json(hardware, table, judged), indent=2))
    else:
        print(render(hardware, table) + render_applied(judged), end="")
    missing = any(isinstance(d, Missing) for ds in table.values() for d in ds)
    return EXIT_MISSING if missing else EXIT_ALL


def as_json(
    hardware: list[HostHardware], table: dict[str, list[Derived]], judged: dict[str, Any]
) -> dict[str, Any]:
    """Every host of the record, its derived gates ([] where it has no GPU, `no_gpu` saying why), the
    fabric's, `applied`; `none_derived` where no host got one: a `{}` said nothing (issue 64)."""
    derived: dict[str, Any] = {hw.host: [] for hw in hardware}
    derived |= {h: [_entry(d) for d in ds] for h, ds in table.items()}
    no_gpu = {hw.host: NO_GPU for hw in hardware if not hw.gpus}
    extra: dict[str, Any] = {"applied": judged}
    if no_gpu:
        extra["no_gpu"] = no_gpu
    if not table:
        extra["none_derived"] = (
            "no host with a GPU in the record: correctness gates only"
            if hardware
            else "the record names no host"
        )
    return derived | extra


def derive_all(hardware: list[HostHardware]) -> dict[str, list[Derived]]:
    """Per host its derived gates; across hosts (key "fabric") the inter-node ones."""
    gpu_hosts = [hw for hw in hardware if hw.gpus]
    table: dict[str, list[Derived]] = {hw.host: derive_host(hw) for hw in gpu_hosts}
    if len(gpu_hosts) >= 2:
        table["fabric"] = [derive_fabric(gpu_hosts, test) for test in INTER_NODE]
    return table


def render(hardware: list[HostHardware], table: dict[str, list[Derived]]) -> str:
    lines: list[str] = [] if hardware else ["the record names no host: no gate is derived"]
    for hw in hardware:
        if not hw.gpus:
            lines.append(f"{hw.host}: {NO_GPU}")
            continue
        lines.append(f"{hw.host}: {len(hw.gpus)}x {hw.model} (facts from {hw.source})")
        lines += [_line(d) for d in table[hw.host]]
    if "fabric" in table:
        lines.append("across hosts:")
        lines += [_line(d) for d in table["fabric"]]
    rel = fractions()["relative"]
    lines.append(
        f"relative (every host): each GPU >= {rel['per_gpu'].value:g} x the median of its host's other GPUs; "
        f"each pair >= {rel['per_pair'].value:g} x the median pair on the same links"
    )
    return "\n".join(lines) + "\n"


def applied(path: Path) -> dict[str, Any]:
    """Per recorded test (NAME on HOSTS), the gates judge applies to it: {"profile": ..., "tests": {...}}, or
    {"error": why} where the record cannot be judged (no test results)."""
    try:
        found = rejudge(path)
    except PavError as exc:
        return {"error": str(exc)}
    tests: dict[str, list[dict[str, Any]]] = {}
    for judged in found.tests:
        test = judged.test
        gates = [_applied_gate(g) for g in test.threshold.get("gates") or [] if isinstance(g, dict)]
        gates += [
            {
                "metric": f"busbw_gbps.{g.get('size_bytes')}",
                "min": g.get("min_busbw_gbps"),
                "basis": "profile",
            }
            for g in test.threshold.get("nccl_tests") or []
            if isinstance(g, dict)
        ]
        gates += [{"metric": n.get("metric"), "not_applicable": n.get("not_applicable")}
                  for n in test.threshold.get("not_applicable") or []]  # fmt: skip
        tests[f"{test.name} on {', '.join(test.hosts)}"] = gates
    return {"profile": found.profile, "tests": tests}


def _applied_gate(gate: dict[str, Any]) -> dict[str, Any]:
    keys = ("metric", "min", "max", "expected", "basis", "source", "why")
    out = {k: gate[k] for k in keys if gate.get(k) is not None}
    return out | ({} if "basis" in out else {"basis": "profile"})


def render_applied(judged: dict[str, Any]) -> str:
    if "error" in judged:
        return f"applied by judge: none ({judged['error']})\n"
    lines = [f"applied by judge (profile {judged['profile']}), per test:"]
    for test, gates in judged["tests"].items():
        lines.append(f"  {test}:")
        for g in gates:
            if "not_applicable" in g:
                lines.append(f"    {g['metric']:<40} no gate: {g['not_applicable']}")
                continue
            bound = " ".join(f"{op} {g[k]:.4g}" for op, k in ((">=", "min"), ("<=", "max")) if k in g)
            bound = bound or (f"= {g['expected']}" if "expected" in g else "")  # NCCL's transport: a name
            lines.append(
                f"    {g['metric']:<40} {bound:<14} {g['basis']}: {g.get('source') or g.get('why', '')}"
            )
    return "\n".join(lines) + "\n"


def _line(d: Derived) -> str:
    if isinstance(d, Missing):
        return f"  {d.test:<28} {d.metric:<34} MISSING: {d.fact}"
    if isinstance(d, NotApplicable):
        return f"  {d.test:<28} {d.metric:<34} no gate: {d.why}"
    return (
        f"  {d.test:<28} {d.metric:<34} >= {d.min:<9.4g} = {d.fraction:g} x {d.limit:<8.4g} "
        f"{d.part}: {d.source}"
    )


def _entry(d: Derived) -> dict[str, Any]:
    return {"test": d.test} | d.describe()
