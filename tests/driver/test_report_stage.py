"""The report stage (pav.stages.report) in process, on real GPU runs (tests/thresholds/fixtures): the run's
context as collect left it (the hosts' facts, one launch per test over the raw results the hosts sent
back), then report.run. Its verdict is the calibration's, its judging is the judge command's test by test
(one judging path), and it writes results.json, summary.txt, junit.xml and report.html."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from pav import catalog
from pav.commands.judge import rejudge
from pav.context import Options, RunContext
from pav.inventory import Host
from pav.judging import FROM_FACTS_ANEW, recorded_launch
from pav.launches import Launch
from pav.reporting.history import MIN_RUNS
from pav.results import HostRecord, TestResult
from pav.stages import report
from pav.thresholds import leftovers
from tests.driver.contexts import context
from tests.thresholds.test_real_gpu_runs import CALIBRATION, FIXTURES, Run

RUN_DIRS = [run for run in CALIBRATION if (FIXTURES / run.fixture).is_dir()]
WRITTEN = ("results.json", "summary.txt", "junit.xml", "report.html")


def collected(run: Run, where: Path, options: Options | None = None) -> RunContext:
    """The recorded run as the report stage met it: its files copied as collect left them (what the report
    writes removed), its hosts and their facts, a launch per test rebuilt from the raw results."""
    run_dir = where / run.fixture
    shutil.copytree(FIXTURES / run.fixture, run_dir)
    recorded = json.loads((run_dir / "results.json").read_text())
    for name in WRITTEN:
        (run_dir / name).unlink(missing_ok=True)
    tests = [TestResult(**t) for t in recorded["tests"] if t["name"] not in FROM_FACTS_ANEW]
    # validate's own result before any launch (the GPUs' processes), no test of the catalog
    held = [t for t in tests if t.name == leftovers.NAME]
    tests = [t for t in tests if t not in held]
    chosen = options or Options(results_root=where / "no-runs", burn_in_s=_burn_in_s(tests))
    ctx = context(0, options=chosen, tests=_names(tests))
    ctx.run_dir = run_dir
    ctx.results.env = recorded["env"]
    ctx.results.error = recorded.get("error")  # a run stopped by a signal: ERROR, as it recorded
    ctx.hosts = [Host(name, h["address"]) for name, h in recorded["hosts"].items()]
    ctx.results.hosts = {
        name: HostRecord(name, h["address"], "ok", facts=h["facts"]) for name, h in recorded["hosts"].items()
    }
    # What validate planned but did not launch (a 1-GPU node skips the 2-GPU tests), and a launch that left no
    # raw results (mpirun that never started a rank, a test a SIGINT stopped), it recorded as they stand.
    as_recorded = [t for t in tests if t.status == "skipped" or not _has_raw_results(t, run_dir)]
    ctx.results.tests.extend(held + as_recorded)
    ctx.launches = launches([t for t in tests if t not in as_recorded], run_dir)
    return ctx


def _has_raw_results(test: TestResult, run_dir: Path) -> bool:
    spec = catalog.spec_of(test.name)
    if test.status == "interrupted":  # a Ctrl-C stopped it: what it left is not a result
        return False
    return test.status != "error" or (spec is not None and recorded_launch(test, spec, run_dir) is not None)


def _burn_in_s(tests: list[TestResult]) -> int | None:
    """A burn-in run's --burn-in, as its gpu_burn recorded it (a burn-in test is refused without one)."""
    for test in tests:
        duration = (test.metrics.get("burn_in") or {}).get("duration_s")
        if duration:
            return int(duration)
    return None


def _names(tests: list[TestResult]) -> list[str]:
    return list(dict.fromkeys(t.name for t in tests))


def launches(tests: list[TestResult], run_dir: Path) -> list[Launch]:
    """One launch per test, as validate planned it: a host-scope test's hosts in one launch."""
    by_test: dict[str, Launch] = {}
    for test in tests:
        spec = catalog.spec_of(test.name)
        assert spec is not None, test.name
        found = recorded_launch(test, spec, run_dir)
        assert found is not None, f"{test.name}: no raw results in {run_dir}"
        launch = by_test.setdefault(test.name, found)
        if launch is not found:
            launch.argv_by_host |= found.argv_by_host
            launch.ranks_by_host |= found.ranks_by_host
            launch.members += found.members
    return list(by_test.values())


