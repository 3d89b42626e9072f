"""A host unreachable: one that never answers from the start (a VM that did not boot), with --allow-missing
1: the run goes on without it, its tests are error naming it, the rest are validated. One unreachable when
a run on hosts provisioned before starts: the run names it and stops with exit 2 before configuring the
others for nothing, and tears down.

Both on one pair of hosts (issue 49: one provision of two hosts, not two): the run that goes on without the
deaf host keeps them (--keep), and the run that stops is the next on them (--reuse), its teardown the one
that destroys them, the deaf host with the rest."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.conftest import CliRun, assert_one_line_error
from tests.faults.conftest import Sandbox
from tests.sim.leftovers import cluster_id

pytestmark = pytest.mark.slow

REST = ("--stages", "configure,validate,collect,report,teardown", "--tests", "torch_gloo_allreduce")
# Hosts get 10 s to answer SSH, not the env's 30: a sim host answers within a second, the deaf one never.
SSH_TIMEOUT = ("-e", "pav_ssh_timeout_s=10")


@dataclass
class Deaf:
    """The run that went on without host 1 (deaf from the start), and the two hosts it kept."""

    box: Sandbox
    run: CliRun

    @property
    def names(self) -> tuple[str, str]:
        return f"sim-{cluster_id(self.box.state)}-0", f"sim-{cluster_id(self.box.state)}-1"


@pytest.fixture(scope="module")
def deaf(sim_deps: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deaf]:
    box = Sandbox(tmp_path_factory.mktemp("unreachable")).open()
    try:
        # Its test is plain Python ranks (pav_payload.plain, no torch): what is tested is the run without a
        # host.
        run = box.cli("--env", "sim", "--hosts", "2", "--tests", "fault_plain", "--allow-missing", "1",
                      "--keep", *SSH_TIMEOUT, env={"PAV_SIM_DEAF_HOST": "1"}, run="allow")  # fmt: skip
        yield Deaf(box, run)
    finally:
        box.close()


def test_allow_missing_validates_the_rest(deaf: Deaf) -> None:
    run, box = deaf.run, deaf.box
    assert run.rc == 1, run.stdout + run.stderr  # a verdict: FAIL, since one host was not validated
    assert "Traceback" not in run.stdout + run.stderr
    results = box.results("allow")
    host0, host1 = deaf.names
    assert results["error"] == "" and results["verdict"] == "FAIL"
    assert results["hosts"][host1]["status"] == "unreachable"
    provision = next(s for s in results["stages"] if s["name"] == "provision")
    assert f"never answered SSH: {host1} (--allow-missing)" in provision["detail"]
    tests = {(t["name"], t["hosts"][0]): t for t in results["tests"]}
    assert len(tests) == 2
    assert tests[("fault_plain", host0)]["status"] == "pass"
    missing = tests[("fault_plain", host1)]
    assert missing["status"] == "error"
    assert missing["reason"].startswith(f"not validated: host {host1} is unreachable"), missing["reason"]
    stages = {s["name"]: s for s in results["stages"]}
    assert f"went on without {host1}" in stages["configure"]["detail"]
    # No mpirun or nccl-tests test planned: the mpi and nccl_tests roles did not run, so no host records
    # their facts.
    assert "MPI and nccl-tests not set up (no planned test uses them)" in stages["configure"]["detail"]
    facts = json.loads((box.run_dir("allow") / "hosts" / host0 / "facts.json").read_text())
    assert "mpi" not in facts and "nccl_tests" not in facts
    assert results["hosts"][host1]["ansible"]["configure"] == {}  # not tried again: provision waited already
    assert stages["collect"]["detail"] == "collected from 1 host(s)"  # the lost host was not tried again
    # Kept for the next test: its teardown destroys them, the deaf host with the rest.
    assert stages["teardown"]["status"] == "ok" and results["destroyed"] == []
    assert stages["teardown"]["detail"].startswith("kept (--keep)"), stages["teardown"]


def test_unreachable_host_stops_the_run(deaf: Deaf) -> None:
    box = deaf.box
    host0, host1 = deaf.names
    # Host 1 is still deaf: made, then its link down, as a VM lost after provision is to the run.
    run = box.cli("--env", "sim", *REST, *SSH_TIMEOUT, "--reuse", box.results("allow")["run_id"])
    assert_one_line_error(run, f"host {host1} is unreachable", "--allow-missing 1", documented=True)
    results = box.results()
    assert results["hosts"][host1]["status"] == "unreachable"
    stages = {s["name"]: s for s in results["stages"]}
    assert stages["configure"]["status"] == "failed"
    # The preflight stopped every host at its first task: the reachable one was not configured for nothing.
    # Its changes alone would not show that here (the run before configured it: a configure again changes
    # little), its task counts do: the role's argument check and the probe ran, the stop failed it, no task
    # came after (a configure that went on counts ~20).
    assert results["hosts"][host0]["changes"] == []
    counts = results["hosts"][host0]["ansible"]["configure"]
    assert (counts.get("ok"), counts.get("failures"), counts.get("changed", 0)) == (2, 1, 0), counts
    assert "validate" not in stages
    assert stages["teardown"]["status"] == "ok" and len(results["destroyed"]) == 3
    assert results["verdict"] == "ERROR" and results["tests"] == []
    assert box.left(("allow", "run")) == []
