"""The self-unpacking payload script (src/pav/payload_installer.py), run with the host's /bin/sh as the
torch_payload role runs it: it unpacks the package, then unpacks nothing while every file still matches; it
refuses a folder others own or can write (issue 47), makes each missing folder with a plain mkdir and checks
it after, and replaces the payload whole from a fresh private folder (issue 62).

The attacks are re-tried as a local user (nobody) would: a folder made first in a sticky folder, or made in
the window between the walk and the mkdir (a `mkdir` on PATH that lets the attacker in first, every time)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pav.payload_installer import UNCHANGED, write_installer
from tests.conftest import PAYLOAD


def unpack(script: Path, dest: Path) -> str:
    run = subprocess.run(["/bin/sh", str(script), str(dest)], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr
    return run.stdout.strip()


def package_files(root: Path) -> dict[str, bytes]:
    """The pav_payload package's files under root, by path, as Python reads them."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in (root / "pav_payload").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    }


def test_unpacks_the_package_then_reports_it_unchanged(tmp_path: Path) -> None:
    script = write_installer(tmp_path / "payload.sh", PAYLOAD / "pav_payload")
    dest = tmp_path / "host" / "payload"
    assert unpack(script, dest) == "unpacked"
    assert package_files(dest) == package_files(PAYLOAD)
    source = PAYLOAD / "pav_payload" / "__init__.py"
    # Python trusts a cached .pyc by its source's mtime: an unpacked file keeps its source's.
    assert int((dest / "pav_payload" / "__init__.py").stat().st_mtime) == int(source.stat().st_mtime)
    assert unpack(script, dest) == UNCHANGED


def test_a_changed_or_missing_file_is_unpacked_again(tmp_path: Path) -> None:
    script = write_installer(tmp_path / "payload.sh", PAYLOAD / "pav_payload")
    dest = tmp_path / "payload"
    unpack(script, dest)
    (dest / "pav_payload" / "__init__.py").write_text("# edited on the host\n")
    assert unpack(script, dest) == "unpacked"
    assert package_files(dest) == package_files(PAYLOAD)
    next(p for p in (dest / "pav_payload").rglob("*.py")).unlink()
    assert unpack(script, dest) == "unpacked"
    assert package_files(dest) == package_files(PAYLOAD)


def test_starts_a_job_in_the_background_once_unpacked_or_unchanged(tmp_path: Path) -> None:
    """The facts read's start rides on the installer's run (issue 65): after the DIRs, `-- JOB LIMIT ARGV`
    runs ARGV from / in the background, its output and exit code in JOB's files, whether the payload was
    unpacked or already in place."""
    script = write_installer(tmp_path / "payload.sh", PAYLOAD / "pav_payload")
    dest = tmp_path / "payload"
    job = dest / ".async" / "facts"
    argv = ["sh", "-c", 'pwd; echo "said $1" >&2; exit 3', "sh", "it"]
    for said in ("unpacked", UNCHANGED):
        command = ["/bin/sh", str(script), str(dest), str(dest / ".async"), "--", str(job), "30", *argv]
        run = subprocess.run(command, capture_output=True, text=True, check=False)
        assert (run.returncode, run.stdout.strip()) == (0, said), run.stderr
        rc = Path(f"{job}.rc")
        for _ in range(600):  # a wait for the job's last write, not a timing: it ends at once
            if rc.exists():
                break
            time.sleep(0.05)
        assert rc.read_text() == "3\n"
        assert Path(f"{job}.out").read_text() == "/\n" and Path(f"{job}.err").read_text() == "said it\n"
        assert Path(f"{job}.pid").read_text().strip().isdigit()
        rc.unlink()


def run_installer(script: Path, dest: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["/bin/sh", str(script), str(dest)], capture_output=True, text=True, check=False)


