"""External programs (pav.tools): found on PATH, else beside the running interpreter (a venv used without
activation), else one line naming the program and the fix."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from pav.errors import PavError
from pav.tools import find_tool, require_tool


def test_a_program_on_path_is_found_there(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    program = tmp_path / "pav-test-tool"
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}")
    assert find_tool("pav-test-tool") == str(program)
    assert require_tool("pav-test-tool", "unused") == str(program)


def test_a_program_beside_the_interpreter_is_found_without_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The interpreter's own folder holds it (a venv's bin/): found though PATH is empty."""
    here = Path(sys.executable).parent
    beside = next(p for p in sorted(here.iterdir()) if p.is_file() and os.access(p, os.X_OK))
    monkeypatch.setenv("PATH", "")
    assert shutil.which(beside.name) is None
    assert find_tool(beside.name) == str(here / beside.name)


def test_a_missing_program_is_one_line_with_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "")
    assert find_tool("pav-no-such-tool") is None
    with pytest.raises(PavError) as exc:
        require_tool("pav-no-such-tool", "install it with apt-get install pav-no-such-tool")
    assert str(exc.value) == (
        "pav-no-such-tool not found on PATH; install it with apt-get install pav-no-such-tool"
    )
