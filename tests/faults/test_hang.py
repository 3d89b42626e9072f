"""A payload run that hangs (one rank stops before its first collective and ignores SIGTERM, as a rank
stuck in a driver call does): past its limit (pav_test_timeouts_s) it is `fail` with "timeout", and no
process of it keeps running on any host.

A launch of its own hangs in plain Python ranks (fault_plain_hang: pav_payload.plain, no torch, its ranks
in sessions of their own as torchrun's are): what is tested is the launch's limit and cleanup, not torch.
Inside a suite the tests are torch's (a suite is one torchrun and process group for several tests).

Both are one run on host 0 of the shared cluster (issue 49: one validate, collect, report and teardown
for both claims, which the two launches keep apart): the plain launch of its own, then the suite of torch
tests, one after the other, each with its own limit. One host: these are host tests, a launch of their own
on each host with nothing between hosts, so a second host would run the same again (three more torch
imports) and prove nothing more.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CliRun
from tests.faults.conftest import Configured, Sandbox, launch_processes

pytestmark = pytest.mark.slow

# The limit of a launch of its own counts its start (an agent and two ranks of plain Python, a second or
# two on a machine busy with other tests). Inside a suite the clock starts when the test before it ends,
# with the ranks up already.
LAUNCH_LIMIT_S = 15
SUITE_LIMIT_S = 15
SUITE = ("torch_gloo_allreduce", "fault_hang", "fault_rank_exit", "ddp_cpu_train")


@dataclass
class HangRun:
    box: Sandbox
    run: CliRun

    @property
    def results(self) -> dict[str, Any]:
        return self.box.results()

    def of(self, name: str) -> list[dict[str, Any]]:
        """The test's results: one, of host 0."""
        found = [t for t in self.results["tests"] if t["name"] == name]
        assert len(found) == 1, (name, self.results["tests"])
        return found

    def logs(self, host: str, test: str) -> Path:
        return self.box.run_dir("run") / "hosts" / host / "results" / test


def limited(configured: Configured, box: Sandbox, name: str, limits: dict[str, int]) -> Path:
    """An inventory of host 0 whose group_vars give the tests that hang their limits."""
    inventory = box.base / name
    shutil.copytree(configured.inventory(0).parent, inventory)
    group_vars = inventory / "group_vars" / "all" / "pav.yml"
    lines = "".join(f"  {test}: {limit_s}\n" for test, limit_s in limits.items())
    group_vars.write_text(group_vars.read_text() + f"\npav_test_timeouts_s:\n{lines}")
    return inventory / "hosts.yml"


@pytest.fixture(scope="module")
def hang_run(configured: Configured, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HangRun]:
    box = Sandbox(tmp_path_factory.mktemp("hang")).open()
    try:
        limits = {"fault_plain_hang": LAUNCH_LIMIT_S, "fault_hang": SUITE_LIMIT_S}
        inventory = limited(configured, box, "inv-hang", limits)
        stages = ("--stages", "validate,collect,report,teardown")
        run = box.cli(
            "--inventory", str(inventory), *stages, "--tests", ",".join(("fault_plain_hang", *SUITE))
        )
        yield HangRun(box, run)
    finally:
        box.close()


def ended_in_a_verdict_leaving_nothing(hang_run: HangRun, configured: Configured) -> None:
    """What each test of the run checks first: the run got to its verdict (FAIL), not a run that could
    not finish, and no process, folder or file of it is left, here or on the hosts."""
    run, results = hang_run.run, hang_run.results
    assert run.rc == 1, run.stdout + run.stderr
    assert launch_processes(results["run_id"]) == []
    assert not configured.remote_run_dir(0, results["run_id"]).exists()  # teardown removed it there
    assert hang_run.box.left(("run",)) == []


def test_hung_launch_times_out_and_is_killed(hang_run: HangRun, configured: Configured) -> None:
    ended_in_a_verdict_leaving_nothing(hang_run, configured)
    for test in hang_run.of("fault_plain_hang"):
        assert test["status"] == "fail"
        said = f"timeout after {LAUNCH_LIMIT_S}s on {test['hosts'][0]}"
        assert test["reason"].startswith(said), test["reason"]
        logs = hang_run.logs(test["hosts"][0], "fault_plain_hang")
        assert (logs / "launcher.rc").read_text().strip() in ("124", "137")
        # The ranks run in sessions of their own (as torchrun's do), and the hung one ignores SIGTERM: the
        # launch's own cleanup, not the host's teardown, is what killed it.
        assert "pav: killed what the launch left running" in (logs / "launcher.log").read_text()


def test_a_hang_and_a_crash_inside_a_suite_leave_the_tests_after_them_running(
    hang_run: HangRun, configured: Configured
) -> None:
    """Host tests of one world shape share one torchrun per host (a suite): a test that hangs in the middle
    is killed at its own limit and one whose rank dies ends with torchrun's code, each reported as such,
    and the tests before and after them still run, pass and report as launches of their own would."""
    ended_in_a_verdict_leaving_nothing(hang_run, configured)
    # The plain launch on its own (a launcher of its own, never in a suite), the 4 torch tests in one suite.
    assert "5 test(s) launched in 2 launches" in hang_run.run.stdout, hang_run.run.stdout
    for host_result in hang_run.of("fault_hang"):
        assert host_result["status"] == "fail"
        assert host_result["reason"].startswith(f"timeout after {SUITE_LIMIT_S}s"), host_result["reason"]
    for host_result in hang_run.of("fault_rank_exit"):
        assert host_result["status"] in ("error", "fail"), host_result
        assert "timeout" not in host_result["reason"], host_result["reason"]
        # Named by torchrun's record of the rank that exited first, inside a suite too (issue 64), not by
        # rank 0's lost peer.
        lead = f"rank 1 on {host_result['hosts'][0]} exited with code 3 (the first to fail)"
        assert host_result["reason"].startswith(lead), host_result["reason"]
    for name in ("torch_gloo_allreduce", "ddp_cpu_train"):
        assert [t["status"] for t in hang_run.of(name)] == ["pass"], hang_run.of(name)
    for host_result in hang_run.of("fault_hang"):
        host = host_result["hosts"][0]
        assert (hang_run.logs(host, "fault_hang") / "launcher.rc").read_text().strip() == "124"
        hang_log = (hang_run.logs(host, "fault_hang") / "launcher.log").read_text()
        assert f"fault_hang passed its timeout of {SUITE_LIMIT_S}s: killed" in hang_log
        # Each test's own log holds its own output, not the suite's whole.
        assert (
            "pav-suite: begin ddp_cpu_train"
            in (hang_run.logs(host, "ddp_cpu_train") / "launcher.log").read_text()
        )
        assert (
            "ddp_cpu_train" not in (hang_run.logs(host, "torch_gloo_allreduce") / "launcher.log").read_text()
        )
