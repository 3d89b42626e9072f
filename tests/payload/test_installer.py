"""The self-unpacking payload script (src/pav/payload_installer.py), run with the host's /bin/sh as the
torch_payload role runs it: it unpacks the package, then unpacks nothing while every file still matches; it
refuses a folder others own or can write, and removes what the payload does not ship (issue 47)."""

from __future__ import annotations

import os
import subprocess
import sys
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
    assert unpack(script, dest) == UNCHANGED
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
    assert run.stderr.startswith(f"pav: unsafe payload folder: {base} is owned by ")
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
    assert said.startswith(f"pav: unsafe payload folder: {dest} is owned by ") and "mode 777;" in said
