"""The mpi role on the shared Slurm sim cluster (tests/sim/conftest.py), as configure applied it: real sshd,
real ansible-playbook, real mpirun.

The role installs nothing here (openmpi-bin and libopenmpi-dev are on this machine, and the hosts see its
filesystem through an overlay), sets up host-to-host SSH with pinned host keys, writes a hostfile, builds
pav_mpi_allreduce and the pav-mpirun launcher. The tests then launch ranks over both hosts from host 0.
They run before test_slurm (file order), which tears the cluster down. Needs root (namespaces).
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.sim.conftest import SlurmCluster

pytestmark = pytest.mark.slow

SLOTS = 2  # mpi_slots_per_host of the sim env
REMOTE_DIR = "/var/lib/pav"  # pav_remote_dir of the sim env
BIN_DIR = f"{REMOTE_DIR}/mpi/bin"
REAL_SSH_DIR = Path("/root/.ssh")
SSH_FILES = ("pav_cluster_ed25519", "known_hosts", "config", "authorized_keys")


def _snapshot_real_ssh() -> dict[str, str | None]:
    """Contents (sha256) of the files the role writes, as this machine's own /root/.ssh holds them."""
    snap = {}
    for name in SSH_FILES:
        path = REAL_SSH_DIR / name
        snap[name] = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None
    return snap


# Taken when this module is imported, before any configure of the session's cluster ran.
BEFORE = _snapshot_real_ssh()


@dataclass
class Cluster:
    shared: SlurmCluster
    first: dict[str, Any]  # results.json of the configure that set the cluster up
    second: dict[str, Any]  # and of the configure after it
    hosts: list[dict[str, Any]]  # each host's sim record: name, ip, upper (its root's overlay layer)

    @property
    def state(self) -> Path:
        return self.shared.state

    @property
    def world(self) -> int:
        return len(self.hosts) * SLOTS

    def ssh(self, host: dict[str, Any], command: str, timeout: int = 60) -> subprocess.CompletedProcess[str]:
        return self.shared.ssh(host["ip"], command, timeout)


@pytest.fixture(scope="module")
def cluster(slurm_cluster: SlurmCluster) -> Cluster:
    first, second = slurm_cluster.configured()
    records = slurm_cluster.state / "sim" / "hosts"
    hosts = [json.loads((records / f"{name}.json").read_text()) for name in first["hosts"]]
    return Cluster(slurm_cluster, first, second, hosts)


def _mpi_changes(results: dict[str, Any]) -> dict[str, list[str]]:
    return {name: [c for c in h["changes"] if c.startswith("mpi :")] for name, h in results["hosts"].items()}


def test_role_changes_each_host_then_nothing(cluster: Cluster) -> None:
    first, second = _mpi_changes(cluster.first), _mpi_changes(cluster.second)
    assert set(first) == set(second) == {h["name"] for h in cluster.hosts}
    assert all(first.values()), first
    assert not any(second.values()), second
    for name, host in cluster.second["hosts"].items():
        counts = host["ansible"]["configure"]
        assert counts.get("failed", 0) == 0 and counts.get("unreachable", 0) == 0, (name, counts)


# What the role runs on the controller alone: no module run on the host.
CONTROLLER_ACTIONS = {
    "ansible.builtin.set_fact",
    "ansible.builtin.validate_argument_spec",
    "ansible.builtin.include_tasks",
}


def test_role_reaches_each_host_in_four_module_runs_and_records_no_private_key(cluster: Cluster) -> None:
    """Issue 65: each module run on a host costs the controller CPU and the host a round trip. With MPI in
    place the role's are the probe, the files, the private key's copy and the build (16 before: setup, stat,
    shell, command, file, copy, lineinfile, slurp, two blockinfile, script, copy, shell, file, two template).
    The private key travels as a file copy, never as module arguments, which the run dir records."""
    key = (cluster.state / "cluster-ssh" / "pav_cluster_ed25519").read_text().splitlines()
    body = [line for line in key if len(line) >= 16 and not line.startswith("-----")]
    assert body
    for run in ("r1", "r2"):
        run_dir = cluster.shared.base / run
        on_host: dict[str, list[str]] = {h["name"]: [] for h in cluster.hosts}
        for path in (run_dir / "ansible" / "configure").glob("artifacts/*/job_events/*.json"):
            event = json.loads(path.read_text())
            data = event["event_data"]
            ran = event["event"] in ("runner_on_ok", "runner_on_failed") and data.get("role") == "mpi"
            if not ran or data["resolved_action"] in CONTROLLER_ACTIONS:
                continue
            if (data["res"].get("_ansible_delegated_vars") or {}).get("ansible_host") != "localhost":
                on_host[data["host"]].append(data["task"])
        assert all(len(tasks) == 4 for tasks in on_host.values()), (run, on_host)
        leaked = [
            p
            for p in run_dir.rglob("*")
            if p.is_file() and any(b in p.read_text(errors="replace") for b in body)
        ]
        assert leaked == [], leaked


