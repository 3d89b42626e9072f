"""Bad-node isolation on real sim hosts: one host's ranks return wrong results, or take their step 10 times
as long, in a 3-host test; the run fails and names that host, and only it, after re-running the test on
pairs. The undegraded case is
tests/sim/test_sim_env.py: its 3-host run passes and names nobody.

The fault is a wrong result rather than a slow link: this machine's kernel has no netem qdisc, and a
verdict that hangs on timing would make the test flaky. Runs before test_host_dies (file order), which
may kill host 2 of the shared cluster."""

from __future__ import annotations

import json
import re

import pytest

from tests.conftest import run_cli
from tests.faults.conftest import Configured, Sandbox

pytestmark = pytest.mark.slow

STAGES = ("--stages", "validate,collect,isolate,report,teardown", "--tests", "fault_wrong_host_multi")


def test_the_degraded_host_and_only_it_is_named(configured: Configured, sandbox: Sandbox) -> None:
    bad = configured.names[2]
    run = sandbox.cli(*configured.validate(0, 1, 2)[:2], *STAGES, env={"PAV_FAULT_HOST": bad})
    assert run.rc == 1, run.stdout + run.stderr
    results = sandbox.results()
    assert results["verdict"] == "FAIL"
    [test] = results["tests"]
    assert test["status"] == "fail" and "wrong" in test["reason"], test
    isolation = results["isolation"]
    assert [s["host"] for s in isolation["suspects"]] == [bad], isolation
    [suspect] = isolation["suspects"]
    assert suspect["evidence"] and all(bad in e["hosts"] for e in suspect["evidence"])
    # Pairs without the bad host passed: that is what clears the others.
    assert any(s["status"] == "pass" and bad not in s["hosts"] for s in isolation["steps"]), isolation
    # Each round's playbook collected its results itself: no collect playbook of its own ran.
    assert not (sandbox.run_dir("run") / "ansible" / "collect").exists()
    summary = (sandbox.run_dir("run") / "summary.txt").read_text()
    assert f"  {bad}: " in summary and "suspect hosts" in summary
    # The report's suspect box names it, and no other host.
    page = (sandbox.run_dir("run") / "report.html").read_text()
    box = page[page.index('<section class="suspects"') :]
    box = box[: box.index("</section>")]
    assert re.findall(r'<b class="suspect">([^<]+)</b>', box) == [bad], box
    # Judged again by this release's gates (the judge command): the same verdict. The wrong result came from
    # the ranks themselves, before any gate, so the test keeps its recorded outcome.
    judged = run_cli("judge", str(sandbox.run_dir("run")), "--json")
    assert judged.rc == 1, judged.stdout + judged.stderr
    again = json.loads(judged.stdout)
    assert (again["verdict"], again["recorded_verdict"]) == ("FAIL", "FAIL")
    assert [(t["status"], t["reason"], t["judged"]) for t in again["tests"]] == [
        (test["status"], test["reason"], "recorded")
    ]
