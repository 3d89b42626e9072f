"""The progress lines a stage prints off a terminal (pav.progress), issue 48: a host that fails or becomes
unreachable is said once, as it happens, in the form of the stage's end line; the end line does not say it
again. Through the real playbooks of the stages that printed it twice (in process, on this machine's
Python): a drain and a recheck on a host that is no Slurm node, a configure on a host that does not answer
SSH; and Progress fed runner events as they come."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from pav.context import Options
from pav.errors import PavError
from pav.marking import flow
from pav.progress import Progress
from pav.stages import configure
from tests.driver.contexts import context
from tests.driver.test_slurm_drain import local_inventory


def event(kind: str, host: str, task: str, **data: object) -> dict[str, object]:
    return {"event": f"runner_on_{kind}", "event_data": {"host": host, "task": task, **data}}


def said(out: str, stage: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith(f"[{stage}] ")]


def test_a_failed_host_is_said_once_with_its_counts() -> None:
    out = io.StringIO()  # not a terminal
    with Progress("drain", ["h0", "h1"], out=out) as progress:
        progress.on_event(event("ok", "h0", "Read the node's Slurm name", res={}))
        progress.on_event(event("ok", "h1", "Read the node's Slurm name", res={}))
        progress.on_event(event("failed", "h0", "List the nodes the controller knows", res={}))
        progress.on_event(event("ok", "h1", "Update the node", res={"changed": True}))
        progress.done("h0", "failed")
        progress.done("h1", "done")
    assert said(out.getvalue(), "drain") == [
        "[drain] h0: failed      ok=1 changed=0 failed=1  List the nodes the controller knows",
        "[drain] h1: done        ok=2 changed=1 failed=0  Update the node",
    ]


def test_an_unreachable_host_is_said_once() -> None:
    out = io.StringIO()
    with Progress("configure", ["h0"], out=out) as progress:
        progress.on_event(event("unreachable", "h0", "Gather host facts", res={"unreachable": True}))
        progress.done("h0", "unreachable")
    assert said(out.getvalue(), "configure") == [
        "[configure] h0: unreachable ok=0 changed=0 failed=1  Gather host facts"
    ]


def test_what_a_host_did_after_its_failure_is_its_end_line() -> None:
    """An ignored failure says nothing; a host that went on after a failure (a rescue) gets its end line."""
    out = io.StringIO()
    with Progress("validate", ["h0"], out=out) as progress:
        progress.on_event(event("failed", "h0", "Probe", res={}, ignore_errors=True))
        progress.on_event(event("failed", "h0", "Launch", res={}))
        progress.on_event(event("ok", "h0", "Fetch what it left", res={}))
        progress.done("h0", "failed")
    assert said(out.getvalue(), "validate") == [
        "[validate] h0: failed      ok=1 changed=0 failed=1  Launch",
        "[validate] h0: failed      ok=2 changed=0 failed=1  Fetch what it left",
    ]


@pytest.mark.slow  # a real playbook
def test_a_recheck_that_cannot_read_slurm_says_its_host_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ctx = context(1, options=Options(results_root=tmp_path / "runs", recheck=True))
    ctx.inventory_file = local_inventory(tmp_path)
    ctx.run_dir = tmp_path / "run"
    ctx.run_dir.mkdir()
    with pytest.raises(PavError, match="could not read the Slurm nodes"):
        flow.select(ctx)
    [line] = said(capsys.readouterr().out, "recheck")
    assert line.startswith(
        "[recheck] h0: failed      ok=1 changed=0 failed=1  Read the nodes from the controller"
    )


@pytest.mark.slow  # a real playbook
def test_an_unreachable_host_in_configure_is_said_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ctx = context(1, options=Options(results_root=tmp_path / "runs"))
    ctx.inventory_file = tmp_path / "hosts.yml"  # nothing listens on port 1: refused at once
    host = {"ansible_host": "127.0.0.1", "ansible_port": 1, "ansible_python_interpreter": sys.executable}
    ctx.inventory_file.write_text(json.dumps({"all": {"hosts": {"h0": host}}}))
    ctx.run_dir = tmp_path / "run"
    (ctx.run_dir / "ansible").mkdir(parents=True)
    with pytest.raises(PavError, match="unreachable"):
        configure.run(ctx)
    [line] = said(capsys.readouterr().out, "configure")
    assert line.startswith("[configure] h0: unreachable ok=") and "failed=1  " in line


def test_64_alike_hosts_end_in_one_line_and_a_different_one_in_its_own() -> None:
    """Issue 65: at 64 hosts a stage's end lines were 64 lines in the text order sim-x-1, sim-x-10, ...;
    hosts whose lines read the same are one line, named as a range, the odd one out in its own."""
    hosts = [f"sim-x-{i}" for i in range(64)]
    out = io.StringIO()
    with Progress("configure", sorted(hosts), out=out) as progress:
        for host in hosts:
            progress.on_event(event("ok", host, "Install the payload", res={}))
            progress.done(host, "done")
        progress.on_event(event("ok", "sim-x-7", "Install the payload", res={"changed": True}))
    assert said(out.getvalue(), "configure") == [
        "[configure] 63 hosts sim-x-[0-6,8-63]: done        ok=1 changed=0 failed=0  Install the payload",
        "[configure] sim-x-7: done        ok=2 changed=1 failed=0  Install the payload",
    ]
