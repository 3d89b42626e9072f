"""The burn-in gates (issue 40) over recorded-shape series: each fault FAILs naming the GPU and the minute,
a healthy burn-in PASSes; applied by the run's Judge (thresholds/apply.py), whatever profile was chosen."""

from __future__ import annotations

from typing import Any

from pav.evaluate import summarize
from pav.results import HostRecord, TestResult, verdict_of
from pav.thresholds.apply import apply_derived, derive_hosts
from pav.thresholds.burn_in import burn_in_checks
from pav.thresholds.burn_series import summarize_burn, summarize_sdc
from tests.thresholds.test_derive import bus, hgx

WINDOW_S = 30.0


def rank_report(key: int, tflops: list[float], **extra: Any) -> dict[str, Any]:
    """A gpu_burn rank's report as the payload writes it, on a CUDA GPU sampled every 10 s."""
    windows = []
    samples = []
    reasons_at: dict[int, list[str]] = extra.pop("reasons_at", {})
    ecc_at: dict[int, int] = extra.pop("ecc_at", {})
    ecc = 0
    for i, value in enumerate(tflops):
        ecc = ecc_at.get(i, ecc)
        start, end = i * WINDOW_S, (i + 1) * WINDOW_S
        reasons = ["sw_power_cap", *reasons_at.get(i, [])]
        windows.append({"index": i, "start_s": start, "end_s": end, "tflops": value, "hbm_gbps": 2900.0,
                        "steps": 100, "sm_clock_min_mhz": 1755, "temp_max_c": 60 + i, "power_max_w": 699.0,
                        "reasons": reasons, "ecc_uncorrected": ecc, "ecc_corrected": 0})  # fmt: skip
        samples += [{"t_s": start + s, "sm_mhz": 1755, "temp_c": 60 + i, "power_w": 699.0, "reasons": reasons,
                     "ecc_uncorrected": ecc, "ecc_corrected": 0} for s in (0.0, 10.0, 20.0)]  # fmt: skip
    samples[0]["ecc_uncorrected"] = 0
    metrics = {
        "gpu": {
            str(key): {"name": "NVIDIA H100 80GB HBM3", "uuid": f"GPU-{key:04d}-uuid", "pci_bus_id": bus(key)}
        },
        "device_type": "cuda",
        "config": {"duration_s": WINDOW_S * len(tflops), "window_s": WINDOW_S},
        "windows": windows,
        "samples": samples,
        "xids": extra.pop("xids", []),
        "nvml": "",
        "xid_source": "dmesg",
        "xid_note": "",
        "allreduce_checks": 5,
        "wrong_total": 0,
        "sdc_mismatches": 0,
    }
    metrics |= extra
    return {"rank": key, "kind": "burn", "world_size": 2, "hostname": "gpu-1", "status": "pass",
            "metrics": metrics}  # fmt: skip


STEADY = [790.0, 780.0, 775.0, 772.0, 770.0, 770.0, 769.0, 770.0, 771.0, 770.0]
HOG_FROM_MINUTE_3 = [790.0, 780.0, 775.0, 772.0, 770.0, 400.0, 395.0, 390.0, 392.0, 391.0]


def judged(
    *reports: dict[str, Any], profile: str = "auto", facts: dict[str, Any] | None = None
) -> TestResult:
    test = TestResult("gpu_burn", ["gpu-1"], "pass", "", summarize(list(reports)), {})
    hosts = {"gpu-1": HostRecord("gpu-1", facts=facts if facts is not None else hgx(2))}
    apply_derived([test], derive_hosts(hosts), profile)
    return test


def test_a_healthy_burn_in_passes_with_every_gate_recorded() -> None:
    test = judged(rank_report(0, STEADY), rank_report(1, STEADY))
    assert verdict_of([test]) == "PASS", test.reason
    gates = [g for g in test.threshold["gates"] if g["basis"] == "burn-in"]
    # Per GPU: against its first window and (but the best) the host's best, throttling, ECC, Xids.
    assert len(gates) == 9
    assert {g["status"] for g in gates} == {"pass"}
    assert test.metrics["burn_in_last_tflops"] == {"0": 770.0, "1": 770.0}


def test_a_gpu_that_falls_at_minute_3_is_named_with_the_minute() -> None:
    test = judged(rank_report(0, STEADY), rank_report(1, HOG_FROM_MINUTE_3))
    assert test.status == "fail"
    assert test.reason.startswith(
        "GPU 1 (00000000:28:00.0, GPU-0001-uuid): fell to 391 TFLOP/s (last window)"
    )
    assert "first below it at minute 3 (the window 150-180 s into the burn-in) (400 TFLOP/s)" in test.reason
    assert "under 0.9 x the host's best GPU (GPU 0 (" in test.reason
    assert "GPU 0 (" not in test.reason.split("; ")[0][:6]


