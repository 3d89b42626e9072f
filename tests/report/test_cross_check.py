"""results.json's cross_check: payload busbw / nccl-tests busbw, paired only within one host set."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from pav.reporting.compare import RATIO_FLOOR, cross_check, render

FIXTURE = Path(__file__).parent / "fixtures" / "h200-2gpu-results.json"  # the real 2x H200 run
GIB8 = 8 * 2**30


def real_run() -> dict[str, Any]:
    return json.loads(FIXTURE.read_text())


def test_the_real_runs_ratios_are_recomputed() -> None:
    run = real_run()
    rows = cross_check(run["tests"], list(run["hosts"]))
    key = ("host", "op", "size_bytes", "payload_busbw_gbps", "nccl_tests_busbw_gbps", "ratio", "low")
    assert [tuple(r[k] for k in key) for r in rows] == [tuple(r[k] for k in key) for r in run["cross_check"]]
    assert {r["scope"] for r in rows} == {"host"} and not any(r["low"] for r in rows)


def test_a_run_across_hosts_is_paired_with_nccl_tests_across_the_same_hosts() -> None:
    run = real_run()
    tests = run["tests"]
    by_name = {t["name"]: t for t in tests}
    # Two hosts that each measured what localhost did, then both tools across both, the payload at 0.5x.
    second = [dict(copy.deepcopy(t), hosts=["node2"]) for t in tests]
    multi = copy.deepcopy(by_name["torch_nccl_allreduce"]) | {"name": "torch_nccl_allreduce_multi"}
    nccl_multi = copy.deepcopy(by_name["nccl_tests_all_reduce"]) | {"name": "nccl_tests_all_reduce_multi"}
    for sizes in multi["metrics"]["busbw_gbps"].values():
        for size in sizes:
            sizes[size] *= 0.5
    multi["hosts"] = nccl_multi["hosts"] = ["localhost", "node2"]
    rows = cross_check([*tests, *second, multi, nccl_multi], ["localhost", "node2"])
    single = [r for r in rows if r["scope"] == "host"]
    across = [r for r in rows if r["scope"] == "cluster"]
    # The slow multi-host payload never meets one host's nccl-tests, so the per-host ratios stay as measured.
    assert len(single) == 2 * len(run["cross_check"]) and not any(r["low"] for r in single)
    assert {r["host"] for r in across} == {"localhost,node2"} and {r["op"] for r in across} == {"all_reduce"}
    at_8g = next(r for r in across if r["size_bytes"] == GIB8)
    one_host = next(r for r in run["cross_check"] if r["op"] == "all_reduce" and r["size_bytes"] == GIB8)
    assert abs(at_8g["ratio"] - round(one_host["ratio"] * 0.5, 3)) <= 0.001
    assert at_8g["low"] and at_8g["ratio"] < RATIO_FLOOR


def test_only_the_latency_sweep_prints_its_times() -> None:
    """scripts/bench-gpu's table: time_us per size of the test the catalog marks a latency sweep
    (torch_nccl_latency), not of the bandwidth tests that also record it, nor of a test it does not know."""
    run = real_run()
    by_name = {t["name"]: t for t in run["tests"]}
    unknown = copy.deepcopy(by_name["torch_nccl_latency"]) | {"name": "no_such_test"}
    run["tests"].append(unknown)
    lines = [line for line in render(run).splitlines() if "latency us" in line]
    times = by_name["torch_nccl_latency"]["metrics"]["time_us"]["all_reduce"]
    sizes = sorted(times, key=int)
    assert lines == ["all_reduce latency us: " + ", ".join(f"{s} B {times[s]:.1f}" for s in sizes)]
