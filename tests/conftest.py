"""Shared helpers: run the real CLI in a subprocess, as a user would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class CliRun:
    rc: int
    stdout: str
    stderr: str

    def results(self, run_dir: Path) -> dict[str, Any]:
        return json.loads((run_dir / "results.json").read_text())


def run_cli(
    *args: str, env: dict[str, str] | None = None, python: str | None = None, timeout: int = 600
) -> CliRun:
    proc = subprocess.run(
        [python or sys.executable, "-m", "pav", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=timeout,
        cwd=ROOT,
        check=False,
    )
    return CliRun(proc.returncode, proc.stdout, proc.stderr)


def assert_one_line_error(run: CliRun, *needles: str) -> None:
    """Bad input: exit 2, no traceback, and an error line naming the problem."""
    assert run.rc == 2, (run.stdout, run.stderr)
    assert "Traceback" not in run.stderr + run.stdout
    errors = [ln for ln in run.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, run.stderr
    for needle in needles:
        assert needle in errors[0], errors[0]


@pytest.fixture
def cli():
    return run_cli
