"""The MPI cluster key leaves a static host with the last run on it (issue 62): configure trusts the env's
cluster key in the login user's authorized_keys (roles/mpi) so that mpirun can start its daemons; after the
run's teardown nothing of it is left on either host, and the SSH access the tool itself came in by stays."""

from __future__ import annotations

import pytest
import yaml

from tests.faults.conftest import Sandbox, ssh

pytestmark = pytest.mark.slow


def test_the_mpi_cluster_key_is_gone_from_the_hosts_after_teardown(sim_deps: None, sandbox: Sandbox) -> None:
    up = sandbox.cli("--env", "sim", "--hosts", "2", "--stages", "provision", "--keep", run="provision")
    assert up.rc == 0, up.stdout + up.stderr
    inventory = sandbox.run_dir("provision") / "inventory" / "hosts.yml"
    addresses = [h["ansible_host"] for h in yaml.safe_load(inventory.read_text())["all"]["hosts"].values()]
    run = sandbox.cli(
        "--inventory", str(inventory), "--apply-tuning", "--tests", "mpi_allreduce",
        "--stages", "configure,validate,collect,report,teardown",
    )  # fmt: skip
    assert run.rc == 0, run.stdout + run.stderr
    assert (
        sandbox.results()["hosts"][next(iter(sandbox.results()["hosts"]))]["facts"]["mpi"]["ssh_setup"]
        is True
    )
    for address in addresses:
        left = ssh(
            sandbox, address,
            "grep -c ' pav-cluster$' ~/.ssh/authorized_keys; grep -c 'pav mpi cluster' ~/.ssh/known_hosts "
            "~/.ssh/config; ls ~/.ssh",
        )  # fmt: skip
        lines = left.stdout.splitlines()  # grep -c: 0 found, in each file
        assert lines[:3] == ["0", "/root/.ssh/known_hosts:0", "/root/.ssh/config:0"], left.stdout
        assert "pav_cluster_ed25519" not in left.stdout and "authorized_keys" in left.stdout
    kept = sandbox.results("provision")["run_id"]
    down = sandbox.cli("--env", "sim", "--stages", "teardown", "--reuse", kept, run="down")
    assert down.rc == 0, down.stdout + down.stderr
    assert sandbox.left(("provision", "run", "down")) == []
