"""``python -m pav_payload probe``: its measurements on CPU with tiny sizes (the arithmetic and the shape of
the metrics), the check that catches a bad copy, and the subcommand under torchrun on this CUDA-less host."""

from __future__ import annotations

import argparse
import json
import math
import os
import queue
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from pav_payload.cli import build_parser
from pav_payload.probe import NO_CUDA, measure_host, outcome_of
from pav_payload.probe_measure import (
    Checks,
    ProbeSizes,
    Repeats,
    count_wrong,
    gbps,
    measure_gemm,
    measure_hbm_copy,
    measure_host_copies,
    measure_p2p,
    median_seconds,
    random_bytes,
    tflops,
)
from pav_payload.probe_workers import HOST_COPY_ROUNDS, WorkerFailed, _gather, host_copy_figures

from tests.conftest import PAYLOAD

TORCHRUN = Path(sys.executable).with_name("torchrun")
CPU = torch.device("cpu")
TINY = ProbeSizes(gemm_n=32, hbm_bytes=64 * 1024, host_bytes=16 * 1024, p2p_bytes=8 * 1024)
QUICK = Repeats(warmup=1, iters=3)
METRIC_KEYS = {
    "gpu_count", "gpu", "cuda_visible_devices", "gemm_bf16_tflops", "hbm_copy_gbps", "h2d_gbps", "d2h_gbps",
    "h2d_gbps_rounds", "d2h_gbps_rounds", "p2p_gbps", "p2p_access", "wrong_total", "sizes",
}  # fmt: skip


def positive(values: dict[str, float]) -> bool:
    return bool(values) and all(isinstance(v, float) and math.isfinite(v) and v > 0 for v in values.values())


def test_gemm_on_cpu() -> None:
    found = measure_gemm([CPU], 32, QUICK)
    assert set(found) == {"0"} and positive(found)


def test_hbm_and_host_copies_on_cpu_are_positive_and_checked() -> None:
    checks = Checks()
    hbm = measure_hbm_copy([CPU], 4096, QUICK, checks)
    h2d, d2h = measure_host_copies([CPU], 4096, QUICK, checks)
    assert positive(hbm) and positive(h2d) and positive(d2h)
    assert checks.wrong == {
        "HBM copy on GPU 0": 0, "host->device copy to GPU 0": 0, "device->host copy from GPU 0": 0,
    }  # fmt: skip


def test_p2p_runs_every_ordered_pair_alone() -> None:
    checks = Checks()
    rates, access = measure_p2p([CPU, CPU, CPU], 4096, QUICK, checks)
    assert set(rates) == {"0", "1", "2"} and set(rates["0"]) == {"1", "2"}
    assert all(positive(row) for row in rates.values())
    assert access == {
        "0": {"1": False, "2": False},
        "1": {"0": False, "2": False},
        "2": {"0": False, "1": False},
    }
    assert len(checks.wrong) == 6 and checks.total == 0


def test_one_gpu_host_metrics_have_the_exact_shape_and_no_pairs() -> None:
    metrics, checks = measure_host([CPU], TINY, QUICK)
    metrics = json.loads(json.dumps(metrics, allow_nan=False))
    assert set(metrics) == METRIC_KEYS
    assert metrics["gpu_count"] == 1
    assert set(metrics["gpu"]) == {"0"} and set(metrics["gpu"]["0"]) == {"name", "uuid", "pci_bus_id"}
    for name in ("gemm_bf16_tflops", "hbm_copy_gbps", "h2d_gbps", "d2h_gbps"):
        assert set(metrics[name]) == {"0"} and positive(metrics[name]), name
    for name in ("h2d_gbps", "d2h_gbps"):  # every round kept; the figure judged is their median
        rounds = metrics[f"{name}_rounds"]["0"]
        assert len(rounds) == HOST_COPY_ROUNDS and all(v > 0 for v in rounds), name
        assert metrics[name]["0"] == pytest.approx(statistics.median(rounds), rel=1e-3), name
    assert metrics["p2p_gbps"] == {} and metrics["p2p_access"] == {}
    assert metrics["wrong_total"] == 0 and checks.total == 0
    assert metrics["sizes"] == {"gemm_n": 32, "hbm_bytes": 65536, "host_bytes": 16384, "p2p_bytes": 8192}
    assert outcome_of(metrics, checks).status == "pass"


@pytest.mark.slow  # a torch process per GPU: out of the fast lane (issue 49)
def test_two_gpus_are_measured_alone_and_at_once_each_by_a_process_of_its_own() -> None:
    metrics, checks = measure_host([CPU, CPU], TINY, QUICK)
    for name in ("gemm_bf16_tflops", "hbm_copy_gbps", "h2d_gbps", "d2h_gbps", "h2d_all_gbps", "d2h_all_gbps"):
        assert set(metrics[name]) == {"0", "1"} and positive(metrics[name]), name
    for name in ("h2d_gbps", "d2h_gbps", "h2d_all_gbps", "d2h_all_gbps"):  # alone and at once, by rounds
        rounds = metrics[f"{name}_rounds"]
        assert set(rounds) == {"0", "1"} and all(len(r) == HOST_COPY_ROUNDS for r in rounds.values()), name
    # Each worker's copies are checked and named by the GPU it drove, not by its own list position.
    named = {"host->device copy to GPU 1", "device->host copy from GPU 1", "HBM copy on GPU 1"}
    assert named <= set(checks.wrong)
    assert checks.total == 0 and set(metrics["p2p_gbps"]) == {"0", "1"}