def outcomes(tests: list[TestResult]) -> list[tuple[str, list[str], str, str]]:
    return [(t.name, t.hosts, t.status, t.reason) for t in tests]


@pytest.mark.parametrize("run", RUN_DIRS, ids=str)
def test_the_report_of_a_real_run_is_its_calibrated_verdict(run: Run, tmp_path: Path) -> None:
    ctx = collected(run, tmp_path)
    assert report.run(ctx) == f"verdict {run.verdict}"
    failing = [t for t in ctx.results.tests if t.status in ("fail", "error")]
    assert sorted(t.name for t in failing) == sorted(run.failing)
    if failing:
        part = next(t for t in failing if t.name == (run.part or run.failing[0]))
        assert run.names in part.reason
    assert not ctx.launches  # each judged once
    # The one judging path: the judge command, given the same run dir, judges every test alike.
    again = rejudge(FIXTURES / run.fixture)
    # In the recorded order, but for the tests recorded as they stand, which the report meets first.
    assert sorted(outcomes(ctx.results.tests)) == sorted(outcomes([r.test for r in again.tests]))
    assert ctx.results.threshold_profile == again.profile


@pytest.mark.parametrize("run", RUN_DIRS[:1] + [r for r in RUN_DIRS if r.verdict == "FAIL"][:1], ids=str)
def test_the_report_writes_its_files(run: Run, tmp_path: Path) -> None:
    ctx = collected(run, tmp_path)
    report.run(ctx)
    on_disk = json.loads((ctx.run_dir / "results.json").read_text())
    assert on_disk["verdict"] == run.verdict
    assert [t["status"] for t in on_disk["tests"]] == [t.status for t in ctx.results.tests]
    # Performance gates: every GPU host derived its own from its facts.
    assert on_disk["gates"] and all(g["derived"] and not g["missing"] for g in on_disk["gates"].values())
    assert f"VERDICT: {run.verdict}" in (ctx.run_dir / "summary.txt").read_text()
    suite = ET.parse(ctx.run_dir / "junit.xml").getroot()
    cases = suite.findall(".//testcase")
    assert len(cases) == len(ctx.results.tests)
    failed = [c for c in cases if c.find("failure") is not None or c.find("error") is not None]
    assert len(failed) == len(run.failing)
    page = (ctx.run_dir / "report.html").read_text()
    assert "<svg" in page and run.verdict in page
    # The tests' wall time comes from the hosts' launcher.time files: the rest is orchestration.
    assert ctx.results.timing["tests_s"] > 0


def test_a_run_is_compared_with_the_envs_earlier_runs(tmp_path: Path) -> None:
    """A busy GPU's run after healthy ones of the same machine: the report flags what dropped (from
    MIN_RUNS earlier runs of the same key: docs/nightly.md)."""
    root = tmp_path / "root"
    healthy = json.loads((FIXTURES / "h100x4-healthy" / "results.json").read_text())
    for i in range(MIN_RUNS):
        healthy["run_id"], healthy["started"] = f"20261125T00000{i}.000Z-local", f"2026-11-25T00:00:0{i}Z"
        (root / healthy["run_id"]).mkdir(parents=True)
        (root / healthy["run_id"] / "results.json").write_text(json.dumps(healthy))
    busy = next(run for run in RUN_DIRS if run.fixture == "h100x4-gpu-busy")
    ctx = collected(busy, root, Options(results_root=root))
    report.run(ctx)
    history = ctx.results.history
    assert history["previous"] == healthy["run_id"]
    assert history["flagged"] > 0
    dropped = {(m["test"], m["metric"].split(".")[0]) for m in history["metrics"] if m["flagged"]}
    # The busy GPU 0 slows the host's collectives, in the payload's and in nccl-tests' measurements.
    assert {("torch_nccl_allreduce", "busbw_gbps"), ("nccl_tests_all_reduce", "busbw_gbps")} <= dropped


def test_report_runs_again_after_an_interrupt_without_judging_twice(tmp_path: Path) -> None:
    ctx = collected(RUN_DIRS[0], tmp_path)
    report.run(ctx)
    first = outcomes(ctx.results.tests)
    report.run(ctx)
    assert outcomes(ctx.results.tests) == first
