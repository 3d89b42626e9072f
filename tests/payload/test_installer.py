"""The self-unpacking payload script (src/pav/payload_installer.py), run with the host's /bin/sh as the
torch_payload role runs it: it unpacks the package, then unpacks nothing while every file still matches."""

from __future__ import annotations

import subprocess
from pathlib import Path

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
