"""The burn-in and the SDC check run for real: torchrun with CPU ranks on gloo (fp32, tiny sizes), the same
code as on GPUs; plus the comparison and the window bookkeeping in process."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import torch
from pav_payload import sdc
from pav_payload.burn import BurnConfig, Window, attach_samples
from pav_payload.burn_sampler import Sample, Sampler

from tests.payload.test_payload import TORCHRUN, Launched, _load, _run, suite

SDC_SMALL = ("--sdc-n", "32", "--sdc-layers", "3", "--sdc-reps", "4")
BURN_SMALL = ("--sample-s", "0.5", "--gemm-n", "64", "--hbm-mib", "1",
              "--allreduce-mib", "0.01", *SDC_SMALL)  # fmt: skip


def ranks(out: Path, nproc: int, *args: str) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    launcher = [str(TORCHRUN), "--standalone", f"--nproc_per_node={nproc}", "-m", "pav_payload"]
    args = (*args, "--test-id", args[0])
    proc = _run([*launcher, *args], out)
    return proc, [_load(out, args, rank) for rank in range(nproc)]


# The 2-rank torchrun launches of this module, one suite launch (pav_payload suite, as test_payload's, issue
# 49): keyed by the test that reads it, each with its own args, rank reports and exit code (the worst over
# its ranks, what a launch of its own exits with). The 3-rank launch keeps a launch of its own.
SUITE: dict[str, tuple[str, ...]] = {
    # Three windows of half a second: each rank spins a core for the whole burn (issue 49: the fast lane's).
    "test_burn_windows_on_two_cpu_ranks": ("burn", "--duration-s", "1.5", "--window-s", "0.5", *BURN_SMALL),
    "test_sdc_fault_fails_the_named_rank_only": ("sdc", *SDC_SMALL, "--inject-sdc-gpu", "1"),
    "test_sdc_two_gpus_disagreeing_have_no_majority": ("sdc", *SDC_SMALL, "--inject-sdc-gpu", "1",
                                                       "--inject-sdc-rep", "-1"),
    "test_burn_sdc_fault_names_start_and_end": ("burn", "--duration-s", "1", "--window-s", "1", *BURN_SMALL,
                                                "--inject-sdc-gpu", "0"),
}  # fmt: skip


@pytest.fixture(scope="module")
def launched(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Launched]:
    """The suite launch of the tests of SUITE this session runs (all slow: -m "not slow" leaves them out,
    and so their launch)."""
    selected = {item.name for item in request.session.items if item.module is request.module}
    tests = {name: (*args, "--test-id", args[0]) for name, args in SUITE.items() if name in selected}
    proc, done = suite(tmp_path_factory.mktemp("suite"), tests)
    assert proc.returncode == 0  # a test that passed or failed ends no suite; an error would
    return done


@pytest.fixture
def launch(request: pytest.FixtureRequest, launched: dict[str, Launched]) -> Launched:
    """This test's launch in the suite."""
    return launched[request.node.name]


# --- in process -------------------------------------------------------------------------------------------


def config(**changes: Any) -> sdc.SdcConfig:
    base = {"n": 16, "layers": 2, "reps": 5, "seed": 3}
    return sdc.SdcConfig(**(base | changes))


def test_sdc_healthy_repetitions_are_bitwise_equal() -> None:
    result = sdc.check(torch.device("cpu"), config(), 0, "local rank 0 (CPU)")
    assert result.mismatches == []
    assert result.distinct == 1
    assert len(result.digest) == 64


def test_sdc_fault_names_the_repetition_and_first_element() -> None:
    result = sdc.check(torch.device("cpu"), config(inject_gpu=0, inject_rep=3), 0, "GPU 0 (bus, uuid)")
    assert result.distinct == 2
    [bad] = result.mismatches
    assert bad.rep == 3
    assert bad.element == 16 * 16 // 2 + 7  # where the fault flips
    assert bad.got != bad.want
    assert result.reason.startswith("SDC: GPU 0 (bus, uuid): repetition 3 of 5 differs from the majority")
    assert "element 135 (row 8, column 7)" in result.reason


def test_sdc_fault_on_another_gpu_leaves_this_one_clean() -> None:
    assert sdc.check(torch.device("cpu"), config(inject_gpu=1), 0, "GPU 0").mismatches == []


def test_sdc_same_seed_same_digest_other_seed_other() -> None:
    one = sdc.check(torch.device("cpu"), config(), 0, "a").digest
    assert sdc.check(torch.device("cpu"), config(), 0, "b").digest == one
    assert sdc.check(torch.device("cpu"), config(seed=4), 0, "c").digest != one


def test_first_difference_is_bitwise() -> None:
    want = torch.tensor([0.0, 1.0, 2.0])
    got = torch.tensor([-0.0, 1.0, 2.0])  # equal as numbers, not as bits
    assert sdc.first_difference(got, want, 0, "x").element == 0
    assert sdc.first_difference(torch.tensor([1.0, 2.5]), torch.tensor([1.0, 2.0]), None, "x").element == 1


def test_burn_config_counts_windows_and_refuses_nonsense() -> None:
    args = dict(duration_s=65.0, window_s=30.0, sample_s=2.0, gemm_n=8, gemm_per_step=1, hbm_mib=1,
                allreduce_every=2, allreduce_mib=1.0)  # fmt: skip
    assert BurnConfig(**args).windows == 3
    assert BurnConfig(**(args | {"duration_s": 60.0})).windows == 2
    import argparse

    with pytest.raises(ValueError, match="must be > 0"):
        BurnConfig.from_args(argparse.Namespace(**(args | {"window_s": 0.0})))


