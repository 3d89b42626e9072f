"""The payload's facts read, started in the background (roles/torch_payload/files/pav-start-job.sh) and
waited for on the host in one module run (plugins/modules/pav_facts_wait.py, issue 65): a read that hangs,
as NVML does on a GPU that fell off the bus, fails its host at the limit, named; one whose shell something
killed fails at once. Run as the role's own `facts` entry point runs it, on this machine as root."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.roles.test_safe_dirs import deploy, play

pytestmark = pytest.mark.slow  # real ansible-playbook runs


def read_with(tmp_path: Path, python: str, timeout_s: int = 60) -> tuple[str, Path]:
    """The role's facts read with `python` (a shell script standing in for one), after its deploy."""
    dest = tmp_path / "lib" / "pav" / "payload"
    assert deploy(tmp_path, dest).returncode == 0
    fake = tmp_path / "python"
    fake.write_text(f"#!/bin/sh\n{python}\n")
    fake.chmod(0o755)
    role_vars = {"torch_payload_dest": str(dest), "torch_payload_python": str(fake),
                 "torch_payload_gpu_facts_timeout_s": timeout_s}  # fmt: skip
    run = play(tmp_path, "torch_payload", "facts", role_vars)
    assert run.returncode != 0, run.stdout[-3000:]
    assert "fatal: [localhost]" in run.stdout
    return run.stdout, dest


def test_a_read_that_hangs_fails_its_host_at_the_limit_named(tmp_path: Path) -> None:
    """Before, async's limit ended it and the host failed with 'the payload did not run with PYTHON (Job
    reached maximum time limit ...); set torch_payload_python ...': the wrong fix."""
    said, _ = read_with(tmp_path, "exec sleep 600", timeout_s=1)
    assert "the facts read (torch, NVML or nvidia-smi, the kernel log) ran past its 1 s on this host" in said
    assert "raise torch_payload_gpu_facts_timeout_s" in said and "set torch_payload_python" not in said


def test_a_read_whose_shell_was_killed_fails_at_once(tmp_path: Path) -> None:
    # The stand-in kills the background shell that waits on it (its parent is `timeout`), then lingers.
    said, dest = read_with(tmp_path, 'kill -KILL "$(ps -o ppid= -p "$PPID")"; exec sleep 600')
    assert f"pav: the facts read ended without its exit code ({dest}/.async/facts.rc)" in said


def test_a_python_that_cannot_run_the_payload_names_the_fix(tmp_path: Path) -> None:
    said, dest = read_with(tmp_path, "echo 'ModuleNotFoundError: No module named torch' >&2; exit 1")
    assert (
        f"the payload did not run with {tmp_path / 'python'} (ModuleNotFoundError: No module named torch)"
        in (said)
    )
    assert sorted(p.name for p in (dest / ".async").iterdir()) == []  # its files removed once read
