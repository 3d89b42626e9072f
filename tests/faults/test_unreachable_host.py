"""A host unreachable: lost after provision, the run names it and stops with exit 2 before configuring the
others for nothing, and tears down. One that never answers from the start (a VM that did not boot), with
--allow-missing 1: the run goes on without it, its tests are error naming it, the rest are validated."""

from __future__ import annotations

import json

import pytest

from tests.conftest import assert_one_line_error
from tests.faults.conftest import Sandbox
from tests.sim.leftovers import cluster_id

pytestmark = pytest.mark.slow

REST = ("--stages", "configure,validate,collect,report,teardown", "--tests", "torch_gloo_allreduce")


def provision_then_lose_host1(sandbox: Sandbox) -> tuple[str, str]:
    up = sandbox.cli("--env", "sim", "--hosts", "2", "--stages", "provision", "--keep", run="provision")
    assert up.rc == 0, up.stdout + up.stderr
    sandbox.host_down(1)
    return tuple(f"sim-{cluster_id(sandbox.state)}-{i}" for i in (0, 1))  # type: ignore[return-value]


def test_unreachable_host_stops_the_run(sim_deps: None, sandbox: Sandbox) -> None:
    host0, host1 = provision_then_lose_host1(sandbox)
    run = sandbox.cli("--env", "sim", *REST, "--reuse", sandbox.results("provision")["run_id"])
    assert_one_line_error(run, f"host {host1} is unreachable", "--allow-missing 1", documented=True)
    results = sandbox.results()
    assert results["hosts"][host1]["status"] == "unreachable"
    stages = {s["name"]: s for s in results["stages"]}
    assert stages["configure"]["status"] == "failed"
    # The preflight stopped every host at its first task: the reachable one was not configured for nothing.
    assert results["hosts"][host0]["changes"] == []
    assert "validate" not in stages
    assert stages["teardown"]["status"] == "ok" and len(results["destroyed"]) == 3
    assert results["verdict"] == "ERROR" and results["tests"] == []
    assert sandbox.left(("provision", "run")) == []


def test_allow_missing_validates_the_rest(sim_deps: None, sandbox: Sandbox) -> None:
    # Hosts get 10 s to answer SSH, not the env's 30: a sim host answers within a second, the deaf one never.
    # Its test is plain Python ranks (pav_payload.plain, no torch): what is tested is the run without a host.
    run = sandbox.cli("--env", "sim", "--hosts", "2", "--tests", "fault_plain",
                      "--allow-missing", "1", "-e", "pav_ssh_timeout_s=10",
                      env={"PAV_SIM_DEAF_HOST": "1"})  # fmt: skip
    assert run.rc == 1, run.stdout + run.stderr  # a verdict: FAIL, since one host was not validated
    assert "Traceback" not in run.stdout + run.stderr
    results = sandbox.results()
    host0, host1 = (f"sim-{cluster_id(sandbox.state)}-{i}" for i in (0, 1))
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
    facts = json.loads((sandbox.run_dir("run") / "hosts" / host0 / "facts.json").read_text())
    assert "mpi" not in facts and "nccl_tests" not in facts
    assert results["hosts"][host1]["ansible"]["configure"] == {}  # not tried again: provision waited already
    assert stages["collect"]["detail"] == "collected from 1 host(s)"  # the lost host was not tried again
    assert stages["teardown"]["status"] == "ok" and len(results["destroyed"]) == 3
    assert sandbox.left(("run",)) == []