def test_samples_fold_into_their_windows() -> None:
    windows = [Window(0, 0.0, 30.0, 700.0, 3000.0, 10), Window(1, 30.0, 60.0, 690.0, 3000.0, 10)]
    samples = [
        Sample(0.0, 1980, 40, 690.0, ["sw_power_cap"], 0, 2),
        Sample(29.0, 1800, 60, 700.0, [], 0, 2),
        Sample(31.0, 1700, 70, 699.0, ["hw_thermal_slowdown"], 1, 3),
        Sample(60.2, 1750, 71, 650.0, [], 1, 3),  # the stop's sample: the last window's
    ]
    attach_samples(windows, samples)
    assert (windows[0].sm_clock_min_mhz, windows[0].temp_max_c, windows[0].reasons) == (
        1800,
        60,
        ("sw_power_cap",),
    )
    assert (windows[1].sm_clock_min_mhz, windows[1].temp_max_c) == (1700, 71)
    assert windows[1].reasons == ("hw_thermal_slowdown",)
    assert (windows[1].ecc_uncorrected, windows[1].ecc_corrected) == (1, 3)


def test_sampler_on_a_cpu_rank_records_why_nothing_was_read() -> None:
    sampled = Sampler(None, 0.1, 1.0, 0.0).start().stop()
    assert sampled.samples == []
    assert sampled.nvml == "no GPU: a CPU rank has nothing to sample"


# --- torchrun, CPU ranks ----------------------------------------------------------------------------------


@pytest.mark.slow  # real payload processes (torchrun)
def test_a_gpu_ranks_sampler_reads_the_kernel_log_here() -> None:
    """A rank with a GPU's bus id scans the kernel log for its Xids at the start and the stop (on the first
    2x H200 run this path raised: the scan's field is `missing`). No GPU here: no NVML; a real log."""
    sampler = Sampler("00000000:00:06.0", 0.05, 0.05, 0.0).start()
    sampled = sampler.stop()
    assert sampled.xid_source in ("dmesg", "journalctl", "none")
    assert sampled.xid_source != "none" or sampled.xid_note  # unread: it says why
    assert sampled.xids == []  # nothing new in a tenth of a second, and no GPU of that bus id here


@pytest.mark.slow  # real payload processes (torchrun)
def test_burn_windows_on_two_cpu_ranks(launch: Launched) -> None:
    reports = launch.reports
    assert launch.code == 0
    for rank, report in enumerate(reports):
        m = report["metrics"]
        assert report["status"] == "pass" and report["kind"] == "burn"
        assert [w["index"] for w in m["windows"]] == [0, 1, 2]
        assert all(w["tflops"] > 0 and w["steps"] > 0 for w in m["windows"])
        assert m["windows"][-1]["end_s"] >= 1.4  # windows end at their deadlines from the start
        assert m["allreduce_checks"] == 2 and m["wrong_total"] == 0  # every 2nd window and the last
        assert m["sdc_mismatches"] == 0 and m["sdc"]["start"]["digest"] == m["sdc"]["end"]["digest"]
        assert list(m["gpu"]) == [str(rank)]
        assert m["nvml"].startswith("no GPU")
    assert reports[0]["metrics"]["sdc"]["start"]["digest"] == reports[1]["metrics"]["sdc"]["start"]["digest"]


@pytest.mark.slow  # real payload processes (torchrun)
def test_sdc_fault_fails_the_named_rank_only(launch: Launched) -> None:
    reports = launch.reports
    assert launch.code == 1
    assert reports[0]["status"] == "pass"
    assert reports[1]["status"] == "fail"
    assert reports[1]["reason"].startswith("SDC: local rank 1 (CPU): repetition 1 of 4 differs")
    assert reports[1]["metrics"]["sdc"]["mismatches"][0]["element"] == 32 * 32 // 2 + 7


@pytest.mark.slow  # real payload processes (torchrun)
def test_sdc_gpu_wrong_every_time_is_the_hosts_minority(tmp_path: Path) -> None:
    """Consistent on itself, different from the others: only the comparison across GPUs sees it."""
    proc, reports = ranks(tmp_path, 3, "sdc", *SDC_SMALL, "--inject-sdc-gpu", "2", "--inject-sdc-rep", "-1")
    assert proc.returncode == 1
    assert [r["status"] for r in reports] == ["pass", "pass", "fail"]
    assert "its result differs from the majority of the host's 3 CPU ranks (rank 0)" in reports[2]["reason"]


@pytest.mark.slow  # real payload processes (torchrun)
def test_sdc_two_gpus_disagreeing_have_no_majority(launch: Launched) -> None:
    reports = launch.reports
    assert launch.code == 1
    assert "CPU rank 0 (no majority among the host's 2 CPU ranks)" in reports[1]["reason"]


@pytest.mark.slow  # real payload processes (torchrun)
def test_burn_sdc_fault_names_start_and_end(launch: Launched) -> None:
    reports = launch.reports
    assert launch.code == 1
    assert reports[0]["status"] == "fail" and reports[1]["status"] == "pass"
    assert reports[0]["metrics"]["sdc_mismatches"] == 2
    assert "(the SDC check at the burn-in's start)" in reports[0]["reason"]
    assert "(the SDC check at the burn-in's end)" in reports[0]["reason"]
