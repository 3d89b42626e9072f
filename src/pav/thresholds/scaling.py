"""Metrics that need two tests: scaling efficiency of DDP over all GPUs against the 1-GPU baseline."""

from __future__ import annotations

from pav.results import TestResult
from pav.thresholds.gate import Gate

DERIVED = {"scaling_efficiency"}
# DDP test -> (its 1-GPU baseline, the throughput compared): tokens for language models, samples for images.
BASELINES = {
    "train_gpu_ddp": ("train_gpu_single", "tokens_per_s"),
    "train_gpu_resnet50_ddp": ("train_gpu_resnet50_single", "samples_per_s"),
}


def split_gates(gates: list[Gate]) -> tuple[list[Gate], list[Gate]]:
    """Gates on measured metrics (checked when a test is judged) and on derived ones (checked here)."""
    return [g for g in gates if g.metric not in DERIVED], [g for g in gates if g.metric in DERIVED]


def add_scaling(tests: list[TestResult], derived_gates: dict[str, list[Gate]]) -> None:
    by_key = {(t.name, tuple(t.hosts)): t for t in tests}
    for test in tests:
        if test.name not in BASELINES or test.status != "pass":
            continue
        base_name, throughput = BASELINES[test.name]
        base = by_key.get((base_name, tuple(test.hosts)))
        per_gpu = test.metrics.get(f"{throughput}_per_rank_min")
        single = base.metrics.get(f"{throughput}_total") if base and base.status == "pass" else None
        if per_gpu and single:
            test.metrics["scaling_efficiency"] = per_gpu / single
        gates = derived_gates.get(test.name, [])
        test.threshold.setdefault("gates", []).extend(g.describe() for g in gates)
        failures = [reason for gate in gates if (reason := gate.check(test.metrics))]
        if failures:
            test.status, test.reason = "fail", "; ".join(failures)