def test_the_gates_hold_under_the_gpu_correctness_profile_too() -> None:
    test = judged(rank_report(0, STEADY), rank_report(1, HOG_FROM_MINUTE_3), profile="gpu-correctness")
    assert test.status == "fail" and "GPU 1 (" in test.reason


def test_a_hardware_throttle_reason_fails_from_its_minute() -> None:
    test = judged(rank_report(0, STEADY, reasons_at={4: ["hw_thermal_slowdown"]}), rank_report(1, STEADY))
    assert test.status == "fail"
    assert (
        "GPU 0 (00000000:18:00.0, GPU-0000-uuid): clocks held back by hw_thermal_slowdown from minute 3"
        in (test.reason)
    )


def test_the_power_cap_alone_is_how_a_gpu_runs_under_gemm() -> None:
    test = judged(rank_report(0, STEADY), rank_report(1, STEADY))
    windows = test.metrics["burn_in"]["gpus"]["0"]["windows"]
    assert all("sw_power_cap" in w["reasons"] for w in windows)
    assert test.status == "pass"


def test_a_new_uncorrectable_ecc_error_fails_naming_the_minute() -> None:
    test = judged(rank_report(0, STEADY), rank_report(1, STEADY, ecc_at={7: 2}))
    assert test.status == "fail"
    assert (
        "GPU 1 (00000000:28:00.0, GPU-0001-uuid): 2 new uncorrectable ECC errors during the burn-in "
        "by minute 4" in test.reason
    )


def test_a_fault_xid_fails_and_an_application_xid_does_not() -> None:
    xid = {"t_s": 200.0, "xid": 79, "line": "NVRM: Xid (PCI:0000:28:00): 79, GPU has fallen off the bus."}
    test = judged(rank_report(0, STEADY), rank_report(1, STEADY, xids=[xid]))
    assert test.status == "fail"
    assert "GPU 1 (00000000:28:00.0, GPU-0001-uuid): Xid 79 in the kernel log at minute 4" in test.reason
    app = dict(xid, xid=13, line="NVRM: Xid (PCI:0000:28:00): 13, Graphics Exception")
    assert judged(rank_report(0, STEADY), rank_report(1, STEADY, xids=[app])).status == "pass"


def test_a_cuda_gpu_without_nvml_samples_passes_no_gate() -> None:
    blind = rank_report(1, STEADY, samples=[], nvml="NVML unavailable: ModuleNotFoundError: pynvml")
    test = judged(rank_report(0, STEADY), blind)
    assert test.status == "fail"
    assert "GPU 1 (00000000:28:00.0, GPU-0001-uuid): no NVML sample during the burn-in (NVML unavailable" in (
        test.reason
    )


def test_a_rank_failure_keeps_its_reason_and_the_gates_add_theirs() -> None:
    sdc = rank_report(0, STEADY, sdc_mismatches=1)
    test = TestResult(
        "gpu_burn",
        ["gpu-1"],
        "fail",
        "rank 0: SDC: GPU 0 ...",
        summarize([sdc, rank_report(1, HOG_FROM_MINUTE_3)]),
    )
    apply_derived([test], derive_hosts({"gpu-1": HostRecord("gpu-1", facts=hgx(2))}), "auto")
    assert test.reason.startswith("rank 0: SDC: GPU 0 ...; GPU 1 (")


def test_without_facts_the_payload_names_the_gpu() -> None:
    checks = burn_in_checks(summarize_burn([rank_report(0, STEADY), rank_report(1, HOG_FROM_MINUTE_3)]), {})
    failing = [c for c in checks if c["status"] == "fail"]
    assert failing and all(c["part"] == "GPU 1 (00000000:28:00.0, GPU-0001-uuid)" for c in failing)


def test_summaries_are_compact_and_keep_the_series() -> None:
    metrics = summarize_burn([rank_report(0, STEADY), rank_report(1, STEADY)])
    gpu = metrics["burn_in"]["gpus"]["1"]
    assert len(gpu["windows"]) == 10 and gpu["samples"] == 30
    assert "samples" not in str(gpu["windows"][0])  # the raw samples stay in the rank reports
    assert metrics["burn_in_sm_mhz_min"] == {"0": 1755, "1": 1755}
    assert metrics["burn_in"]["window_s"] == WINDOW_S
    sdc = summarize_sdc([{"metrics": {"gpu": {"0": {}}, "sdc": {"digest": "x"}, "sdc_mismatches": 1}}])
    assert sdc["sdc_mismatches"] == 1 and sdc["sdc"] == {"0": {"digest": "x"}}
