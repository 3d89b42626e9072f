"""host_tuning's and nccl_env's files through pav_files (plugins/modules/pav_files.py), as Ansible runs the
roles: each role's files in one module run (issue 65), written once, then nothing changed; in check mode a
changed file is named with its own diff and left as it is."""

from __future__ import annotations

import os
import sys
from getpass import getuser
from grp import getgrgid
from pathlib import Path

import pytest
import yaml

from pav.ansible_exec import PlaybookOutcome, run_playbook

pytestmark = pytest.mark.slow  # real ansible-playbook runs


def play(tmp_path: Path, name: str, check: bool = False, tasks: list | None = None) -> PlaybookOutcome:
    """Both roles (or `tasks`) on this machine, their files under tmp_path, through the driver's playbook
    runner."""
    out = tmp_path / "out"
    variables = {
        "host_tuning_limits_file": str(out / "limits.conf"),
        "host_tuning_sysctl_file": str(out / "sysctl.conf"),
        "host_tuning_manage_shm": False,
        "host_tuning_sysctl_apply": False,
        "nccl_env_file": str(out / "etc" / "pav" / "nccl.env"),
        "nccl_env_profile_script": str(out / "pav-nccl.sh"),
    }
    roles = [{"ansible.builtin.include_role": {"name": r}} for r in ("host_tuning", "nccl_env")]
    playbook = tmp_path / "play.yml"
    spec = {"name": "Files", "hosts": "all", "gather_facts": False, "vars": variables, "check_mode": check}
    playbook.write_text(yaml.safe_dump([{**spec, "diff": True, "tasks": tasks or roles}]))
    inventory = tmp_path / "hosts.yml"
    host = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"box": host}}}))
    out.mkdir(exist_ok=True)
    outcome = run_playbook("files", str(playbook), inventory, ["box"], tmp_path / name, {})
    assert outcome.rc == 0 and not outcome.failed_hosts, outcome
    return outcome


def test_each_roles_files_in_one_module_run_then_nothing_then_a_check_mode_diff(tmp_path: Path) -> None:
    out = tmp_path / "out"
    first = play(tmp_path, "first")
    tuning, env = (
        "host_tuning : Write the limits.d and sysctl.d files and the /dev/shm line in fstab",
        "nccl_env : Write the env file and profile script",
    )
    assert first.changes == {"box": [tuning, env]}  # one task (one module run) per role wrote everything
    assert first.facts["box"]["nccl_env_info"] == {"fabric": "socket"}  # set by the same module run
    written = ["limits.conf", "sysctl.conf", "etc/pav", "etc/pav/nccl.env", "pav-nccl.sh"]
    assert [d["path"] for d in first.diffs["box"]] == [str(out / w) for w in written]
    assert "*     soft  memlock  unlimited" in (out / "limits.conf").read_text()
    assert "kernel.numa_balancing = 0" in (out / "sysctl.conf").read_text()
    assert "NCCL_IB_DISABLE=1" in (out / "etc" / "pav" / "nccl.env").read_text()
    assert oct((out / "pav-nccl.sh").stat().st_mode & 0o777) == "0o644"
    assert oct((out / "etc" / "pav").stat().st_mode & 0o777) == "0o755"

    assert play(tmp_path, "second").changes == {}

    (out / "limits.conf").write_text("edited\n")
    (out / "pav-nccl.sh").chmod(0o600)
    checked = play(tmp_path, "check", check=True)
    assert checked.changes == {"box": [tuning, env]}
    assert [d["path"] for d in checked.diffs["box"]] == [str(out / "limits.conf"), str(out / "pav-nccl.sh")]
    assert "-edited" in checked.diffs["box"][0]["text"].splitlines()
    assert checked.diffs["box"][1]["text"] == f"{out / 'pav-nccl.sh'}: mode: 0600 -> 0644\n"
    assert (out / "limits.conf").read_text() == "edited\n"  # check mode wrote nothing
    assert oct((out / "pav-nccl.sh").stat().st_mode & 0o777) == "0o600"


