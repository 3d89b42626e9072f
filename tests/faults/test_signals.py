"""SIGINT (Ctrl-C: the driver's whole process group) and SIGTERM (the driver alone) during provision,
configure and validate: what finished is collected, teardown runs (a second signal does not stop it),
results.json and summary.txt are written, exit 130 / 143, and nothing of the run is left."""

from __future__ import annotations

import os
import signal
from typing import Any

import pytest

from tests.docs_quotes import assert_documented
from tests.faults.conftest import Configured, Sandbox, error_lines, playbook_run_id, processes, wait_for

pytestmark = pytest.mark.slow

SIGNALS = {"SIGINT": signal.SIGINT, "SIGTERM": signal.SIGTERM}


def send(proc: Any, name: str) -> None:
    if name == "SIGINT":
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal sends on Ctrl-C
    else:
        os.kill(proc.pid, signal.SIGTERM)  # what kill, systemd or a batch system send


def finish(proc: Any, name: str, stage: str, sandbox: Sandbox, run: str = "run") -> dict[str, Any]:
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 128 + SIGNALS[name], out + err
    assert "Traceback" not in out + err
    assert error_lines((out, err)) == [f"error: interrupted by {name}"], err
    assert_documented(f"error: interrupted by {name}")
    results = sandbox.results(run)
    stages = {s["name"]: s for s in results["stages"]}
    assert stages[stage]["status"] == "interrupted", stages[stage]
    assert stages["teardown"]["status"] == "ok", stages["teardown"]
    assert results["verdict"] == "ERROR" and results["error"] == f"interrupted by {name}"
    assert f"interrupted by {name}" in (sandbox.run_dir(run) / "summary.txt").read_text()
    return results


@pytest.mark.parametrize("name", SIGNALS)
def test_during_provision(sim_deps: None, sandbox: Sandbox, name: str) -> None:
    """Mid terraform apply: the apply is let finish (stopped, it would lose track of hosts it was making),
    then everything in the state is destroyed."""
    proc = sandbox.start("--env", "sim", "--hosts", "2", "--tests", "torch_gloo_allreduce")
    sim_dir = str(sandbox.state / "sim")
    wait_for("a host being created", lambda: processes("sim-hosts host-up", sim_dir), 120, proc)
    send(proc, name)
    results = finish(proc, name, "provision", sandbox)
    assert "configure" not in {s["name"] for s in results["stages"]}
    assert sandbox.left(("run",)) == []


@pytest.mark.parametrize("name", SIGNALS)
def test_during_configure(sim_deps: None, sandbox: Sandbox, name: str) -> None:
    """Mid playbook: the playbook is cancelled, validate never starts, the hosts are destroyed."""
    proc = sandbox.start("--env", "sim", "--hosts", "2", "--tests", "torch_gloo_allreduce")
    events = sandbox.run_dir("run") / "ansible" / "configure" / "artifacts"
    wait_for("configure tasks", lambda: len(list(events.glob("*/job_events/*"))) > 5, 300, proc)
    send(proc, name)
    results = finish(proc, name, "configure", sandbox)
    assert "validate" not in {s["name"] for s in results["stages"]}
    assert len(results["destroyed"]) == 3
    assert sandbox.left(("run",)) == []


@pytest.mark.parametrize("name", SIGNALS)
def test_during_validate(configured: Configured, sandbox: Sandbox, name: str) -> None:
    """Mid test, on hosts the run does not destroy (a static inventory): the playbook is cancelled, the
    test that finished before the signal keeps its result, and teardown kills what the launch left
    running on every host and removes the run's folder there, through a second signal too."""
    proc = sandbox.start(
        *configured.validate(0, 1), "--tests", "torch_gloo_allreduce,fault_hang", "--test-timeout", "300"
    )
    run_id = wait_for("the validate playbook", lambda: playbook_run_id(sandbox.run_dir("run")), 120, proc)
    remote = [configured.remote_run_dir(i, run_id) for i in (0, 1)]
    started = lambda: all(len(list(d.glob("results/fault_hang/*.rank*.json"))) == 2 for d in remote)  # noqa: E731
    wait_for("every rank on both hosts", started, 300, proc)
    send(proc, name)
    teardown = sandbox.run_dir("run") / "ansible" / "teardown"
    wait_for("the teardown playbook", teardown.exists, 300, proc)
    send(proc, name)  # impatient: it must not cancel the teardown
    results = finish(proc, name, "validate", sandbox)
    assert {s["name"]: s["status"] for s in results["stages"]}["collect"] == "ok"
    outcome = {(t["name"], t["hosts"][0]): (t["status"], t["reason"]) for t in results["tests"]}
    for host in configured.names[:2]:
        assert outcome[("torch_gloo_allreduce", host)] == ("pass", "")
        # What the signal cut short says so.
        assert outcome[("fault_hang", host)] == (
            "error",
            f"no result came back from {host}: the run was interrupted by {name}",
        )
    assert not any(d.exists() for d in remote)
    assert sandbox.left(("run",)) == []
