"""A run dir on a full disk, or on a read-only one: a clear error before anything is provisioned (no
Terraform state, no namespace, no host)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import assert_one_line_error
from tests.faults.conftest import Sandbox


@pytest.fixture
def mounted(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    point = tmp_path / "mnt"
    point.mkdir()
    yield point
    subprocess.run(["umount", str(point)], check=False, capture_output=True)


def mount_tmpfs(point: Path, options: str) -> None:
    subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(point)], check=True)


def nothing_provisioned(sandbox: Sandbox) -> None:
    assert not sandbox.state.exists(), sorted(sandbox.state.rglob("*"))  # no Terraform state, no key
    assert sandbox.left() == []


def test_too_little_space(sim_deps: None, sandbox: Sandbox, mounted: Path) -> None:
    mount_tmpfs(mounted, "size=1m")
    run = sandbox.cli("--env", "sim", "--hosts", "2", run=mounted / "run")
    assert_one_line_error(
        run, f"run dir {mounted / 'run'} has 1 MiB free", "under the 64 MiB", "--run-dir", documented=True
    )
    nothing_provisioned(sandbox)


def test_full_disk(sim_deps: None, sandbox: Sandbox, mounted: Path) -> None:
    mount_tmpfs(mounted, "size=1m")
    (mounted / "run").mkdir()
    with (mounted / "filler").open("wb") as filler, pytest.raises(OSError):
        filler.write(b"x" * 2 * 1024 * 1024)
    run = sandbox.cli("--env", "sim", "--hosts", "2", run=mounted / "run")
    assert_one_line_error(run, f"run dir {mounted / 'run'}: its disk is full", "--run-dir", documented=True)
    nothing_provisioned(sandbox)


def test_read_only_run_dir(sim_deps: None, sandbox: Sandbox, mounted: Path) -> None:
    mount_tmpfs(mounted, "size=1m,ro")
    run = sandbox.cli("--env", "sim", "--hosts", "2", run=mounted / "run")
    assert_one_line_error(
        run, f"run dir {mounted / 'run'} is not writable", "Read-only", "--run-dir", documented=True
    )
    nothing_provisioned(sandbox)
