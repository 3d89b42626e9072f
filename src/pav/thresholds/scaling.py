"""Metrics that need two tests: scaling efficiency of DDP over all GPUs of a host against the 1-GPU
baseline, and of training over every host against one node (the same test within each host)."""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass

from pav.catalog import CATALOG, spec_of
from pav.results import TestResult
from pav.thresholds.derive import DerivedGate, fractions
from pav.thresholds.gate import Gate

DERIVED = {"scaling_efficiency", "scaling_efficiency_nodes"}
# A test's baselines and the throughput compared are its catalog spec's (scaling_baselines,
# scaling_throughput). Within a host (a DDP test, host scope): per-GPU throughput over the 1-GPU baseline's
# total on the same host. Across hosts (cluster scope), weak scaling: each GPU keeps its batch, so per-GPU
# throughput across N nodes over the median single node's is the efficiency from 1 to N nodes; what it
# loses is the network between the hosts, and a straggler's pace (which its own fleet gates name). Nodes of
# one GPU (a machine split into nodes, 1-GPU VMs) run no DDP of their own: their 1-GPU run of the same model
# is that node's throughput.
GRAD_BYTES = 4  # DDP reduces gradients in the parameters' dtype: float32 in every DDP test of the catalog
# Where a host's measured all_reduce busbw comes from: the torch collectives first, then nccl-tests.
ALL_REDUCE = [spec for spec in CATALOG.values() if "all_reduce" in spec.busbw_ops]


@dataclass(frozen=True)
class BusFloor:
    """What a host's all_reduce must reach at least (its derived gate), for a host that measured none."""

    gbps: float
    source: str


def split_gates(gates: list[Gate]) -> tuple[list[Gate], list[Gate]]:
    """Gates on measured metrics (checked when a test is judged) and on derived ones (checked here)."""
    return [g for g in gates if g.metric not in DERIVED], [g for g in gates if g.metric in DERIVED]


def add_scaling(
    tests: list[TestResult],
    profile_gates: dict[str, list[Gate]],
    derive: bool = True,
    floors: Mapping[str, BusFloor] | None = None,
) -> None:
    """Each scaling metric and its gates: the profile's where it has one, else (derive) the bound this
    shape can reach (ddp_gate). A baseline that did not run makes the gate not applicable, with why."""
    by_key = {(t.name, tuple(t.hosts)): t for t in tests}
    for test in tests:
        spec = spec_of(test.name)  # None: a recorded test this release does not know
        if test.status != "pass" or spec is None or not spec.scaling_baselines:
            continue
        metric = "scaling_efficiency" if spec.scope == "host" else "scaling_efficiency_nodes"
        throughput = spec.scaling_throughput
        if spec.scope == "host":
            base = by_key.get((spec.scaling_baselines[0], tuple(test.hosts)))
            bases = [(test.hosts[0], base)]
        else:
            bases = [(host, _first_run(by_key, spec.scaling_baselines, host)) for host in test.hosts]
        figure = f"{throughput}_total" if spec.scope == "host" else f"{throughput}_per_rank_min"
        why_not = _unmeasured(spec.scaling_baselines, bases, figure)
        if not why_not and not test.metrics.get(f"{throughput}_per_rank_min"):
            why_not = f"{test.name} recorded no {throughput}_per_rank_min"
        if why_not:
            test.threshold.setdefault("not_applicable", []).append(
                {"metric": metric, "not_applicable": f"not measured: {why_not}"}
            )
            continue
        per_node = [float(b.metrics[figure]) for _, b in bases if b is not None]
        # Over the median node, not the slowest: a straggler is no baseline for itself (issue 63); the
        # fleet gates name it from its own figures (fleet.py).
        test.metrics[metric] = test.metrics[f"{throughput}_per_rank_min"] / statistics.median(per_node)
        gates = profile_gates.get(test.name, [])
        test.threshold.setdefault("gates", []).extend(g.describe() for g in gates)
        failures = [reason for gate in gates if (reason := gate.check(test.metrics))]
        if not gates and derive and spec.scope == "host" and bases[0][1] is not None:
            floor = (floors or {}).get(test.hosts[0])
            checked = ddp_gate(test, bases[0][1], tests, floor).check(test.metrics)
            test.threshold["gates"].append(checked)
            failures += [checked["reason"]] if checked["status"] != "pass" else []
        if failures:
            test.status, test.reason = "fail", "; ".join(failures)


