"""The sim hosts' cache of what Python compiles from zips (Ansible's module runs): compiled once, read back
after, and kept only in a folder no one else may write."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
import zipimport
from collections.abc import Iterator
from pathlib import Path
from types import CodeType

import pytest

from pav.simhosts import zipcache

SOURCE = "ANSWER = 6 * 7\n"


@pytest.fixture
def archive(tmp_path: Path) -> Path:
    path = tmp_path / "module.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("answer.py", SOURCE)
    return path


@pytest.fixture
def cache(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "cache"
    folder.mkdir(mode=0o700)
    own = zipcache.install(str(folder))
    try:
        yield folder
    finally:
        zipcache.uninstall(own)


def load(archive: Path) -> dict[str, object]:
    code = zipimport.zipimporter(str(archive)).get_code("answer")
    space: dict[str, object] = {}
    exec(code, space)
    return space


def entries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_a_source_is_compiled_once_and_read_back_after(archive: Path, cache: Path) -> None:
    assert load(archive)["ANSWER"] == 42
    [kept] = entries(cache)  # one file, no write left aside
    compiled: list[str] = []

    def refuse(pathname: str, source: bytes) -> CodeType:
        compiled.append(pathname)
        raise AssertionError("compiled again")

    # A later process: its own compile now fails the test, so the code must come from the cache (the fixture
    # gives zipimport its compile back).
    zipimport._compile_source = refuse  # type: ignore[attr-defined]
    zipcache.install(str(cache))
    assert load(archive)["ANSWER"] == 42
    assert compiled == [] and entries(cache) == [kept]


def test_a_folder_others_may_write_holds_nothing(archive: Path, tmp_path: Path) -> None:
    folder = tmp_path / "open"
    folder.mkdir()
    os.chmod(folder, 0o777)
    own = zipcache.install(str(folder))
    try:
        assert load(archive)["ANSWER"] == 42  # compiled as without the cache
        assert entries(folder) == []
    finally:
        zipcache.uninstall(own)


def test_uninstall_gives_zipimport_its_own_compile_back(tmp_path: Path) -> None:
    before = zipimport._compile_source  # type: ignore[attr-defined]
    own = zipcache.install(str(tmp_path))
    assert zipimport._compile_source is not before  # type: ignore[attr-defined]
    zipcache.uninstall(own)
    assert zipimport._compile_source is before  # type: ignore[attr-defined]


def test_the_suites_own_pythons_keep_what_they_compile_from_zips(archive: Path) -> None:
    """tests/pyhook: a Python this suite starts (as Ansible's local module runs are) fills the same cache."""
    folder = Path(os.environ["PAV_TEST_ZIPCACHE"])
    key = zipcache.entry_name(SOURCE.encode())
    (folder / key).unlink(missing_ok=True)
    code = f"import sys; sys.path.insert(0, {str(archive)!r}); import answer; print(answer.ANSWER)"
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert ran.stdout.strip() == "42", ran.stderr
    assert (folder / key).is_file()
