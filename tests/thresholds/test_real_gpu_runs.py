"""The derived gates against real GPU runs (fixtures/README.md): each run re-judged under today's gates.

A healthy 1x H100 and 1x H200 must PASS with performance gates present; the same GPU shared with another
process (bf16 GEMMs running beside the probe) must FAIL, naming that GPU by index, bus id and UUID.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pav.results import HostRecord, TestResult, verdict_of
from pav.thresholds.apply import apply_derived, derive_hosts, gates_record
from pav.thresholds.derive import derive_host
from pav.thresholds.hardware import read_hardware
from tests.conftest import run_cli

FIXTURES = Path(__file__).parent / "fixtures"
RUNS = {
    "h100": ("h100-1gpu-healthy.json", "h100-1gpu-gpu-busy.json", "GPU-cb742177-16ad-07fd-6e4c-07514ed69b1d"),
    "h200": ("h200-1gpu-healthy.json", "h200-1gpu-gpu-busy.json", "GPU-74482c88-6761-e832-c8c1-4a49b4edbc54"),
}


def rejudge(name: str) -> tuple[list[TestResult], dict[str, Any]]:
    """The run's results as the profile alone judged them, then judged by today's derived gates."""
    run = json.loads((FIXTURES / name).read_text())
    tests = []
    for raw in run["tests"]:
        profile_gates = [g for g in raw["threshold"].get("gates", []) if "basis" not in g]
        threshold = {**raw["threshold"], "gates": profile_gates}
        threshold.pop("missing", None)
        status = "pass" if raw["status"] == "fail" and raw["name"] == "gpu_probe" else raw["status"]
        tests.append(TestResult(raw["name"], raw["hosts"], status, "", raw["metrics"], threshold))
    hosts = {n: HostRecord(n, facts=h["facts"]) for n, h in run["hosts"].items()}
    derivation = derive_hosts(hosts)
    apply_derived(tests, derivation, "auto")
    return tests, gates_record(tests, derivation, "auto")["localhost"]


@pytest.mark.parametrize("gpu", RUNS)
def test_healthy_run_passes_with_performance_gates(gpu: str) -> None:
    tests, record = rejudge(RUNS[gpu][0])
    assert verdict_of(tests) == "PASS", [t.reason for t in tests if t.reason]
    assert record["derived"] and record["missing"] == [] and record["facts_used"]["source"] == "nvml"
    probe = next(t for t in tests if t.name == "gpu_probe")
    derived = {g["metric"] for g in probe.threshold["gates"] if g.get("basis") == "absolute"}
    assert derived == {"gemm_bf16_tflops.0", "hbm_copy_gbps.0", "h2d_gbps.0", "d2h_gbps.0"}


@pytest.mark.parametrize("gpu", RUNS)
def test_a_gpu_shared_with_another_process_fails_naming_it(gpu: str) -> None:
    tests, _ = rejudge(RUNS[gpu][1])
    assert verdict_of(tests) == "FAIL"
    [failed] = [t for t in tests if t.status != "pass" and t.status != "skipped"]
    assert failed.name == "gpu_probe"
    assert failed.reason.startswith(f"GPU 0 (00000000:00:06.0, {RUNS[gpu][2]}): gemm_bf16_tflops.0 ")


@pytest.mark.parametrize("gpu", RUNS)
def test_one_gpu_skips_collectives_instead_of_printing_a_busbw(gpu: str) -> None:
    run = json.loads((FIXTURES / RUNS[gpu][0]).read_text())
    skipped = {t["name"]: t["reason"] for t in run["tests"] if t["status"] == "skipped"}
    assert skipped["torch_nccl_allreduce"].startswith("needs 2 GPUs, the host has 1")


def test_real_nvml_facts_derive_every_gate_a_one_gpu_host_needs() -> None:
    facts = json.loads((FIXTURES / RUNS["h200"][0]).read_text())["hosts"]["localhost"]["facts"]
    hw = read_hardware("localhost", facts)
    assert hw.source == "nvml" and [g.name for g in hw.gpus] == ["NVIDIA H200"]
    assert hw.gpus[0].pcie_gen == 5 and hw.gpus[0].pcie_width == 16 and hw.gpus[0].nvlink_up == 0
    assert {d.metric for d in derive_host(hw)} == {
        "gemm_bf16_tflops.0", "hbm_copy_gbps.0", "h2d_gbps.0", "d2h_gbps.0"
    }  # fmt: skip


def test_gates_command_on_a_real_run() -> None:
    run = run_cli("gates", "--results", str(FIXTURES / RUNS["h100"][0]))
    assert run.rc == 0, run.stdout + run.stderr
    assert "localhost: 1x NVIDIA H100 80GB HBM3 (facts from nvml)" in run.stdout
    assert "MISSING" not in run.stdout
