"""`python -m pav` (pav.__main__): the command line's entry point, run in process; its exit status is the
command's exit code."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import pytest


def test_python_m_pav_exits_with_the_commands_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "no-runs"
    monkeypatch.setattr(
        sys, "argv", ["provision-and-validate", "history", "--env", "local", "--results-root", str(root)]
    )
    with pytest.raises(SystemExit) as exc:
        runpy.run_module("pav", run_name="__main__")
    assert exc.value.code == 2
    assert capsys.readouterr().err == (
        f"error: results root {root} is not a folder; pass --results-root or set PAV_RESULTS_ROOT\n"
    )