def test_the_host_copy_figure_is_the_median_of_its_rounds_each_kept() -> None:
    """A healthy 4x H100 read 28 of 55 GB/s in one round (docs/benchmarks.md, issue 36): the median stays
    the link's figure; two such rounds pull it down (the best round, kept until issue 63, hid both)."""
    one_dip = [(55.2, 55.1), (28.1, 55.3), (55.0, 27.9)]
    assert host_copy_figures(one_dip, "h2d_gbps", "d2h_gbps") == {
        "h2d_gbps": 55.0, "h2d_gbps_rounds": [55.2, 28.1, 55.0],
        "d2h_gbps": 55.1, "d2h_gbps_rounds": [55.1, 55.3, 27.9],
    }  # fmt: skip
    two_dips = [(28.1, 55.1), (55.2, 55.3), (27.9, 55.2)]
    found = host_copy_figures(two_dips, "h2d_all_gbps", "d2h_all_gbps")
    assert (found["h2d_all_gbps"], found["h2d_all_gbps_rounds"]) == (28.1, [28.1, 55.2, 27.9])


def test_a_worker_that_dies_is_named_by_its_gpu() -> None:
    class Dead:
        exitcode = -9

        def is_alive(self) -> bool:
            return False

    class Alive(Dead):
        def is_alive(self) -> bool:
            return True

    with pytest.raises(WorkerFailed, match=r"GPU 1 exit -9 ended without a result"):
        _gather([Alive(), Dead()], queue.Queue(), poll_s=0.01)  # type: ignore[list-item]
    # The GPU whose worker failed is named, not a peer that stopped waiting for it at the barrier.
    reports: queue.Queue[tuple[int, dict[str, str]]] = queue.Queue()
    reports.put((1, {"error": "BrokenBarrierError: "}))
    reports.put((0, {"error": "RuntimeError: CUDA error: an illegal memory access was encountered"}))
    with pytest.raises(WorkerFailed, match=r"^GPU 0: RuntimeError: CUDA error"):
        _gather([Alive(), Alive()], reports, poll_s=0.01)  # type: ignore[list-item]
    reports.put((1, {"error": "BrokenBarrierError: "}))  # GPU 0's worker hangs: GPU 1 gave up waiting
    with pytest.raises(WorkerFailed, match=r"^GPU 0: did not finish a phase in 600 s"):
        _gather([Alive(), Alive()], reports, poll_s=0.01)  # type: ignore[list-item]


def test_arithmetic() -> None:
    # 2 n^3 flops; GB = 1e9 bytes
    assert tflops(8192, 1.5e-3) == pytest.approx(2 * 8192**3 / 1.5e-3 / 1e12, rel=1e-3)
    assert gbps(2 * (1 << 30), 0.7e-3) == pytest.approx(3068, rel=1e-3)
    assert gbps(1, 0.0) > 0  # a clock too coarse to see a tiny op gives a number, not a ZeroDivisionError


def test_median_seconds_takes_the_median() -> None:
    calls: list[int] = []
    found = median_seconds({"0": (CPU, lambda: calls.append(1))}, Repeats(warmup=2, iters=5))
    assert len(calls) == 7 and found["0"] >= 0


def test_a_corrupted_copy_is_counted_and_fails_the_probe() -> None:
    src = random_bytes(4096, CPU)
    dst = src.clone()
    assert count_wrong(dst, src) == 0
    dst[[3, 100, 4095]] += 1
    assert count_wrong(dst, src) == 3
    assert count_wrong(dst[:10], src) == 4096  # a short copy is wrong everywhere it should have written
    checks = Checks()
    checks.add("GPU 0 -> GPU 1 copy", 0)
    checks.add("GPU 1 -> GPU 0 copy", count_wrong(dst, src))
    outcome = outcome_of({"wrong_total": checks.total}, checks)
    assert (outcome.status, checks.total) == ("fail", 3)
    assert outcome.reason == "wrong bytes in 1 of 2 copies: GPU 1 -> GPU 0 copy (3 wrong)"


def test_sizes_and_repeats_from_the_command_line() -> None:
    args = build_parser().parse_args(["probe"])
    assert (args.kind, args.test_id) == ("probe", "probe")
    assert ProbeSizes.from_args(args) == ProbeSizes(8192, 1 << 30, 256 << 20, 256 << 20)
    assert Repeats.from_args(args) == Repeats(warmup=3, iters=10)
    with pytest.raises(ValueError, match="--iters"):
        Repeats.from_args(argparse.Namespace(iters=0, warmup=3))
    with pytest.raises(ValueError, match="--hbm-mib"):
        ProbeSizes.from_args(build_parser().parse_args(["probe", "--hbm-mib", "0"]))


@pytest.mark.slow  # a real torchrun process
def test_probe_under_torchrun_without_cuda_fails_saying_so(tmp_path: Path) -> None:
    argv = [str(TORCHRUN), "--standalone", "--nproc_per_node=1", "-m", "pav_payload", "probe"]
    argv += ["--gemm-n", "64", "--hbm-mib", "1", "--host-mib", "1", "--p2p-mib", "1", "--out", str(tmp_path)]
    env = dict(os.environ, PYTHONPATH=str(PAYLOAD), OMP_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1")
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, check=False)
    print(proc.stdout, proc.stderr, sep="\n")
    assert proc.returncode != 0
    report: dict[str, Any] = json.loads((tmp_path / "probe.rank0.json").read_text())
    assert (report["kind"], report["status"], report["reason"]) == ("probe", "fail", NO_CUDA)
    assert report["device"] == "cpu" and report["metrics"] == {}
    assert report["params"]["gemm_n"] == 64 and report["params"]["iters"] == 10
