"""SIGINT (Ctrl-C: the driver's whole process group) and SIGTERM (the driver alone) during provision,
configure and validate: what finished is collected, teardown runs (a second signal does not stop it),
results.json and summary.txt are written, exit 130 / 143, and nothing of the run is left."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.docs_quotes import assert_documented
from tests.faults.conftest import Configured, Sandbox, error_lines, playbook_run_id, processes, wait_for
from tests.summary_lines import unfolded

pytestmark = pytest.mark.slow

SIGNALS = {"SIGINT": signal.SIGINT, "SIGTERM": signal.SIGTERM}


def send(proc: Any, name: str) -> None:
    if name == "SIGINT":
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal sends on Ctrl-C
    else:
        os.kill(proc.pid, signal.SIGTERM)  # what kill, systemd or a batch system send


def finish(proc: Any, name: str, stage: str, sandbox: Sandbox, run: str = "run") -> dict[str, Any]:
    return finish_printed(proc, name, stage, sandbox, run)[0]


def finish_printed(
    proc: Any, name: str, stage: str, sandbox: Sandbox, run: str = "run"
) -> tuple[dict[str, Any], str]:
    """finish, and what the driver printed on stdout."""
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
    return results, out


@pytest.mark.parametrize("name", SIGNALS)
def test_during_provision(sim_deps: None, sandbox: Sandbox, name: str) -> None:
    """Mid terraform apply: the apply is let finish (stopped, it would lose track of hosts it was making),
    then everything in the state is destroyed. One host: what is cut is the apply, whatever it makes
    (a second host would cost its making and destroying, and prove nothing more; issue 49)."""
    proc = sandbox.start("--env", "sim", "--hosts", "1", "--tests", "torch_gloo_allreduce")
    # The apply's own process, not the host-up it runs: that lasts a fraction of a second on a quiet machine,
    # and a poll could miss it while the apply went on to its end (seen once in a fresh-clone run).
    applying = (" apply ", f"-var-file={sandbox.state}")
    wait_for("terraform apply", lambda: processes(*applying), 120, proc)
    send(proc, name)
    results = finish(proc, name, "provision", sandbox)
    assert "configure" not in {s["name"] for s in results["stages"]}
    assert sandbox.left(("run",)) == []


@pytest.mark.parametrize("name", SIGNALS)
def test_during_configure(sim_deps: None, sandbox: Sandbox, name: str) -> None:
    """Mid playbook: the playbook is cancelled, validate never starts, the hosts are destroyed. One host: a
    playbook is cancelled whole, whatever the hosts it runs on (issue 49)."""
    proc = sandbox.start("--env", "sim", "--hosts", "1", "--tests", "torch_gloo_allreduce")
    events = sandbox.run_dir("run") / "ansible" / "configure" / "artifacts"
    wait_for("configure tasks", lambda: len(list(events.glob("*/job_events/*"))) > 5, 300, proc)
    send(proc, name)
    results = finish(proc, name, "configure", sandbox)
    assert "validate" not in {s["name"] for s in results["stages"]}
    assert len(results["destroyed"]) == 2 and "terraform_data.network" in results["destroyed"]
    assert sandbox.left(("run",)) == []


def test_a_cut_configure_keeps_what_it_did_to_the_host(sandbox: Sandbox, tmp_path: Path) -> None:
    """Mid configure on this machine (--env local), once a task changed the host (in check mode: would
    change it): the host keeps that change and says configure was cut on it, where it once read
    `unknown ? not configured`; the progress line says `interrupted`, not `not run`.
    The payload's Python is held until the signal is sent, so configure's last task (the wait for the facts
    read) cannot end first: configure on this machine takes 3 s, and a signal sent after its first change
    came once the play had ended on the host (seen in CI and here every time)."""
    python, held, go = held_python(tmp_path / "hold")
    proc = sandbox.start("--tests", "torch_gloo_allreduce", "-e", f"torch_payload_python={python}")
    try:
        events = sandbox.run_dir("run") / "ansible" / "configure" / "artifacts"
        first = wait_for("a configure task that changed the host", lambda: changed_task(events), 300, proc)
        wait_for("the facts read, held", held.exists, 300, proc)
        send(proc, "SIGINT")
        results, out = finish_printed(proc, "SIGINT", "configure", sandbox)
    finally:
        go.touch()
    host = results["hosts"]["localhost"]
    assert host["status"] == "interrupted" and first in host["changes"], host
    summary = unfolded((sandbox.run_dir("run") / "summary.txt").read_text().splitlines())
    row = next(ln for ln in summary if ln.startswith("localhost"))
    assert row.split()[1] == "interrupted" and row.endswith("before configure was interrupted on it"), row
    assert "[configure] localhost: interrupted" in out, out
    # Known leak, not this test's subject: over the local connection a module the signal kills mid-run
    # leaves its AnsiballZ payload folder in TMPDIR (ansible_<module>_payload_*). Nothing else may be left.
    left = [f for f in sandbox.left(("run",)) if not re.search(r"/ansible_\S+_payload_", f)]
    assert left == []


def held_python(folder: Path) -> tuple[Path, Path, Path]:
    """A payload Python that says it started (`held`), then waits for `go` (a minute at most, so a test that
    died leaves nothing for long) and runs the driver's own Python."""
    folder.mkdir()
    python, held, go = folder / "python", folder / "held", folder / "go"
    python.write_text(
        "#!/bin/sh\n"
        f": >{shlex.quote(str(held))}\n"
        f"i=0; while [ ! -e {shlex.quote(str(go))} ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done\n"
        f'exec {shlex.quote(sys.executable)} "$@"\n'
    )
    python.chmod(0o755)
    return python, held, go


