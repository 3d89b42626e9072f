"""The roles' own path (a playbook of one's own, the Galaxy collection's: no driver, no installer script) and
every launch keep the tool's folders root's (issue 62), as Ansible runs them on this machine as root.

Each attack is tried as a local user (nobody) would: the payload's folder made first by them, or a folder
made writable by others after configure checked it. The run refuses, naming the folder, its owner and mode,
and nothing planted runs."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from pav import paths

pytestmark = [
    pytest.mark.slow,  # real ansible-playbook runs
    pytest.mark.skipif(os.geteuid() != 0, reason="another user's folders need root (CI runs as root)"),
]

NOBODY = 65534


def play(
    tmp_path: Path, role: str, tasks_from: str, role_vars: dict[str, Any]
) -> subprocess.CompletedProcess[str]:
    """One role's tasks on localhost, as a user's playbook includes them."""
    playbook = tmp_path / f"{role}-{tasks_from}.yml"
    task = {"name": "The role", "ansible.builtin.include_role": {"name": str(paths.ROLES / role),
                                                                  "tasks_from": tasks_from}}  # fmt: skip
    playbook.write_text(yaml.safe_dump([
        {"name": "Play", "hosts": "localhost", "connection": "local", "gather_facts": False,
         "vars": role_vars, "tasks": [task]},
    ]))  # fmt: skip
    env = {**os.environ, "ANSIBLE_PYTHON_INTERPRETER": sys.executable, "ANSIBLE_NOCOWS": "1",
           "ANSIBLE_NOCOLOR": "1"}  # fmt: skip
    ansible = Path(sys.executable).parent / "ansible-playbook"
    return subprocess.run([str(ansible), "-i", "localhost,", str(playbook)], env=env, capture_output=True,
                          text=True, timeout=180, check=False, cwd=tmp_path)  # fmt: skip


def did(run: subprocess.CompletedProcess[str], task: str) -> str:
    found = re.findall(
        rf"^TASK \[[^\]]*: {re.escape(task)}\] \**\n(ok|changed|skipping|fatal)", run.stdout, re.M
    )
    return found[-1] if found else "absent"


def deploy(tmp_path: Path, dest: Path) -> subprocess.CompletedProcess[str]:
    return play(tmp_path, "torch_payload", "deploy", {"torch_payload_dest": str(dest)})


@pytest.fixture(scope="module")
def deployed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The role's own deploy into lib/pav/payload, made once: the tests that start from a deployed payload
    each take a copy (a deploy is an ansible-playbook run, 3-4 s; the copy is the same files and modes)."""
    base = tmp_path_factory.mktemp("deployed")
    run = deploy(base, base / "lib" / "pav" / "payload")
    assert run.returncode == 0, run.stdout[-3000:]
    return base / "lib"


def deployed_in(tmp_path: Path, deployed: Path) -> Path:
    """This test's own copy of the deployed folders: its lib/pav."""
    shutil.copytree(deployed, tmp_path / "lib", symlinks=True)
    return tmp_path / "lib" / "pav"


