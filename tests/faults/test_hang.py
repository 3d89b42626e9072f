"""A payload run that hangs (one rank stops before its first collective and ignores SIGTERM, as a rank
stuck in a driver call does): with a 45 s limit for that test (pav_test_timeouts_s; room for torch to start
on a machine busy with other tests) it is `fail` with "timeout", and no process of it keeps running on any
host."""

from __future__ import annotations

import shutil

import pytest

from tests.faults.conftest import Configured, Sandbox, launch_processes

pytestmark = pytest.mark.slow


def test_hung_launch_times_out_and_is_killed(configured: Configured, sandbox: Sandbox) -> None:
    inventory = sandbox.base / "inv-hang"
    shutil.copytree(configured.inventory(0, 1).parent, inventory)
    group_vars = inventory / "group_vars" / "all.yml"
    group_vars.write_text(group_vars.read_text() + "\npav_test_timeouts_s:\n  fault_hang: 45\n")
    stages = ("--stages", "validate,collect,report,teardown")
    run = sandbox.cli("--inventory", str(inventory / "hosts.yml"), *stages, "--tests", "fault_hang")
    assert run.rc == 1, run.stdout + run.stderr  # a verdict (FAIL), not a run that could not finish
    results = sandbox.results()
    hung = [t for t in results["tests"] if t["name"] == "fault_hang"]
    assert len(hung) == 2
    for test in hung:
        assert test["status"] == "fail"
        assert test["reason"].startswith(f"timeout after 45s on {test['hosts'][0]}"), test["reason"]
        logs = sandbox.run_dir("run") / "hosts" / test["hosts"][0] / "results" / "fault_hang"
        assert (logs / "launcher.rc").read_text().strip() in ("124", "137")
        # torchrun's ranks run in sessions of their own, and the hung one ignores SIGTERM: the launch's
        # own cleanup, not the host's teardown, is what killed it.
        assert "pav: killed what the launch left running" in (logs / "launcher.log").read_text()
    assert launch_processes(results["run_id"]) == []
    for index in (0, 1):  # teardown removed the run's folder from each host's own root
        assert not configured.remote_run_dir(index, results["run_id"]).exists()
    assert sandbox.left(("run",)) == []
