"""The mpi role's probe (roles/mpi/templates/probe.sh.j2 after pav-safe-dir.sh's functions, as
tasks/probe.yml pastes them), rendered and run by sh on this machine: one shell run makes and checks the
role's folders and reads the MPI and its version; a host without mpirun or mpicc where nothing may be
installed gets one `pav: ` line naming the packages and the fix, and nothing is read past it."""

from __future__ import annotations

import os
import pwd
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from jinja2 import Environment, StrictUndefined

ROOT = Path(__file__).resolve().parents[2]
SAFE_DIR = ROOT / "roles" / "torch_payload" / "files" / "pav-safe-dir.sh"
PROBE = ROOT / "roles" / "mpi" / "templates" / "probe.sh.j2"
# What the probe and pav-safe-dir.sh run, besides the shell's builtins.
TOOLS = ("id", "stat", "mkdir", "getent", "cut", "awk", "ip", "head")


def probe(tmp_path: Path, path: str, **values: Any) -> subprocess.CompletedProcess[str]:
    env = Environment(undefined=StrictUndefined, keep_trailing_newline=True)
    env.filters.update(quote=shlex.quote, dirname=os.path.dirname, bool=lambda v: str(v).lower() == "true")
    mpi = tmp_path / "mpi"
    defaults = {
        "ansible_check_mode": False,
        "mpi_dir": str(mpi),
        "mpi_bin_dir": str(mpi / "bin"),
        "mpi_hostfile": str(mpi / "hostfile"),
        "mpi_host_address": "127.0.0.1",
        "mpi_hpcx_dir": str(tmp_path / "no-hpcx"),
        "mpi_hpcx_libs": "",
        "mpi_install_packages": True,
        "mpi_packages": ["openmpi-bin", "libopenmpi-dev"],
        "mpi_ssh_setup": False,
    }
    script = SAFE_DIR.read_text() + "\n" + env.from_string(PROBE.read_text()).render(defaults | values)
    return subprocess.run(
        ["/bin/sh", "-c", script], env={"PATH": path, "HOME": str(tmp_path)}, capture_output=True, text=True
    )


def without_mpi(tmp_path: Path) -> str:
    """A PATH with the probe's tools and no mpirun or mpicc."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in TOOLS:
        found = shutil.which(tool)
        assert found, tool
        (bin_dir / tool).symlink_to(found)
    return str(bin_dir)


@pytest.mark.skipif(not shutil.which("mpirun") or not shutil.which("mpicc"), reason="needs OpenMPI here")
def test_the_probe_makes_the_folders_once_and_reads_the_mpi(tmp_path: Path) -> None:
    first = probe(tmp_path, os.environ["PATH"])
    assert first.returncode == 0, first.stderr
    lines = first.stdout.splitlines()
    assert lines[:2] == [f"made {tmp_path / 'mpi'}", f"made {tmp_path / 'mpi' / 'bin'}"]
    read = dict(line.split("=", 1) for line in lines[2:])
    version = subprocess.run(["/usr/bin/mpirun", "--version"], capture_output=True, text=True, check=True)
    assert read["flavor"] == "openmpi" and read["version"] == version.stdout.splitlines()[0]
    me = pwd.getpwuid(os.geteuid())
    assert (read["user"], read["home"]) == (me.pw_name, me.pw_dir)
    assert oct((tmp_path / "mpi" / "bin").stat().st_mode & 0o777) == "0o755"
    again = probe(tmp_path, os.environ["PATH"])
    assert again.returncode == 0 and not any(ln.startswith("made ") for ln in again.stdout.splitlines())


def test_no_mpi_where_nothing_may_be_installed_is_one_line_naming_the_fix(tmp_path: Path) -> None:
    path = without_mpi(tmp_path)
    refused = probe(tmp_path, path, mpi_install_packages=False)
    assert refused.returncode == 3
    assert refused.stderr.splitlines() == [
        "pav: no MPI on this host (mpirun or mpicc missing) and tuning runs in check mode, which installs no "
        "packages: install openmpi-bin libopenmpi-dev, set pav_install_mpi: false, or pass --apply-tuning"
    ]
    assert "flavor=" not in refused.stdout
    allowed = probe(tmp_path, path)
    assert allowed.returncode == 0, allowed.stderr
    assert "flavor=none" in allowed.stdout.splitlines() and "version=" not in allowed.stdout