def test_a_line_in_a_file_and_a_command_run_only_when_it_changed(tmp_path: Path) -> None:
    """host_tuning's fstab line and its remount (here a touch: this machine's /dev/shm is not the test's)
    ride in the files' module run: lineinfile's rule for the line, the command only after a change."""
    out, fstab, ran = tmp_path / "out", tmp_path / "out" / "fstab", tmp_path / "out" / "ran"
    out.mkdir()
    fstab.write_text("proc /proc proc defaults 0 0\ntmpfs /dev/shm tmpfs defaults 0 0\n# last, no newline")
    entry = {"path": str(fstab), "regexp": r"^\S+\s+/dev/shm\s", "line": "tmpfs /dev/shm tmpfs size=1g 0 0"}
    module = {
        "files": [{**entry, "mode": "0644"}],
        "on_change": [{"path": str(fstab), "argv": ["touch", str(ran)]}],
    }
    task = [
        {"name": "Line", "pav_files": {**module, "owner": getuser(), "group": getgrgid(os.getgid()).gr_name}}
    ]
    (tmp_path / "library").symlink_to(Path(__file__).parents[2] / "plugins" / "modules")  # beside the play
    first = play(tmp_path, "first", tasks=task)
    assert first.changes == {"box": ["Line"]} and ran.exists()
    assert fstab.read_text() == (
        "proc /proc proc defaults 0 0\ntmpfs /dev/shm tmpfs size=1g 0 0\n# last, no newline"
    )
    ran.unlink()
    assert play(tmp_path, "second", tasks=task).changes == {} and not ran.exists()
    fstab.write_text("tmpfs /dev/shm tmpfs size=2g 0 0\n")
    checked = play(tmp_path, "check", check=True, tasks=task)
    assert checked.changes == {"box": ["Line"]} and not ran.exists()  # check mode runs nothing
    assert "+tmpfs /dev/shm tmpfs size=1g 0 0" in checked.diffs["box"][0]["text"].splitlines()
    assert fstab.read_text() == "tmpfs /dev/shm tmpfs size=2g 0 0\n"


def test_a_block_between_markers_reads_as_blockinfile_writes_it(tmp_path: Path) -> None:
    """The mpi role's known_hosts and ssh config blocks ride in its files' run: blockinfile's rule, so the
    block an older configure wrote with blockinfile reads as unchanged, and the user's own lines stay."""
    out = tmp_path / "out"
    out.mkdir()
    ours, theirs = out / "ours", out / "theirs"  # pav_files' file, blockinfile's
    for path in (ours, theirs):
        path.write_text("Host own\n  User me\n# last, no newline")
        path.chmod(0o600)
    (tmp_path / "library").symlink_to(Path(__file__).parents[2] / "plugins" / "modules")
    owner = {"owner": getuser(), "group": getgrgid(os.getgid()).gr_name}
    marker = "# {mark} pav test block"

    def both(block: str) -> list[dict]:
        spec = {"marker": marker, "block": block, "mode": "0600"}
        return [
            {"name": "Blockinfile", "ansible.builtin.blockinfile": {"path": str(theirs), **spec}},
            {"name": "Block", "pav_files": {"files": [{"path": str(ours), **spec}], **owner}},
        ]

    assert play(tmp_path, "first", tasks=both("a\nb")).changes == {"box": ["Blockinfile", "Block"]}
    assert (
        ours.read_text()
        == theirs.read_text()
        == ("Host own\n  User me\n# last, no newline\n# BEGIN pav test block\na\nb\n# END pav test block\n")
    )
    assert play(tmp_path, "second", tasks=both("a\nb")).changes == {}
    for path in (ours, theirs):
        path.write_text(path.read_text() + "Host after\n")
    assert play(tmp_path, "third", tasks=both("c")).changes == {"box": ["Blockinfile", "Block"]}
    assert ours.read_text() == theirs.read_text()
    assert ours.read_text().endswith("# BEGIN pav test block\nc\n# END pav test block\nHost after\n")
    checked = play(tmp_path, "check", check=True, tasks=both("d")[1:])
    assert checked.changes == {"box": ["Block"]} and "+d" in checked.diffs["box"][0]["text"].splitlines()
    assert ours.read_text() == theirs.read_text()  # check mode wrote nothing
    play(tmp_path, "empty", tasks=both(""))
    assert ours.read_text() == theirs.read_text() == "Host own\n  User me\n# last, no newline\nHost after\n"
