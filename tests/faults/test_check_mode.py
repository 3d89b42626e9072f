"""Check mode leaves a host as it found it: a whole run with --check-tuning on hosts of one's own inventory
(configure, validate, collect, report, teardown) changes no byte of /etc, /root, /var/tmp or /var/lib/pav on
any of them outside the run's own folder. The payload, the MPI program and launcher go into that folder, no
package is installed, no SSH key or config is written, and teardown removes the folder."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from tests.faults.conftest import Fresh

pytestmark = pytest.mark.slow

WATCHED = ("etc", "root", "var/tmp", "var/lib/pav")


def listing(upper: Path, skip: Path) -> dict[str, str]:
    """What a sim host wrote under the watched folders: the entries of its overlay's upper layer, with type,
    mode and, for files, a checksum. A folder that the lower layer (this machine's /) has with the same mode
    is left out: overlayfs copies a folder up when something is written in it, and keeps the copy when that
    is removed again, with nothing changed in what the host sees."""
    found = {}
    for top in WATCHED:
        for path in sorted((upper / top).rglob("*")):
            if path == skip or skip in path.parents:
                continue
            stat = path.lstat()
            if path.is_symlink():
                what = f"link {path.readlink()}"
            elif path.is_file():
                what = f"file {hashlib.sha256(path.read_bytes()).hexdigest()}"
            elif path.is_dir():
                lower = Path("/") / path.relative_to(upper)
                if lower.is_dir() and not lower.is_symlink() and lower.lstat().st_mode == stat.st_mode:
                    continue
                what = "dir"
            else:
                what = "other"  # a whiteout: something the host deleted
            found[str(path.relative_to(upper))] = f"{what} {stat.st_mode:o}"
    return found


def test_a_check_mode_run_changes_nothing_outside_its_folder(fresh_hosts: Fresh) -> None:
    # Host 0 of the shared fresh hosts: the tool made it, no run configured it, so no key, payload or build of
    # an earlier run is there to hide a write that repeats it (host 1 is test_fresh_hosts', left untouched).
    box = fresh_hosts.box
    # The host's own writes land in its overlay's upper layer: anything the run changes shows there.
    host = fresh_hosts.host_dir(0)
    before = listing(host, Path("/nonexistent"))
    # mpi_allreduce (skipped on one host) is planned so that configure sets MPI up: it only does for tests
    # that start MPI programs.
    run = box.cli(
        "--inventory", str(fresh_hosts.inventory_of(0)), "--check-tuning",
        "--stages", "configure,validate,collect,report,teardown",
        "--tests", "torch_gloo_allreduce,mpi_allreduce", run="check",
    )  # fmt: skip
    assert run.rc == 0, run.stdout + run.stderr
    results = box.results("check")
    assert results["verdict"] == "PASS"
    [name] = results["hosts"]
    assert name == next(iter(box.results("provision")["hosts"])) and name.endswith("-0"), name
    own = host / "var" / "lib" / "pav" / "runs" / results["run_id"]
    after = listing(host, own)
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    assert changed == [], changed[:20]
    assert not own.exists()
    # MPI was set up all the same, inside the run's folder, with the login user's SSH left alone.
    mpi = results["hosts"][name]["facts"]["mpi"]
    assert mpi["launcher"] == f"/var/lib/pav/runs/{results['run_id']}/mpi/bin/pav-mpirun", mpi
    assert mpi["ssh_setup"] is False
    # Nothing of the run is left here either: fresh_hosts' teardown checks its run ("check") with the hosts'.
