"""The SSH control sockets of a run's masters: whoever reaches one runs commands as the run on its host, so
they live in a folder only the driver's user can enter, made afresh for each run, gone after it. The
playbook itself is not run: ansible_runner.run stands in, keeping the environment the driver gave it."""

from __future__ import annotations

import configparser
import hashlib
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import ansible_runner
import pytest

from pav import ansible_exec, paths
from pav.errors import PavError


class Finished:
    status, rc, stats = "successful", 0, {}


def control_dir_given(run_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """What run_playbook tells Ansible its ControlPath folder is."""
    given: dict[str, str] = {}

    def run(**kwargs: Any) -> Finished:
        given.update(kwargs["envvars"])
        return Finished()

    monkeypatch.setattr(ansible_runner, "run", run)
    ansible_exec.run_playbook(
        "configure", "site.yml", run_dir / "hosts.yml", ["h0"], run_dir / "ansible" / "x", {}
    )
    return Path(given["ANSIBLE_SSH_CONTROL_PATH_DIR"])


def private(folder: Path) -> bool:
    info = folder.lstat()
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and stat.S_IMODE(info.st_mode) == 0o700


def test_each_run_gets_a_private_control_dir_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANSIBLE_SSH_CONTROL_PATH_DIR", raising=False)
    run_dir = tmp_path / "run"
    first = control_dir_given(run_dir, monkeypatch)
    assert private(first)
    assert first.parent == Path("/tmp") and len(str(first)) < 40  # room for the socket's name in ~100
    assert ansible_exec.control_dir(run_dir / "ansible") == first  # one folder for all of a run's playbooks
    ansible_exec.close_connections(run_dir / "ansible")
    assert not first.exists()
    again = control_dir_given(run_dir, monkeypatch)  # the same run dir again: a name no one could foresee
    assert private(again) and again != first
    ansible_exec.close_connections(run_dir / "ansible")


def test_a_folder_made_first_at_the_old_name_is_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The old name was BASE/sha256(RUN/ansible)[:8]: anyone could make it first, open to all."""
    base = tmp_path / "cp"
    run_dir = tmp_path / "run"
    planted = base / hashlib.sha256(str((run_dir / "ansible").resolve()).encode()).hexdigest()[:8]
    planted.mkdir(parents=True)
    planted.chmod(0o777)
    monkeypatch.setenv("ANSIBLE_SSH_CONTROL_PATH_DIR", str(base))
    given = control_dir_given(run_dir, monkeypatch)
    assert given != planted and given.parent == base and private(given)
    ansible_exec.close_connections(run_dir / "ansible")
    assert not given.exists() and planted.exists()


def test_a_control_dir_that_cannot_be_made_says_what_to_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANSIBLE_SSH_CONTROL_PATH_DIR", str(tmp_path / "missing"))
    with pytest.raises(PavError, match="set ANSIBLE_SSH_CONTROL_PATH_DIR to a short folder"):
        ansible_exec.control_dir(tmp_path / "run" / "ansible")


def test_ansible_cfg_names_no_shared_control_dir() -> None:
    cfg = configparser.ConfigParser(interpolation=None)
    cfg.read(paths.ANSIBLE_CFG)
    assert cfg.get("ssh_connection", "control_path_dir", fallback=None) is None
    assert "/tmp/pav-cp" not in paths.ANSIBLE_CFG.read_text()


def test_a_process_that_never_closes_its_run_leaves_no_control_dir(tmp_path: Path) -> None:
    """In-process callers (the suite's own tests among them) left 400 empty pav-cp-* folders in /tmp a day."""
    code = (
        "import sys; from pathlib import Path; from pav import ansible_exec; "
        "print(ansible_exec.control_dir(Path(sys.argv[1])))"
    )
    env = {**os.environ, "ANSIBLE_SSH_CONTROL_PATH_DIR": str(tmp_path)}
    made = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "run" / "ansible")],
        capture_output=True, text=True, env=env, check=True,
    )  # fmt: skip
    assert made.stdout.strip().startswith(str(tmp_path / "pav-cp-"))
    assert not Path(made.stdout.strip()).exists()
