"""A launch runs in the background and its host waits for it (issue 65: no Ansible fork held meanwhile, so
more hosts than forks start together): a launch whose shell is killed from outside, so that it never writes
its launcher.rc, fails its host at once, named, instead of being waited for until its limit."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.roles.test_safe_dirs import launch_vars, play

pytestmark = [
    pytest.mark.slow,  # a real ansible-playbook run
    pytest.mark.skipif(os.geteuid() != 0, reason="the launch's folders are made as root's (CI runs as root)"),
]

# The rank kills the launch's shell: its parent is `timeout`, whose parent that shell is.
KILL_THE_SHELL = (
    "import os, signal; t = os.getppid(); "
    "os.kill(int(open(f'/proc/{t}/stat').read().rsplit(')', 1)[1].split()[1]), signal.SIGKILL)"
)


def test_a_launch_killed_from_outside_fails_its_host_at_once(tmp_path: Path) -> None:
    remote = tmp_path / "lib" / "pav"
    role_vars = launch_vars(tmp_path, remote, tmp_path / "unused")
    # A limit the play's own (180 s) would end first: waited for until it, the run fails that way instead.
    [launch] = role_vars["run_tests_launches"]
    launch.update(timeout_s=3600, argv_by_host={"localhost": ["{python}", "-c", KILL_THE_SHELL]})
    run = play(tmp_path, "run_tests", "main", role_vars)
    assert run.returncode != 0, run.stdout[-3000:]
    rc = remote / "runs" / "r1" / "results" / "t" / "launcher.rc"
    said = f"pav: the launch of t ended without its exit code ({rc}): something outside the run killed it"
    assert said in run.stdout, run.stdout[-3000:]
    assert not rc.exists()