def test_mpi_info(cluster: Cluster) -> None:
    for name, host in cluster.first["hosts"].items():
        info = host["facts"]["mpi"]
        assert info["flavor"] == "openmpi", name
        assert re.fullmatch(r"\d+\.\d+(\.\d+)?\S*", info["version"]), info
        assert info["mpirun"] == "/usr/bin/mpirun"
        assert info["launcher"] == f"{BIN_DIR}/pav-mpirun"
        assert info["program"] == f"{BIN_DIR}/pav_mpi_allreduce"
        assert info["hostfile"] == f"{REMOTE_DIR}/mpi/hostfile"
        assert info["if_include"] == "eth0"
        assert info["hosts"] == [h["ip"] for h in cluster.hosts]
        assert info["slots_total"] == cluster.world


def test_hostfile_and_ssh_between_hosts(cluster: Cluster) -> None:
    h0 = cluster.hosts[0]
    hostfile = cluster.ssh(h0, f"cat {REMOTE_DIR}/mpi/hostfile")
    assert hostfile.returncode == 0, hostfile.stderr
    entries = [ln for ln in hostfile.stdout.splitlines() if ln and not ln.startswith("#")]
    assert entries == [f"{h['ip']} slots={SLOTS}" for h in cluster.hosts]
    config = cluster.ssh(h0, "cat ~/.ssh/config").stdout
    assert "StrictHostKeyChecking yes" in config and "StrictHostKeyChecking no" not in config
    # Host keys are pinned: from host 0, ssh reaches every host by address and by inventory name, no prompt.
    targets = [t for h in cluster.hosts for t in (h["ip"], h["name"])]
    loop = f"for t in {' '.join(targets)}; do ssh -o BatchMode=yes $t cat /etc/pav-sim-host; done"
    hops = cluster.ssh(h0, loop)
    assert hops.returncode == 0, hops.stdout + hops.stderr
    assert hops.stdout.split() == [h["name"] for h in cluster.hosts for _ in range(2)]


def test_allreduce_over_every_host(cluster: Cluster) -> None:
    out = "/tmp/pav-mpi-test"
    # As the lent GPU machines' image sets it (issue 46): pav-mpirun still starts the ranks over SSH.
    launch = cluster.ssh(
        cluster.hosts[0],
        f"OMPI_MCA_plm=isolated {BIN_DIR}/pav-mpirun -np {cluster.world} {BIN_DIR}/pav_mpi_allreduce "
        f"--out {out} --test-id mpi_allreduce",
        timeout=120,
    )
    assert launch.returncode == 0, launch.stdout + launch.stderr
    report = json.loads(cluster.ssh(cluster.hosts[0], f"cat {out}/mpi_allreduce.rank0.json").stdout)
    assert report["schema_version"] == 1 and report["kind"] == "mpi" and report["rank"] == 0
    assert report["test_id"] == "mpi_allreduce"
    assert report["status"] == "pass", report
    assert report["world_size"] == cluster.world
    assert report["hostname"] == cluster.hosts[0]["name"]
    metrics = report["metrics"]
    assert metrics["world_size"] == cluster.world
    assert metrics["wrong_total"] == 0
    assert metrics["count"] == 1 << 20
    assert metrics["allreduce_time_us_median"] > 0
    assert len(metrics["hosts"]) == cluster.world
    assert set(metrics["hosts"]) == {h["name"] for h in cluster.hosts}


def test_allreduce_reports_wrong_results(cluster: Cluster) -> None:
    """A rank on the last host contributes a wrong element 0: every rank sees it in every iteration."""
    world, iters = cluster.world, 3
    launch = cluster.ssh(
        cluster.hosts[0],
        f"cd /tmp && {BIN_DIR}/pav-mpirun -np {world} pav_mpi_allreduce --out results/bad --test-id bad "
        f"--count 1000 --iters {iters} --inject-wrong {world - 1}",
        timeout=120,
    )
    assert launch.returncode != 0, launch.stdout + launch.stderr
    report = json.loads(cluster.ssh(cluster.hosts[0], "cat /tmp/results/bad/bad.rank0.json").stdout)
    assert report["status"] == "fail"
    assert report["metrics"]["wrong_total"] == world * iters
    assert "wrong elements" in report["reason"]


def test_ssh_files_land_in_hosts_not_on_this_machine(cluster: Cluster) -> None:
    public = (cluster.state / "cluster-ssh" / "pav_cluster_ed25519.pub").read_text().strip()
    for h in cluster.hosts:
        ssh_dir = Path(h["upper"]) / "root" / ".ssh"
        key = ssh_dir / "pav_cluster_ed25519"
        assert key.is_file() and key.stat().st_mode & 0o777 == 0o600
        known = (ssh_dir / "known_hosts").read_text()
        for other in cluster.hosts:
            assert f"{other['ip']} ssh-ed25519 " in known and f"{other['name']} ssh-ed25519 " in known
        assert public in (ssh_dir / "authorized_keys").read_text()
    assert _snapshot_real_ssh() == BEFORE
    assert not (REAL_SSH_DIR / "pav_cluster_ed25519").exists()
