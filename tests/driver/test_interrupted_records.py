"""An interrupted run records what happened: a host keeps what its playbook did before the signal, and a test
the signal cut short says `interrupted`, never a cause on its hosts (an SSH one least of all). The real
SIGINT runs are tests/faults/test_signals.py; here the same driver code is fed the outcome a cut playbook
leaves and the launch results a cut validate leaves."""

from __future__ import annotations

import re
from dataclasses import asdict
from pathlib import Path

from pav.ansible_exec import PlaybookOutcome
from pav.evaluate import evaluate_launch
from pav.reporting import bad_parts, causes, html, junit, summary
from pav.reporting.changes import tuning_line
from pav.results import HostRecord, RunResults, TestResult, verdict_of
from pav.stages.playbook import record_hosts
from tests.conftest import ROOT
from tests.driver.contexts import context
from tests.driver.test_evaluate import GATE, launch, rank, write_host

CUT = "interrupted by SIGINT"
SSH = "unreachable over SSH"
TUNED = ["host_tuning : Write the limits.d file", "torch_payload : Unpack the payload on the host"]


def test_a_test_the_signal_cut_is_interrupted(tmp_path: Path) -> None:
    write_host(tmp_path, "h0", 0, [rank(0), rank(1)])
    done, cut = evaluate_launch(launch(hosts=("h0", "h1")), tmp_path, [GATE], cut=CUT)
    assert (done.status, done.reason) == ("pass", "")  # what finished before the signal keeps its result
    assert (cut.status, cut.reason) == ("interrupted", f"the run was {CUT} before h1 gave a result")


def test_a_host_that_left_the_run_keeps_its_own_cause_after_a_signal(tmp_path: Path) -> None:
    lost = {"h1": "host h1 became unreachable during validate: gone"}
    [res] = evaluate_launch(launch(hosts=("h1",)), tmp_path, [GATE], lost=lost, cut=CUT)
    assert res.status == "error"
    assert res.reason == "no result came back from h1: host h1 became unreachable during validate: gone"


def interrupted_run(tmp_path: Path) -> RunResults:
    results = RunResults("r", "custom", "hosts.yml", str(tmp_path), verdict="ERROR", error=CUT)
    results.hosts = {"h0": HostRecord("h0", status="ok", changes=TUNED, tuning_applied=True)}
    write_host(tmp_path, "h0", 0, [rank(0), rank(1)])
    results.tests = [
        *evaluate_launch(launch(), tmp_path, [GATE], cut=CUT),
        TestResult("fault_hang", ["h0"], "interrupted", f"the run was {CUT} before h0 gave a result"),
    ]
    return results


def test_the_report_gives_the_interrupt_as_the_cause_and_no_bad_part(tmp_path: Path) -> None:
    results = interrupted_run(tmp_path)
    data = results.to_dict()
    assert data["summary"] == {"pass": 1, "fail": 0, "skipped": 0, "error": 0, "interrupted": 1}
    assert verdict_of(results.tests) == "FAIL"  # never a PASS; the run's error makes it ERROR
    cut = next(t for t in data["tests"] if t["status"] == "interrupted")
    assert causes.likely_cause(cut) == causes.likely_cause({"reason": "interrupted"})
    assert "interrupted" in causes.likely_cause(cut) and SSH not in causes.likely_cause(cut)
    # A cut test says nothing of its host: the bad parts, which lead the report, do not list it.
    assert bad_parts.find(data) == []
    text = summary.render(results)
    assert SSH not in text and "tests: pass=1  fail=0  skipped=0  error=0  interrupted=1" in text
    page = html.render(data, tmp_path)
    assert SSH not in page and "before this test gave a result" in page
    assert 'errors="1"' in junit.render(results)  # CI sees it as a test that did not finish


def test_a_run_with_no_cut_test_prints_the_counts_it_always_did(tmp_path: Path) -> None:
    results = interrupted_run(tmp_path)
    results.tests = results.tests[:1]
    [counts] = [ln for ln in summary.render(results).splitlines() if ln.startswith("tests:")]
    assert counts == "tests: pass=1  fail=0  skipped=0  error=0"


def test_a_cut_configure_keeps_each_hosts_record() -> None:
    """h0: configure ended on it before the signal (its stats came); h1: cut midway, after two changes;
    h2: never reached. Before, none of them kept a record: the error skipped record_hosts."""
    ctx = context(hosts=3)
    ctx.results.hosts = {h.name: HostRecord(h.name) for h in ctx.hosts}
    outcome = PlaybookOutcome(rc=-1, status="canceled", stats={"h0": {"ok": 52, "changed": 18}})
    outcome.changes = {"h0": TUNED, "h1": TUNED}
    outcome.reached = {"h0", "h1"}
    record_hosts(ctx, outcome, "configure", cut=True)
    hosts = ctx.results.hosts
    assert (hosts["h0"].status, hosts["h0"].changes) == ("ok", TUNED)
    assert (hosts["h1"].status, hosts["h1"].changes) == ("interrupted", TUNED)
    assert hosts["h2"].status == "unknown" and hosts["h2"].changes == []
    text = summary.render(ctx.results).splitlines()
    rows = {ln.split()[0]: ln for ln in text if ln[:2] in ("h0", "h1", "h2")}
    assert rows["h0"].endswith("1 change(s) applied; 1 by other roles")
    assert rows["h1"].endswith("1 change(s) applied; 1 by other roles before configure was interrupted on it")
    assert rows["h2"].endswith("not configured")


def test_a_host_configure_failed_on_is_not_said_to_need_no_changes(tmp_path: Path) -> None:
    """The pyenv case: the first task failed, nothing ran after it."""
    results = RunResults("r", "custom", "hosts.yml", str(tmp_path))
    results.hosts = {"h0": HostRecord("h0", status="failed", ansible={"configure": {"ok": 1, "failures": 1}})}
    row = next(ln for ln in summary.render(results).splitlines() if ln.startswith("h0"))
    assert row.endswith("no change made before configure failed on it") and "no changes needed" not in row
    said = html.render(asdict(results) | {"summary": {}}, tmp_path)
    assert "no change made before configure failed on it" in said


def test_the_docs_quote_the_reason_a_cut_test_gets(tmp_path: Path) -> None:
    [cut] = evaluate_launch(launch(hosts=("HOST",)), tmp_path, [GATE], cut=CUT)
    for doc in ("results.md", "reliability.md"):
        text = " ".join((ROOT / "docs" / doc).read_text().split())
        assert f'`interrupted` "{cut.reason}"' in text or f'"{cut.reason}"' in text, doc


def test_the_tuning_phrases_docs_results_quotes_are_the_ones_printed() -> None:
    """docs/results.md's change_counts row quotes each phrase of a host's tuning line."""
    lines = (ROOT / "docs" / "results.md").read_text().splitlines()
    row = next(ln for ln in lines if ln.startswith("| `change_counts`"))
    quoted = re.findall(r'"([^"]+)"', row)
    printed = [
        tuning_line(status, changes, applied, counts)
        for status in ("ok", "unknown", "unreachable", "failed", "interrupted")
        for changes in ([], TUNED, TUNED[:1])
        for applied in (True, False)
        for counts in ({}, {"failures": 1}, {"dark": 1})
    ]
    assert len(quoted) >= 7, quoted
    for phrase in quoted:
        pattern = re.escape(phrase).replace("N", r"\d+").replace("M", r"\d+").replace(r"\.\.\.", ".+")
        assert any(re.search(pattern, line) for line in printed), phrase