def test_a_planted_sitecustomize_never_runs(tmp_path: Path) -> None:
    """Issue 47: a file the payload does not ship, in the folder every launch puts on PYTHONPATH as root,
    is removed before the launch can import it (it ran 7 times as uid 0 before)."""
    script = write_installer(tmp_path / "payload.sh", PAYLOAD / "pav_payload")
    dest = tmp_path / "host" / "payload"
    unpack(script, dest)
    marker = tmp_path / "PWNED"
    (dest / "sitecustomize.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    (dest / "pav_payload" / "extra.py").write_text("")
    assert unpack(script, dest) == "unpacked"  # a fresh folder, moved into place
    assert not (dest / "sitecustomize.py").exists() and not (dest / "pav_payload" / "extra.py").exists()
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(dest), "PYTHONSAFEPATH": "1"}
    subprocess.run([sys.executable, "-c", "import pav_payload"], env=env, check=True, cwd=dest)
    assert not marker.exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root (CI runs as root)")
def test_a_folder_someone_else_owns_is_refused_naming_it(tmp_path: Path) -> None:
    script = write_installer(tmp_path / "payload.sh", PAYLOAD / "pav_payload")
    base = tmp_path / "var-tmp-pav"
    (base / "payload").mkdir(parents=True)
    (base / "payload" / "sitecustomize.py").write_text("raise SystemExit('planted')\n")
    os.chown(base, 65534, 65534)  # made by a local user (nobody) before the tool's first run
    run = run_installer(script, base / "payload")
    assert run.returncode == 3 and run.stdout == ""
    assert run.stderr.startswith(f"pav: unsafe folder: {base} is owned by ")
    assert "(uid 65534), mode 755;" in run.stderr and "set pav_remote_dir" in run.stderr
    assert (base / "payload" / "sitecustomize.py").exists()  # refused, not cleaned: nothing was used


@pytest.mark.parametrize("mode", [0o777, 0o775, 0o1777])
def test_a_folder_others_can_write_is_refused(tmp_path: Path, mode: int) -> None:
    script = write_installer(tmp_path / "payload.sh", PAYLOAD / "pav_payload")
    dest = tmp_path / "payload"
    dest.mkdir()
    dest.chmod(mode)
    run = run_installer(script, dest)
    assert run.returncode == 3 and f"{dest} is owned by " in run.stderr


def test_a_root_owned_sticky_folder_on_the_way_is_fine(tmp_path: Path) -> None:
    """/var/tmp and /tmp are 1777 and root's: others cannot rename or remove what is made in them."""
    if os.geteuid() != 0:
        pytest.skip("the sticky folder must be root's")
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    script = write_installer(tmp_path / "payload.sh", PAYLOAD / "pav_payload")
    assert unpack(script, shared / "pav" / "payload") == "unpacked"


def test_configure_names_the_refusal_not_ansibles_return_code(tmp_path: Path) -> None:
    """The task's failure as the driver reports it: the script's own line, not "non-zero return code"."""
    from pav.ansible_exec import _message

    dest = tmp_path / "payload"
    dest.mkdir(mode=0o777)
    dest.chmod(0o777)
    run = run_installer(write_installer(tmp_path / "payload.sh", PAYLOAD / "pav_payload"), dest)
    said = _message({"msg": "non-zero return code", "rc": run.returncode, "stderr": run.stderr})
    assert said.startswith(f"pav: unsafe folder: {dest} is owned by ") and "mode 777;" in said


NOBODY = 65534
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="another user's folders need root (CI runs as root)")