def ddp_gate(
    test: TestResult, base: TestResult, tests: list[TestResult], floor: BusFloor | None
) -> DerivedGate:
    """DDP within a host can lose at most the gradient all_reduce, were none of it hidden behind the
    backward pass: the gradient bytes at the all_reduce bandwidth this host measured (else its gate's
    minimum), against the step time one GPU measured. The gate is a fraction of that bound."""
    step_s = base.metrics.get("step_time_s_median")
    params, ranks = test.metrics.get("parameters"), test.metrics.get("world_size")
    bus = _measured_busbw(test.hosts[0], tests)
    if bus is None and floor is not None:
        bus = (floor.gbps, f"the host's all_reduce gate, {floor.source}")
    frac = fractions()["absolute"]["scaling_efficiency"]
    if not (step_s and params and ranks and ranks > 1 and bus):
        lacking = "the all_reduce bandwidth" if not bus else "the step time or the gradient size"
        source = f"{lacking} of this run is unknown: communication counted as hidden"
        return DerivedGate(test.name, "scaling_efficiency", 1.0, frac.value, "absolute", source, "host")
    comm_s = params * GRAD_BYTES * 2 * (ranks - 1) / ranks / (bus[0] * 1e9)
    bound = step_s / (step_s + comm_s)
    source = (
        f"one GPU's step {step_s * 1e3:.1f} ms ({base.name}) over that plus "
        f"{params * GRAD_BYTES / 1e6:.1f} MB of gradients all-reduced over {ranks} GPUs at "
        f"{bus[0]:.4g} GB/s bus bandwidth ({bus[1]}): "
        f"{comm_s * 1e3:.2f} ms if none of it overlapped"
    )
    return DerivedGate(test.name, "scaling_efficiency", bound, frac.value, "absolute", source, "host")


def floor_of(gates: list[object]) -> BusFloor | None:
    """A host's all_reduce floor from its derived gates (thresholds/derive.py)."""
    for gate in gates:
        if isinstance(gate, DerivedGate) and gate.test == ALL_REDUCE[0].name:
            return BusFloor(gate.min, f"{gate.fraction:g} x {gate.limit:.4g} GB/s, {gate.source}")
    return None


def _measured_busbw(host: str, tests: list[TestResult]) -> tuple[float, str] | None:
    """The lowest all_reduce bus bandwidth this host measured (its smallest size: the nearest to DDP's
    buckets), from the torch collectives or else nccl-tests."""
    for spec in ALL_REDUCE:
        found = next(
            (t for t in tests if t.name == spec.name and t.hosts == [host] and t.status == "pass"), None
        )
        table = (found.metrics.get("busbw_gbps") or {}) if found else {}
        table = table.get("all_reduce") or {} if spec.busbw_per_op else table
        sizes = sorted((int(k), float(v)) for k, v in table.items() if str(k).isdigit() and v)
        if sizes:
            size, gbps = sizes[0]
            return gbps, f"{spec.name} at {size >> 20} MiB"
    return None


def _unmeasured(names: tuple[str, ...], bases: list[tuple[str, TestResult | None]], figure: str) -> str:
    """Why the baseline's figure is missing on some host, or "" when every host's passed with it."""
    for host, base in bases:
        if base is None:
            return f"no run of {' or '.join(names)} on {host} in this run: add it to pav_tests"
        if base.status != "pass":
            return f"{base.name} on {host} did not pass ({base.status}: {base.reason or 'no reason'})"
        if not base.metrics.get(figure):
            return f"{base.name} on {host} recorded no {figure}"
    return ""


def _first_run(
    by_key: dict[tuple[str, tuple[str, ...]], TestResult], names: tuple[str, ...], host: str
) -> TestResult | None:
    """The host's own run of the first baseline that was not skipped there (1-GPU hosts skip DDP); else
    the first that was, whose reason then says why the metric was not measured."""
    runs = [r for name in names if (r := by_key.get((name, (host,)))) is not None]
    return next((r for r in runs if r.status != "skipped"), runs[0] if runs else None)
