"""Metrics that need two tests: scaling efficiency of DDP over all GPUs of a host against the 1-GPU
baseline, and of training over every host against one node (the same test within each host)."""

from __future__ import annotations

from pav.catalog import spec_of
from pav.results import TestResult
from pav.thresholds.gate import Gate

DERIVED = {"scaling_efficiency", "scaling_efficiency_nodes"}
# A test's baselines and the throughput compared are its catalog spec's (scaling_baselines,
# scaling_throughput). Within a host (a DDP test, host scope): per-GPU throughput over the 1-GPU baseline's
# total on the same host. Across hosts (cluster scope), weak scaling: each GPU keeps its batch, so per-GPU
# throughput across N nodes over the slowest single node's is the efficiency from 1 to N nodes; what it
# loses is the network between the hosts. Nodes of one GPU (a machine split into nodes, 1-GPU VMs) run no
# DDP of their own: their 1-GPU run of the same model is that node's throughput.


def split_gates(gates: list[Gate]) -> tuple[list[Gate], list[Gate]]:
    """Gates on measured metrics (checked when a test is judged) and on derived ones (checked here)."""
    return [g for g in gates if g.metric not in DERIVED], [g for g in gates if g.metric in DERIVED]


def add_scaling(tests: list[TestResult], derived_gates: dict[str, list[Gate]]) -> None:
    by_key = {(t.name, tuple(t.hosts)): t for t in tests}
    for test in tests:
        spec = spec_of(test.name)  # None: a recorded test this release does not know
        if test.status != "pass" or spec is None or not spec.scaling_baselines:
            continue
        throughput = spec.scaling_throughput
        if spec.scope == "host":
            base = by_key.get((spec.scaling_baselines[0], tuple(test.hosts)))
            single = base.metrics.get(f"{throughput}_total") if base and base.status == "pass" else None
            _ratio(test, "scaling_efficiency", test.metrics.get(f"{throughput}_per_rank_min"), single)
        else:
            nodes = [_first_run(by_key, spec.scaling_baselines, host) for host in test.hosts]
            per_node = [
                n.metrics.get(f"{throughput}_per_rank_min") if n and n.status == "pass" else None
                for n in nodes
            ]
            slowest = min(per_node) if per_node and None not in per_node else None
            _ratio(test, "scaling_efficiency_nodes", test.metrics.get(f"{throughput}_per_rank_min"), slowest)
        gates = derived_gates.get(test.name, [])
        test.threshold.setdefault("gates", []).extend(g.describe() for g in gates)
        failures = [reason for gate in gates if (reason := gate.check(test.metrics))]
        if failures:
            test.status, test.reason = "fail", "; ".join(failures)


def _first_run(
    by_key: dict[tuple[str, tuple[str, ...]], TestResult], names: tuple[str, ...], host: str
) -> TestResult | None:
    """The host's own run of the first baseline that was not skipped there (1-GPU hosts skip DDP)."""
    runs = [by_key.get((name, (host,))) for name in names]
    return next((r for r in runs if r is not None and r.status != "skipped"), None)


def _ratio(test: TestResult, metric: str, measured: float | None, baseline: float | None) -> None:
    """A baseline that did not pass leaves the metric out: its gate then fails as not measured."""
    if measured and baseline:
        test.metrics[metric] = measured / baseline