def changed_task(events: Path) -> str | None:
    """The "role : task" label of the first task a playbook's events say changed the host."""
    for path in sorted(events.glob("*/job_events/*.json")):
        try:
            event = json.loads(path.read_text())
        except (OSError, ValueError):  # being written
            continue
        data = event.get("event_data", {})
        if event.get("event") == "runner_on_ok" and (data.get("res") or {}).get("changed"):
            return f"{data['role']} : {data['task']}" if data.get("role") else str(data.get("task"))
    return None


# What each signal cuts during validate, a test that passes then one that hangs. SIGINT: torch's, which one
# torchrun per host runs as a suite, so what is cut is a suite (its test that finished keeps its result, and
# it is reported test by test). SIGTERM: plain Python ranks (pav_payload.plain, no torch), each test a
# launch of its own, so what is cut is the launch after the one that finished.
CUT = {"SIGINT": ("torch_gloo_allreduce", "fault_hang"), "SIGTERM": ("fault_plain", "fault_plain_hang")}
# The hosts of each: the torch suite on host 0 alone (a suite is per host, and each host's torchrun and two
# ranks are three torch imports; issue 49), the plain launches on hosts 0 and 1, where teardown is shown to
# reach every host.
HOSTS = {"SIGINT": (0,), "SIGTERM": (0, 1)}


@pytest.mark.parametrize("name", SIGNALS)
def test_during_validate(configured: Configured, sandbox: Sandbox, name: str) -> None:
    """Mid test, on hosts the run does not destroy (a static inventory): the playbook is cancelled, the
    test that finished before the signal keeps its result, and teardown kills what the launch left
    running on every host and removes the run's folder there, through a second signal too."""
    done, hung = CUT[name]
    hosts = HOSTS[name]
    proc = sandbox.start(*configured.validate(*hosts), "--tests", f"{done},{hung}", "--test-timeout", "300")
    run_id = wait_for("the validate playbook", lambda: playbook_run_id(sandbox.run_dir("run")), 120, proc)
    remote = [configured.remote_run_dir(i, run_id) for i in hosts]
    started = lambda: all(len(list(d.glob(f"results/{hung}/*.rank*.json"))) == 2 for d in remote)  # noqa: E731
    wait_for("every rank on every host", started, 300, proc)
    suite = [(d / "results" / "pav_suites_1").is_dir() for d in remote]
    assert suite == [name == "SIGINT"] * len(hosts), suite  # the launch cut is a suite under SIGINT only
    send(proc, name)
    teardown = sandbox.run_dir("run") / "ansible" / "teardown"
    wait_for("the teardown playbook", teardown.exists, 300, proc)
    send(proc, name)  # impatient: it must not cancel the teardown
    results = finish(proc, name, "validate", sandbox)
    assert {s["name"]: s["status"] for s in results["stages"]}["collect"] == "ok"
    outcome = {(t["name"], t["hosts"][0]): (t["status"], t["reason"]) for t in results["tests"]}
    assert len(outcome) == 2 * len(hosts), outcome
    for host in (configured.names[i] for i in hosts):
        assert outcome[(done, host)] == ("pass", "")
        # What the signal cut short says so, and blames no host for it.
        assert outcome[(hung, host)] == (
            "interrupted",
            f"the run was interrupted by {name} before {host} gave a result",
        )
    said = (sandbox.run_dir("run") / "summary.txt").read_text()
    assert "unreachable over SSH" not in said and f"interrupted={len(hosts)}" in said
    assert "unreachable over SSH" not in (sandbox.run_dir("run") / "report.html").read_text()
    assert not any(d.exists() for d in remote)
    assert sandbox.left(("run",)) == []
