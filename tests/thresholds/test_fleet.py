"""Fleet-relative gates (pav.thresholds.fleet, issue 63) in process: each host's and GPU's figure against the
run's other hosts, with a floor and a spread that widen it only where the others themselves spread."""

from __future__ import annotations

from pav.results import TestResult
from pav.thresholds.fleet import fleet_gates, straggler_gates
from pav.thresholds.hardware import read_hardware
from tests.thresholds.test_derive import hgx

WORKLOAD = {"fingerprint": "abc", "params": {}}


def training(host: str, tokens: float) -> TestResult:
    return TestResult("train_gpu_single", [host], "pass", "", {"tokens_per_s_per_rank_min": tokens},
                      workload=dict(WORKLOAD))  # fmt: skip


def judged(figures: dict[str, float]) -> dict[str, TestResult]:
    tests = [training(host, tokens) for host, tokens in figures.items()]
    fleet_gates(tests, {host: read_hardware(host, hgx(8)) for host in figures})
    return {t.hosts[0]: t for t in tests}


def test_a_node_7_percent_slow_of_two_is_named() -> None:
    found = judged({"node-a": 62_000.0, "node-b": 57_660.0})
    assert found["node-a"].status == "pass"
    assert found["node-b"].status == "fail"
    assert found["node-b"].reason.startswith(
        "node-b: tokens_per_s_per_rank_min 5.766e+04 tokens/s, expected >= 5.952e+04 = 0.96 x 6.2e+04 "
        "(fleet: the other host's figure, 6.2e+04, less 0.04)"
    )


def test_the_floor_keeps_near_identical_nodes_from_outliers() -> None:
    found = judged({"a": 62_000.0, "b": 62_010.0, "c": 61_990.0, "d": 61_700.0})  # d 0.5% under: healthy
    assert all(t.status == "pass" for t in found.values())


def test_a_spread_fleet_widens_the_tolerance_where_it_spreads() -> None:
    """Others 10% apart: 3 scaled MADs of them, not the floor, bound a node; one 20% under still fails."""
    found = judged({"a": 60_000.0, "b": 54_000.0, "c": 66_000.0, "d": 60_500.0, "e": 52_000.0})
    assert found["e"].status == "pass", found["e"].reason
    assert (
        judged({"a": 60_000.0, "b": 54_000.0, "c": 66_000.0, "d": 60_500.0, "e": 40_000.0})["e"].status
        == "fail"
    )


def test_hosts_of_other_workloads_or_shapes_are_not_compared() -> None:
    tests = [training("a", 62_000.0), training("b", 40_000.0)]
    tests[1].workload = {"fingerprint": "other"}
    fleet_gates(tests, {"a": read_hardware("a", hgx(8)), "b": read_hardware("b", hgx(8))})
    assert [t.status for t in tests] == ["pass", "pass"]
    tests = [training("a", 62_000.0), training("b", 40_000.0)]
    fleet_gates(tests, {"a": read_hardware("a", hgx(8)), "b": read_hardware("b", hgx(4))})
    assert [t.status for t in tests] == ["pass", "pass"]


def across(steps: dict[str, float]) -> TestResult:
    test = TestResult("fault_slow_host_multi", list(steps), "pass", "", {"steps_per_s_per_host": steps})
    straggler_gates([test])
    return test


def test_a_straggler_among_the_hosts_of_one_test_fails_it_and_is_named() -> None:
    """A host's own step rate (FOR TESTING plain ranks) against the median of the test's other hosts: the
    straggler fails the test across hosts, by name; the others are held to it too, and pass."""
    test = across({"a": 4.9, "b": 5.0, "c": 0.5, "d": 4.2})
    assert test.status == "fail"
    assert test.reason == (
        "c: steps_per_s_per_host.c 0.5 steps/s, expected >= 2.45 = 0.5 x 4.9 "
        "(fleet: the median of the run's other 3 hosts, 4.9, less 0.5)"
    )
    failed = [g["part"] for g in test.threshold["gates"] if g["status"] == "fail"]
    assert failed == ["c"]


def test_a_pair_with_a_straggler_fails_and_a_jittery_pair_passes() -> None:
    """Isolation's pairs: the slower of two is named; sleep jitter (one host 40% slower) is no straggler."""
    assert across({"a": 5.0, "c": 0.5}).status == "fail"
    assert across({"a": 5.0, "b": 3.0}).status == "pass"
