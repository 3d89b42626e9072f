"""kill -9 of the driver mid-validate (a lost CI runner, the OOM killer): its Ansible and SSH die with it
(pav.reaper); a run started meanwhile stops at once, naming it; its results.json says ERROR with the stages
it finished. On a sim env the next run names it and what it left and destroys that before it provisions;
on static hosts the next run's first contact ends the launches it left there.

On the sim env one host proves it (a cluster of more hosts is left the same way: keeper.left lists them),
and the next run runs only the stages the claim is about (provision, teardown): what it configures and
validates on its own hosts is no fault's subject (issue 49).

Its tests are plain Python ranks (pav_payload.plain, no torch): what is tested is the driver's death."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from tests.conftest import assert_one_line_error, run_cli
from tests.faults.conftest import Configured, Sandbox, launch_processes, playbook_run_id, processes, wait_for
from tests.sim.leftovers import cluster_id

pytestmark = pytest.mark.slow

HANG = ("--tests", "fault_plain_hang", "--test-timeout", "300")
PASS = ("--tests", "fault_plain")


def hung_then_killed(proc: subprocess.Popen[str], run_dir: Path, remote: list[Path], run_id: str) -> None:
    """Wait until fault_plain_hang's ranks run on every host, then SIGKILL the driver alone."""
    started = lambda: all(len(list(d.glob("results/fault_plain_hang/*.rank*.json"))) == 2 for d in remote)  # noqa: E731
    wait_for("every rank on every host", started, 300, proc)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)

    # Its Ansible, SSH and whatever else it started end with it, on this machine.
    def gone() -> bool:
        marked = processes(environ=f"PAV_DRIVER={run_id}")
        return not marked and not processes("ansible-playbook", str(run_dir))

    wait_for("the killed driver's processes to end", gone, 60)


def test_on_an_env_that_provisions(sim_deps: None, sandbox: Sandbox) -> None:
    proc = sandbox.start("--env", "sim", "--hosts", "1", *HANG, run="killed")
    run_dir = sandbox.run_dir("killed")
    run_id = wait_for("the validate playbook", lambda: playbook_run_id(run_dir), 300, proc)
    remote = [sandbox.state / "sim" / "run" / "0" / "fs" / "upper" / "var" / "lib" / "pav" / "runs" / run_id]

    # A second run on the env meanwhile stops at once, naming the first.
    second = sandbox.cli("--env", "sim", "--hosts", "1", *PASS, run="second")
    busy = f"env sim's state ({sandbox.state}) is in use by run {run_id} (pid {proc.pid}, "
    assert_one_line_error(second, busy, documented=True)
    assert not sandbox.run_dir("second").exists()

    hung_then_killed(proc, run_dir, remote, run_id)
    # Its reaper says in its record that it was killed, and when (issue 48: an empty error, no end).
    wait_for("the reaper to record the kill", lambda: bool(sandbox.results("killed").get("ended")), 60)
    results = sandbox.results("killed")
    assert results["verdict"] == "ERROR"
    assert results["error"].startswith("killed during stage validate: the driver ended without")
    # The stage it died in, as it was written when it started (issue 64).
    stages = {s["name"]: s["status"] for s in results["stages"]}
    assert stages == {"provision": "ok", "configure": "ok", "validate": "killed"}
    assert launch_processes(run_id)  # its launches still run on its hosts: the next run must end them

    # The next run that provisions names it and what it left, destroys that, then makes hosts of its own
    # (and, with only those stages, destroys them again).
    nxt = sandbox.cli("--env", "sim", "--hosts", "1", "--stages", "provision,teardown", run="next")
    assert nxt.rc == 0, nxt.stdout + nxt.stderr
    said = f"env sim: destroying what run {run_id} (pid {proc.pid}, "
    host = f"sim-{cluster_id(sandbox.state)}-0"
    left = f"; its driver is gone) left (2 resource(s): hosts {host}), before this run provisions"
    assert said in nxt.stdout and left in nxt.stdout, nxt.stdout
    stages = {s["name"]: s for s in sandbox.results("next")["stages"]}
    assert {n: s["status"] for n, s in stages.items()} == {
        "provision": "ok",
        "report": "ok",
        "teardown": "ok",
    }
    provision = stages["provision"]
    assert provision["detail"].startswith(f"first destroyed 2 resource(s), what run {run_id} (pid {proc.pid}")
    assert launch_processes(run_id) == []
    assert sandbox.left(("killed", "next")) == []


def test_on_static_hosts(configured: Configured, sandbox: Sandbox) -> None:
    # One host: the next run's first contact does on each host what it does on one (issue 49).
    inventory = ("--inventory", str(configured.inventory(0)))
    proc = sandbox.start(*inventory, "--stages", "validate,collect,report,teardown", *HANG, run="killed")
    run_dir = sandbox.run_dir("killed")
    run_id = wait_for("the validate playbook", lambda: playbook_run_id(run_dir), 120, proc)
    remote = [configured.remote_run_dir(0, run_id)]
    hung_then_killed(proc, run_dir, remote, run_id)
    assert sandbox.results("killed")["verdict"] == "ERROR"  # its record, though no stage of it ended
    assert launch_processes(run_id)  # on the hosts, out of the driver's reach: as the dead run left them

    # The next run's first contact ends them and removes the dead run's folder, naming it.
    # (A teardown of no kept run: no --run-dir, which would name one; its record under --results-root.)
    nxt = run_cli(*inventory, "--stages", "teardown", "--results-root", str(sandbox.run_dir("next")),
                  env=sandbox.env())  # fmt: skip
    assert nxt.rc == 0, nxt.stdout + nxt.stderr
    [next_dir] = sandbox.run_dir("next").iterdir()
    ended = "ended without a teardown: killed its launches and removed its folder on 1 of 1 host(s)"
    assert f"run {run_id} (pid {proc.pid}, " in nxt.stdout and ended in nxt.stdout, nxt.stdout
    assert launch_processes(run_id) == []
    assert not any(d.exists() for d in remote)
    assert sandbox.left(("killed", next_dir)) == []
