"""Two fresh sim hosts, provisioned once for the checks that need hosts no run has touched (issue 62):

- root through the tool's folder, tried as a local user (nobody) would: the work folder made first, with the
  attacker's sitecustomize.py where the payload goes. The run refuses before anything of it runs, the
  operator reads the installer's own line (it read "Shared connection to ... closed." before);
- the MPI cluster key: configure trusts the env's cluster key in the login user's authorized_keys
  (roles/mpi) so that mpirun can start its daemons; after the run's teardown nothing of it is left on either
  host, and the SSH access the tool itself came in by stays. That run is also the first on host 1 after the
  refusal: the default folder is made by root, root's and 0755 at each step, where no one else can make it
  first.

One provision for both (and no run of their own for the default folder): each was a cluster of its own, ~40 s
of the suite's wall time apiece (docs/benchmarks.md). The hosts are tests/faults/conftest.py's fresh_hosts,
which test_check_mode uses first, on host 0 only. The tests run in file order; the refusal needs a host no
run has touched."""

from __future__ import annotations

import pytest

from tests.docs_quotes import assert_documented
from tests.faults.conftest import Fresh, error_lines, ssh

pytestmark = pytest.mark.slow

PLANTED = "/var/tmp/pav-planted"


def test_a_work_folder_a_local_user_made_first_is_refused_and_nothing_planted_runs(
    fresh_hosts: Fresh,
) -> None:
    box, address = fresh_hosts.box, fresh_hosts.addresses[1]
    plant = (
        f"mkdir -p {PLANTED}/payload && chown -R nobody: {PLANTED} && "
        f"echo \"open('/root/PWNED', 'w').close()\" > {PLANTED}/payload/sitecustomize.py"
    )
    assert ssh(box, address, plant).returncode == 0
    run = box.cli(
        "--inventory", str(fresh_hosts.inventory_of(1)),
        "--stages", "configure,validate,collect,report,teardown",
        "--tests", "torch_gloo_allreduce", "-e", f"pav_remote_dir={PLANTED}",
    )  # fmt: skip
    assert run.rc == 2, run.stdout + run.stderr
    [line] = error_lines(run)
    assert f"pav: unsafe folder: {PLANTED} is owned by nobody (uid 65534), mode 755;" in line, line
    assert "Shared connection" not in line
    assert_documented(line)
    assert ssh(box, address, "test ! -e /root/PWNED && test ! -e /var/lib/pav").returncode == 0
    assert ssh(box, address, f"rm -rf {PLANTED}").returncode == 0


def test_the_mpi_cluster_key_is_gone_after_teardown_and_the_default_folder_is_roots(
    fresh_hosts: Fresh,
) -> None:
    box = fresh_hosts.box
    run = box.cli(
        "--inventory", str(fresh_hosts.inventory), "--apply-tuning", "--tests", "mpi_allreduce",
        "--stages", "configure,validate,collect,report,teardown", run="mpi",
    )  # fmt: skip
    assert run.rc == 0, run.stdout + run.stderr
    hosts = box.results("mpi")["hosts"]
    assert hosts[next(iter(hosts))]["facts"]["mpi"]["ssh_setup"] is True
    for address in fresh_hosts.addresses:
        left = ssh(
            box, address,
            "grep -c ' pav-cluster$' ~/.ssh/authorized_keys; grep -c 'pav mpi cluster' ~/.ssh/known_hosts "
            "~/.ssh/config; ls ~/.ssh",
        )  # fmt: skip
        lines = left.stdout.splitlines()  # grep -c: 0 found, in each file
        assert lines[:3] == ["0", "/root/.ssh/known_hosts:0", "/root/.ssh/config:0"], left.stdout
        assert "pav_cluster_ed25519" not in left.stdout and "authorized_keys" in left.stdout
    # The default folder on the host where a planted one was refused: made by root with a plain mkdir.
    # (runs/, empty once the run's teardown removed its folder, goes with it.)
    made = ssh(box, fresh_hosts.addresses[1], "stat -c '%U %a %F' /var/lib/pav /var/lib/pav/payload")
    assert made.stdout.splitlines() == ["root 755 directory"] * 2, made.stdout + made.stderr
    assert ssh(box, fresh_hosts.addresses[1], "test ! -e /root/PWNED").returncode == 0