def test_the_roles_own_deploy_refuses_a_folder_another_user_made_first(tmp_path: Path, sticky: Path) -> None:
    """Issue 62 (Medium): ansible.builtin.file state=directory kept the folder someone else made and unarchive
    unpacked into it, beside their sitecustomize.py."""
    base = sticky / "pav"
    (base / "payload").mkdir(parents=True)
    marker = tmp_path / "PWNED"
    (base / "payload" / "sitecustomize.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    for folder in (base, base / "payload", base / "payload" / "sitecustomize.py"):
        os.chown(folder, NOBODY, NOBODY)
    run = deploy(tmp_path, base / "payload")
    assert run.returncode != 0, run.stdout[-3000:]
    assert f"pav: unsafe folder: {base} is owned by nobody (uid {NOBODY}), mode 755;" in run.stdout
    assert not (base / "payload" / "pav_payload").exists() and not marker.exists()


def test_the_roles_own_deploy_replaces_the_payload_whole_and_then_changes_nothing(tmp_path: Path) -> None:
    dest = tmp_path / "lib" / "pav" / "payload"
    first = deploy(tmp_path, dest)
    assert first.returncode == 0, first.stdout[-3000:]
    assert did(first, "Move the payload into place unless it is unchanged") == "changed"
    assert (dest / "pav_payload" / "__main__.py").is_file()
    assert oct(dest.parent.stat().st_mode & 0o777) == "0o755"
    again = deploy(tmp_path, dest)
    assert did(again, "Move the payload into place unless it is unchanged") == "ok", again.stdout[-3000:]
    (dest / "sitecustomize.py").write_text("raise SystemExit('left behind')\n")
    third = deploy(tmp_path, dest)
    assert did(third, "Move the payload into place unless it is unchanged") == "changed"
    assert not (dest / "sitecustomize.py").exists()
    assert sorted(p.name for p in dest.parent.iterdir()) == ["payload"]  # no fresh or old folder left


def launch_vars(tmp_path: Path, remote: Path, marker: Path) -> dict[str, Any]:
    code = f"open({str(marker)!r}, 'w').close()"
    return {
        "pav_run_id": "r1",
        "run_tests_payload_dir": str(remote / "payload"),
        "run_tests_run_dir": str(remote / "runs" / "r1"),
        "run_tests_mpi_bin_dir": str(remote / "mpi" / "bin"),
        "run_tests_python": sys.executable,
        "run_tests_launches": [
            {"test": "t", "timeout_s": 60, "argv_by_host": {"localhost": ["{python}", "-c", code]}},
        ],
    }


@pytest.mark.parametrize("tampered", ["payload", "runs", "runs/r1", "mpi/bin"])
def test_a_launch_refuses_a_folder_others_can_write_since_configure(
    tmp_path: Path, deployed: Path, tampered: str
) -> None:
    """Checked again right before each launch: configure's check was minutes ago. Before, the launch ran
    with the payload on root's PYTHONPATH whatever had become of the folder since."""
    remote = deployed_in(tmp_path, deployed)
    for folder in ("runs/r1", "mpi/bin"):
        (remote / folder).mkdir(parents=True, mode=0o755)
    (remote / tampered).chmod(0o777)
    marker = tmp_path / "RAN"
    run = play(tmp_path, "run_tests", "main", launch_vars(tmp_path, remote, marker))
    assert run.returncode != 0, run.stdout[-3000:]
    said = f"pav: unsafe folder: {remote / tampered} is owned by root (uid 0), mode 777;"
    assert said in run.stdout, run.stdout[-3000:]
    assert not marker.exists()


def test_a_launch_runs_in_folders_it_made_and_checked(tmp_path: Path, deployed: Path) -> None:
    remote = deployed_in(tmp_path, deployed)
    marker = tmp_path / "RAN"
    run = play(tmp_path, "run_tests", "main", launch_vars(tmp_path, remote, marker))
    assert run.returncode == 0, run.stdout[-3000:]
    assert marker.exists()
    rc = remote / "runs" / "r1" / "results" / "t" / "launcher.rc"
    assert rc.read_text() == "0\n"
    assert oct((remote / "runs").stat().st_mode & 0o777) == "0o755"


def test_the_facts_read_imports_nothing_from_the_folder_it_is_started_in(
    tmp_path: Path, deployed: Path
) -> None:
    """Issue 62: `python -m pav_payload host-facts` put the folder Ansible started it in first on sys.path
    (no -P; and PYTHONSAFEPATH is ignored before Python 3.11): a pav_payload planted there ran as root."""
    dest = deployed_in(tmp_path, deployed) / "payload"
    marker = tmp_path / "PWNED"
    (tmp_path / "pav_payload").mkdir()
    for name in ("__init__.py", "__main__.py"):
        (tmp_path / "pav_payload" / name).write_text(f"open({str(marker)!r}, 'w').close()\n")
    role_vars = {"torch_payload_dest": str(dest), "torch_payload_python": sys.executable}
    run = play(tmp_path, "torch_payload", "facts", role_vars)
    assert run.returncode == 0, run.stdout[-3000:]
    assert not marker.exists()
    assert did(run, "Record the host's torch and GPUs") == "ok"