def planted(folder: Path, marker: Path) -> None:
    """What the attacker leaves where the payload will go: code that records that it ran."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(f"open({str(marker)!r}, 'w').close()\n")


def imports_cleanly(dest: Path, marker: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(dest), "PYTHONSAFEPATH": "1"}
    subprocess.run([sys.executable, "-c", "import pav_payload"], env=env, check=True, cwd="/")
    assert not marker.exists()


@as_root
def test_a_folder_made_by_another_user_in_the_window_before_mkdir_is_refused(
    tmp_path: Path, sticky: Path
) -> None:
    """Issue 62, reproduced: the attacker makes the folder between the installer's walk and its mkdir (here
    every time: the `mkdir` found first on PATH makes it as nobody, then runs the real one). mkdir -p kept
    the attacker's folder and root unpacked into it; a plain mkdir fails on it and the check after it refuses
    it, naming it, its owner and mode."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "mkdir").write_text(
        "#!/bin/sh\nfor last; do :; done\n"
        f"setpriv --reuid={NOBODY} --regid={NOBODY} --clear-groups /bin/mkdir -p -m 0777 -- "
        '"$last" || true\n'
        'exec /bin/mkdir "$@"\n'
    )
    (fake / "mkdir").chmod(0o755)
    script = write_installer(tmp_path / "payload.sh", PAYLOAD / "pav_payload")
    script.chmod(0o644)
    dest = sticky / "pav" / "payload"
    env = {"PATH": f"{fake}:/usr/bin:/bin"}
    run = subprocess.run(
        ["/bin/sh", str(script), str(dest)], capture_output=True, text=True, env=env, check=False
    )
    assert run.returncode == 3, run.stdout + run.stderr
    said = f"pav: unsafe folder: {sticky / 'pav'} is owned by nobody (uid {NOBODY}), mode 777;"
    assert run.stderr.startswith(said)
    assert not (dest / "pav_payload").exists()


@as_root
@pytest.mark.parametrize("part", ["pav", "pav/runs", "pav/runs/RUN", "pav/runs/RUN/payload"])
def test_a_folder_another_user_made_first_at_any_step_is_refused(
    sticky: Path, tmp_path: Path, part: str
) -> None:
    """A check-mode run's payload (REMOTE/runs/RUN/payload) with one folder of the way made first by
    someone else, the attacker's code in it: refused naming that folder, and nothing planted runs."""
    marker = tmp_path / "PWNED"
    top = sticky / "pav"
    target = sticky / part
    dest = sticky / "pav" / "runs" / "RUN" / "payload"
    if part != "pav":
        top.mkdir()
        target.parent.mkdir(parents=True, exist_ok=True)
    planted(target, marker)
    for folder in (target, *(p for p in target.rglob("*"))):
        os.chown(folder, NOBODY, NOBODY)
    script = write_installer(tmp_path / "payload.sh", PAYLOAD / "pav_payload")
    run = run_installer(script, dest)
    assert run.returncode == 3, run.stdout + run.stderr
    assert run.stderr.startswith(f"pav: unsafe folder: {target} is owned by nobody (uid {NOBODY}), mode 755;")
    assert not (dest / "pav_payload").exists() and not marker.exists()


@as_root
def test_a_user_who_cannot_make_the_folder_is_told_to_set_pav_remote_dir(sticky: Path) -> None:
    """A non-root SSH user and the default /var/lib/pav: one line naming the folder and the setting, not
    mkdir's complaint."""
    root_only = sticky / "lib"
    root_only.mkdir(mode=0o755)
    script = sticky / "payload.sh"
    write_installer(script, PAYLOAD / "pav_payload").chmod(0o644)
    argv = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "/bin/sh", str(script)]
    run = subprocess.run(
        [*argv, str(root_only / "pav" / "payload")], capture_output=True, text=True, check=False
    )
    assert (run.returncode, run.stdout) == (3, ""), run.stderr
    assert run.stderr == (
        f"pav: cannot make folder {root_only / 'pav'} as nobody (uid {NOBODY}); "
        "set pav_remote_dir to a folder this user may make or owns\n"
    )


def test_each_folder_it_makes_is_private_to_root_and_made_whole(tmp_path: Path) -> None:
    """Made folders are 0755 and this user's whatever the umask; the payload replaced, not patched, so a
    file left in the old one is gone, as is the fresh folder it was unpacked in."""
    script = write_installer(tmp_path / "payload.sh", PAYLOAD / "pav_payload")
    base = tmp_path / "lib"
    dest = base / "pav" / "runs" / "RUN" / "payload"
    base.mkdir(mode=0o755)
    old = os.umask(0)
    try:
        assert unpack(script, dest) == "unpacked"
    finally:
        os.umask(old)
    for folder in (base / "pav", base / "pav" / "runs", dest.parent, dest):
        info = folder.lstat()
        assert (info.st_uid, oct(info.st_mode & 0o7777)) == (os.geteuid(), "0o755"), folder
    assert sorted(p.name for p in dest.parent.iterdir()) == ["payload"]
