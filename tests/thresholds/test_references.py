"""Reference gates (pav.thresholds.references) and workload fingerprints (pav.workload), in process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from pav import workload
from pav.thresholds.derive import DerivedGate, NotApplicable
from pav.thresholds.hardware import read_hardware
from pav.thresholds.references import reference_gates, references
from tests.thresholds.fault_catalogue import FIXTURES, record_of

ROOT = Path(__file__).parents[2]
PROBE = "h200x2c-healthy-default"


def test_a_fingerprint_ignores_where_a_rank_writes_and_its_injected_faults() -> None:
    base = {"model": "resnet50", "batch_size": 256, "out": "results/a", "test_id": "a", "timeout_s": 60}
    moved = base | {"out": "results/b", "test_id": "b", "timeout_s": 900, "inject_exit": 1}
    assert workload.of_params(base).fingerprint == workload.of_params(moved).fingerprint
    assert workload.of_params(base | {"batch_size": 64}).fingerprint != workload.of_params(base).fingerprint


def test_nccl_tests_state_their_workload_in_their_log() -> None:
    log = (
        FIXTURES / "h200x4b-healthy-default/hosts/localhost/results/nccl_tests_all_reduce/launcher.log"
    ).read_text()
    found = workload.of_nccl_log(log)
    assert found is not None
    assert found.params == {
        "binary": "all_reduce_perf", "iters": 20, "max_bytes": 8 << 30, "min_bytes": 512 << 20, "step": 2,
        "step_kind": "factor", "threads": 1, "warmup": 1,
    }  # fmt: skip
    shorter = workload.of_nccl_log(log.replace("maxBytes 8589934592", "maxBytes 4294967296"))
    assert shorter is not None and shorter.fingerprint != found.fingerprint
    assert workload.of_nccl_log("no header") is None


def test_a_recorded_workload_reads_back() -> None:
    made = workload.of_params({"gemm_n": 8192})
    assert workload.recorded(made.to_dict()) == made
    assert workload.recorded({"fingerprint": 1}) is None


def _probe_inputs() -> tuple[dict, dict, object]:
    record = record_of(PROBE)
    test = next(t for t in record["tests"] if t["name"] == "gpu_probe")
    hw = read_hardware("localhost", record["hosts"]["localhost"]["facts"])
    return test["metrics"], test["workload"], hw


def test_the_probe_of_a_known_model_gets_a_reference_gate_per_gpu_and_pair() -> None:
    metrics, load, hw = _probe_inputs()
    labels = {g.metric_key: g.label() for g in hw.gpus}
    gates = [g for g in reference_gates("gpu_probe", metrics, load, hw, labels) if isinstance(g, DerivedGate)]
    gemm = [g for g in gates if g.metric.startswith("gemm_bf16_tflops.")]
    assert [g.part for g in gemm] == [labels["0"], labels["1"]]
    assert {g.metric for g in gates if g.metric.startswith("p2p_gbps.")} == {"p2p_gbps.0.1", "p2p_gbps.1.0"}
    assert all(g.basis == "reference" and "thresholds/references/nvidia-h200.yml" in g.source for g in gates)


def test_another_workload_meets_no_reference_and_says_which() -> None:
    metrics, load, hw = _probe_inputs()
    other = workload.of_params(load["params"] | {"gemm_n": 4096}).to_dict()
    found = reference_gates("gpu_probe", metrics, other, hw, {})
    assert len(found) == 1 and isinstance(found[0], NotApplicable)
    assert found[0].why.startswith(
        f"no reference for this workload ({other['fingerprint']}) on NVIDIA H200: "
    )
    assert load["fingerprint"] in found[0].why


def test_the_reference_files_are_what_the_healthy_runs_fit() -> None:
    """Hand edits (a loosened fraction, a lowered reference) fail here: the files are the fit's output."""
    assert set(references()) == {"NVIDIA H100 80GB HBM3", "NVIDIA H200"}
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts/fit-references"), "--check"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
