"""Judging collected results: timeouts, missing ranks, wrong results and gates each give the right status."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pav.evaluate import evaluate_launch
from pav.launch import Launch
from pav.results import TestResult, verdict_of
from pav.thresholds.gate import Gate

GATE = Gate("wrong_total", max=0)


def launch(scope: str = "host", hosts: tuple[str, ...] = ("h0",), ranks: int = 2) -> Launch:
    return Launch(
        "t",
        "torchrun",
        scope,
        60,
        argv_by_host={h: ["x"] for h in hosts},
        ranks_by_host=dict.fromkeys(hosts, ranks),
        members=list(hosts),
    )


def rank(r: int, status: str = "pass", wrong: int = 0, host: str = "h0") -> dict[str, Any]:
    return {
        "rank": r,
        "world_size": 2,
        "hostname": host,
        "kind": "collectives",
        "status": status,
        "reason": "" if status == "pass" else "broken",
        "metrics": {"results": [{"op": "all_reduce", "size_bytes": 1024, "busbw_gbps": 1.5, "wrong": wrong}]},
    }


def write_host(run_dir: Path, host: str, rc: int | None, ranks: list[dict[str, Any]]) -> None:
    d = run_dir / "hosts" / host / "results" / "t"
    d.mkdir(parents=True)
    if rc is not None:
        (d / "launcher.rc").write_text(f"{rc}\n")
    for r in ranks:
        (d / f"t.rank{r['rank']}.json").write_text(json.dumps(r))


def test_pass(tmp_path: Path) -> None:
    write_host(tmp_path, "h0", 0, [rank(0), rank(1)])
    [res] = evaluate_launch(launch(), tmp_path, [GATE])
    assert (res.status, res.reason) == ("pass", "")
    assert res.metrics["busbw_gbps"] == {"all_reduce": {"1024": 1.5}}
    assert res.metrics["rank_hosts"] == {"0": "h0", "1": "h0"}


def test_timeout_is_fail(tmp_path: Path) -> None:
    write_host(tmp_path, "h0", 124, [])
    [res] = evaluate_launch(launch(), tmp_path, [GATE])
    assert res.status == "fail" and "timeout after 60s" in res.reason


def test_no_result_is_error(tmp_path: Path) -> None:
    [res] = evaluate_launch(launch(), tmp_path, [GATE])
    assert res.status == "error" and "no result came back from h0" in res.reason


def test_missing_rank_is_error(tmp_path: Path) -> None:
    write_host(tmp_path, "h0", 1, [rank(0)])
    [res] = evaluate_launch(launch(), tmp_path, [GATE])
    assert res.status == "error" and "1 of 2 ranks" in res.reason


def test_failed_rank_is_fail_naming_rank(tmp_path: Path) -> None:
    write_host(tmp_path, "h0", 1, [rank(0), rank(1, "fail", wrong=3)])
    [res] = evaluate_launch(launch(), tmp_path, [GATE])
    assert res.status == "fail" and res.reason.startswith("rank 1:")


def test_the_rank_that_failed_is_named_not_the_one_killed_after_it(tmp_path: Path) -> None:
    # torchrun kills rank 1 when rank 0 raises: rank 1 keeps its provisional report (no end time), whichever
    # of the two the host lists first.
    unfinished = rank(0, "error") | {"reason": "rank started but did not finish (killed, crashed or hung)"}
    raised = rank(1, "error") | {"reason": "RuntimeError: CUDA is not available", "ended": "2026-11-25"}
    write_host(tmp_path, "h0", 1, [unfinished, raised])
    [res] = evaluate_launch(launch(), tmp_path, [GATE])
    assert (res.status, res.reason) == ("error", "rank 1: RuntimeError: CUDA is not available")


def test_gate_fails_on_wrong_values(tmp_path: Path) -> None:
    write_host(tmp_path, "h0", 0, [rank(0, wrong=1), rank(1)])
    [res] = evaluate_launch(launch(), tmp_path, [GATE])
    assert res.status == "fail" and "wrong_total=1 above the maximum 0" in res.reason


def test_unmeasured_gate_fails(tmp_path: Path) -> None:
    write_host(tmp_path, "h0", 0, [rank(0), rank(1)])
    [res] = evaluate_launch(launch(), tmp_path, [Gate("busbw_gbps.all_reduce.8589934592", min=100)])
    assert res.status == "fail" and "not measured" in res.reason


def test_cluster_test_merges_hosts_and_names_the_silent_one(tmp_path: Path) -> None:
    write_host(tmp_path, "h0", 0, [rank(0), rank(1)])
    write_host(tmp_path, "h1", 0, [rank(2, host="h1"), rank(3, host="h1")])
    [res] = evaluate_launch(launch("cluster", ("h0", "h1")), tmp_path, [GATE])
    assert res.status == "pass" and res.hosts == ["h0", "h1"]
    assert res.metrics["rank_hosts"]["3"] == "h1"
    (tmp_path / "hosts" / "h1" / "results" / "t" / "launcher.rc").unlink()
    [res] = evaluate_launch(launch("cluster", ("h0", "h1")), tmp_path, [GATE])
    assert res.status == "error" and "h1" in res.reason


def test_a_plain_launchs_wrong_sums_are_its_wrong_total(tmp_path: Path) -> None:
    """FOR TESTING ONLY (pav_payload.plain, no torch): every rank checks the sum it got back; the wrong
    elements over all ranks are the wrong_total its gate reads."""
    plain = [rank(r) | {"kind": "plain", "metrics": {"elements": 64, "wrong": 0}} for r in (0, 1)]
    write_host(tmp_path, "h0", 0, plain)
    [res] = evaluate_launch(launch(), tmp_path, [GATE])
    assert (res.status, res.metrics["wrong_total"]) == ("pass", 0)
    plain[1]["metrics"]["wrong"] = 5
    write_host(tmp_path / "again", "h0", 0, plain)
    [res] = evaluate_launch(launch(), tmp_path / "again", [GATE])
    assert res.status == "fail" and "wrong_total=5 above the maximum 0" in res.reason


def test_verdict_rules() -> None:
    def t(status: str) -> TestResult:
        return TestResult("x", ["h"], status)  # type: ignore[arg-type]

    assert verdict_of([t("pass"), t("skipped")]) == "PASS"
    assert verdict_of([t("skipped")]) == "NOTHING RUN"  # nothing measured: neither a pass nor a FAIL
    assert verdict_of([t("pass"), t("error")]) == "FAIL"
    assert verdict_of([]) == "NOTHING RUN"
