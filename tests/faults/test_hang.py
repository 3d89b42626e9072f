"""A payload run that hangs (one rank stops before its first collective and ignores SIGTERM, as a rank
stuck in a driver call does): past its limit (pav_test_timeouts_s) it is `fail` with "timeout", and no
process of it keeps running on any host.

A launch of its own hangs in plain Python ranks (fault_plain_hang: pav_payload.plain, no torch, its ranks
in sessions of their own as torchrun's are): what is tested is the launch's limit and cleanup, not torch.
Inside a suite the tests are torch's (a suite is one torchrun and process group for several tests)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.faults.conftest import Configured, Sandbox, launch_processes

pytestmark = pytest.mark.slow

# The limit of a launch of its own counts its start (an agent and two ranks of plain Python, a second or
# two on a machine busy with other tests). Inside a suite the clock starts when the test before it ends,
# with the ranks up already.
LAUNCH_LIMIT_S = 15
SUITE_LIMIT_S = 15


def limited(
    configured: Configured, sandbox: Sandbox, name: str, limit_s: int, test: str = "fault_hang"
) -> Path:
    """An inventory of hosts 0 and 1 whose group_vars give the test that hangs that limit."""
    inventory = sandbox.base / name
    shutil.copytree(configured.inventory(0, 1).parent, inventory)
    group_vars = inventory / "group_vars" / "all" / "pav.yml"
    group_vars.write_text(group_vars.read_text() + f"\npav_test_timeouts_s:\n  {test}: {limit_s}\n")
    return inventory / "hosts.yml"


def test_hung_launch_times_out_and_is_killed(configured: Configured, sandbox: Sandbox) -> None:
    inventory = limited(configured, sandbox, "inv-hang", LAUNCH_LIMIT_S, "fault_plain_hang")
    stages = ("--stages", "validate,collect,report,teardown")
    run = sandbox.cli("--inventory", str(inventory), *stages, "--tests", "fault_plain_hang")
    assert run.rc == 1, run.stdout + run.stderr  # a verdict (FAIL), not a run that could not finish
    results = sandbox.results()
    hung = [t for t in results["tests"] if t["name"] == "fault_plain_hang"]
    assert len(hung) == 2
    for test in hung:
        assert test["status"] == "fail"
        said = f"timeout after {LAUNCH_LIMIT_S}s on {test['hosts'][0]}"
        assert test["reason"].startswith(said), test["reason"]
        logs = sandbox.run_dir("run") / "hosts" / test["hosts"][0] / "results" / "fault_plain_hang"
        assert (logs / "launcher.rc").read_text().strip() in ("124", "137")
        # The ranks run in sessions of their own (as torchrun's do), and the hung one ignores SIGTERM: the
        # launch's own cleanup, not the host's teardown, is what killed it.
        assert "pav: killed what the launch left running" in (logs / "launcher.log").read_text()
    assert launch_processes(results["run_id"]) == []
    for index in (0, 1):  # teardown removed the run's folder from each host's own root
        assert not configured.remote_run_dir(index, results["run_id"]).exists()
    assert sandbox.left(("run",)) == []


def test_a_hang_and_a_crash_inside_a_suite_leave_the_tests_after_them_running(
    configured: Configured, sandbox: Sandbox
) -> None:
    """Host tests of one world shape share one torchrun per host (a suite): a test that hangs in the middle
    is killed at its own limit and one whose rank dies ends with torchrun's code, each reported as such,
    and the tests before and after them still run, pass and report as launches of their own would."""
    inventory = limited(configured, sandbox, "inv-suite", SUITE_LIMIT_S)
    tests = "torch_gloo_allreduce,fault_hang,fault_rank_exit,ddp_cpu_train"
    stages = ("--stages", "validate,collect,report,teardown")
    run = sandbox.cli("--inventory", str(inventory), *stages, "--tests", tests)
    assert run.rc == 1, run.stdout + run.stderr
    assert "4 test(s) launched in 1 launches" in run.stdout, run.stdout
    results = sandbox.results()
    by_test: dict[str, list[dict[str, Any]]] = {}
    for test in results["tests"]:
        by_test.setdefault(test["name"], []).append(test)
    for host_result in by_test["fault_hang"]:
        assert host_result["status"] == "fail"
        assert host_result["reason"].startswith(f"timeout after {SUITE_LIMIT_S}s"), host_result["reason"]
    for host_result in by_test["fault_rank_exit"]:
        assert host_result["status"] in ("error", "fail"), host_result
        assert "timeout" not in host_result["reason"], host_result["reason"]
    for name in ("torch_gloo_allreduce", "ddp_cpu_train"):
        assert [t["status"] for t in by_test[name]] == ["pass", "pass"], by_test[name]
    for host_result in by_test["fault_hang"]:
        logs = sandbox.run_dir("run") / "hosts" / host_result["hosts"][0] / "results"
        assert (logs / "fault_hang" / "launcher.rc").read_text().strip() == "124"
        hang_log = (logs / "fault_hang" / "launcher.log").read_text()
        assert f"fault_hang passed its timeout of {SUITE_LIMIT_S}s: killed" in hang_log
        # Each test's own log holds its own output, not the suite's whole.
        assert "pav-suite: begin ddp_cpu_train" in (logs / "ddp_cpu_train" / "launcher.log").read_text()
        assert "ddp_cpu_train" not in (logs / "torch_gloo_allreduce" / "launcher.log").read_text()
    assert launch_processes(results["run_id"]) == []
    assert sandbox.left(("run",)) == []
