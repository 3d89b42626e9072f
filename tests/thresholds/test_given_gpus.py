"""A host's GPUs are the ones it is given (issue 36): one 4-GPU machine as two inventory hosts, or a
scheduler's allocation. NVML lists every GPU of the machine and numbers them its own way; the probe's
figures are keyed by CUDA's position among the visible GPUs. Facts, gates and figures meet by UUID or bus
id, never by index."""

from __future__ import annotations

from typing import Any

from pav.results import HostRecord, TestResult, verdict_of
from pav.thresholds.apply import apply_derived, derive_hosts
from pav.thresholds.hardware import given_gpus, read_hardware
from pav.thresholds.health import health_results
from tests.thresholds.test_derive import bus, hgx

FIGURES = {"gemm_bf16_tflops": 780.0, "hbm_copy_gbps": 3000.0, "h2d_gbps": 54.0, "d2h_gbps": 55.0}


def probe_metrics(nvml_indices: list[int], visible: str | None) -> dict[str, Any]:
    """What the probe reports when CUDA shows it these NVML GPUs, in this order."""
    keys = [str(k) for k in range(len(nvml_indices))]
    seen = zip(keys, nvml_indices, strict=True)
    metrics: dict[str, Any] = {
        "gpu_count": len(keys),
        "gpu": {k: {"name": "x", "uuid": f"GPU-{i:04d}-uuid", "pci_bus_id": bus(i)} for k, i in seen},
        "cuda_visible_devices": visible,
        "wrong_total": 0,
    }
    metrics |= {m: dict.fromkeys(keys, v) for m, v in FIGURES.items()}
    metrics["p2p_gbps"] = {a: {b: 300.0 for b in keys if b != a} for a in keys}
    return metrics


def judged(facts: dict[str, Any], metrics: dict[str, Any]) -> TestResult:
    test = TestResult("gpu_probe", ["node-b"], "pass", "", metrics, {})
    apply_derived([test], derive_hosts({"node-b": HostRecord("node-b", facts=facts)}), "auto")
    return test


def test_a_host_given_gpus_2_and_3_is_judged_on_them_by_uuid() -> None:
    test = judged(hgx(4), probe_metrics([2, 3], "2,3"))
    assert verdict_of([test]) == "PASS", test.reason
    gates = {g["metric"]: g for g in test.threshold["gates"] if g["basis"] == "absolute"}
    # Figures keyed 0 and 1 by CUDA belong to NVML's GPUs 2 and 3, and the gates name them so.
    assert (
        gates["gemm_bf16_tflops.0"]["part"].startswith("GPU 2 (")
        and "GPU-0002-uuid" in gates["h2d_gbps.0"]["part"]
    )
    assert gates["gemm_bf16_tflops.1"]["part"].startswith("GPU 3 (")
    assert not any(k.endswith((".2", ".3")) for k in gates)
    assert gates["p2p_gbps.0.1"]["part"] == "GPU 2 -> GPU 3"


def test_a_gpu_cuda_did_not_see_on_a_host_given_every_gpu_fails_named() -> None:
    # No CUDA_VISIBLE_DEVICES, yet CUDA shows 3 of the 4 GPUs NVML lists: GPU 1 is broken, not someone else's.
    test = judged(hgx(4), probe_metrics([0, 2, 3], None))
    assert test.status == "fail"
    assert test.reason.startswith("GPU 1 (" + bus(1)) and "not measured" in test.reason
    gates = {g["metric"]: g for g in test.threshold["gates"] if g["basis"] == "absolute"}
    assert gates["gemm_bf16_tflops.1"]["part"].startswith("GPU 2 (")  # CUDA's 1 is NVML's 2


def test_preflight_gpu_ids_restrict_nvml_facts_by_bus_id() -> None:
    facts = hgx(4)
    facts["gpu"] = {
        "count": "2",
        "ids": "2,3",
        "devices": [[str(i), "x", "81559", "580", bus(i)] for i in (2, 3)],
    }
    hw = read_hardware("node-b", facts)
    assert [g.index for g in hw.gpus] == [2, 3]
    unfiltered = read_hardware("node-b", {**facts, "gpu": {**facts["gpu"], "ids": ""}})
    assert len(unfiltered.gpus) == 4


def test_a_probe_of_an_older_payload_keeps_nvml_indices() -> None:
    hw = given_gpus(read_hardware("n", hgx(2)), {"gpu": {"0": {"uuid": None, "pci_bus_id": None}}})
    assert [g.metric_key for g in hw.gpus] == ["0", "1"]


def test_gpu_health_of_a_host_given_gpus_2_and_3_answers_for_those_alone() -> None:
    facts = hgx(4, down={0: 3, 3: 1})  # GPU 0 is the other host's; GPU 3 is this one's
    facts["gpu"] = {
        "count": "2",
        "ids": "2,3",
        "devices": [[str(i), "x", "81559", "580", bus(i)] for i in (2, 3)],
    }
    [result] = health_results({"node-b": HostRecord("node-b", facts=facts)})
    assert result.metrics["gpus_checked"] == 2
    assert result.status == "fail" and result.reason.startswith("GPU 3 (")
    assert "GPU 0" not in result.reason
