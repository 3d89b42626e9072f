"""Every configure role, applied over SSH to sim hosts: its effect is inside each host's own root, never in
this machine's /etc, and a second configure changes nothing."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli
from tests.sim.conftest import SlurmCluster

pytestmark = pytest.mark.slow


@dataclass
class Kept:
    cluster: SlurmCluster
    first: dict[str, Any]
    second: dict[str, Any]

    def ssh(self, host: str, command: str) -> str:
        run = self.cluster.ssh(self.first["hosts"][host]["address"], command, timeout=30)
        run.check_returncode()
        return run.stdout


@pytest.fixture(scope="module")
def kept(slurm_cluster: SlurmCluster) -> Kept:
    """The shared Slurm sim cluster (tests/sim/conftest.py); test_slurm checks its teardown leaves nothing."""
    return Kept(slurm_cluster, *slurm_cluster.configured())


def test_second_configure_changes_nothing(kept: Kept) -> None:
    assert len(kept.second["hosts"]) == 2
    for name, host in kept.second["hosts"].items():
        counts = host["ansible"]["configure"]
        assert counts["ok"] > 0 and counts.get("changed", 0) == 0, (name, counts, host["changes"])
        assert host["changes"] == []
    assert any(h["changes"] for h in kept.first["hosts"].values())  # the first one did change things


def test_preflight_facts(kept: Kept) -> None:
    for name, host in kept.first["hosts"].items():
        facts = host["facts"]
        assert facts["hostname"] == name
        assert facts["gpu"]["count"] == 0 and facts["gpu"]["nvidia_smi"] == "absent"
        assert facts["rdma"]["hcas"] == []
        assert int(facts["shm"]["size_bytes"]) > 0
        mounts = {m["target"]: m["fstype"] for m in facts["mounts"]}
        # The host's own root (an overlay) and the folder every sim host shares, as an NFS export would be.
        assert mounts["/"] == "overlay" and "/srv/pav-shared" in mounts, mounts
        assert facts["torch"]["version"].startswith("2.")


def test_host_tuning_writes_inside_the_host_only(kept: Kept) -> None:
    for name in kept.first["hosts"]:
        limits = kept.ssh(name, "cat /etc/security/limits.d/90-pav-gpu.conf")
        assert "memlock  unlimited" in limits and "nofile   1048576" in limits
        assert "kernel.numa_balancing = 0" in kept.ssh(name, "cat /etc/sysctl.d/90-pav-gpu.conf")
        assert "size=1g" in kept.ssh(name, "grep /dev/shm /etc/fstab")
        assert kept.ssh(name, "df -B1 --output=size /dev/shm | tail -n 1").strip() == str(1024**3)
    assert not Path("/etc/security/limits.d/90-pav-gpu.conf").exists()
    assert not Path("/etc/sysctl.d/90-pav-gpu.conf").exists()


def test_nccl_env_file_and_profile(kept: Kept) -> None:
    for name in kept.first["hosts"]:
        env = kept.ssh(name, "cat /etc/pav/nccl.env")
        assert "NCCL_SOCKET_IFNAME=eth0" in env and "NCCL_IB_DISABLE=1" in env
        assert "NCCL_IB_HCA" not in env  # socket fabric: no HCA list
        assert kept.ssh(name, "bash -lc 'echo $NCCL_SOCKET_IFNAME'").strip() == "eth0"
    assert not Path("/etc/pav/nccl.env").exists()


def test_payload_deployed(kept: Kept) -> None:
    for name in kept.first["hosts"]:
        assert "__main__.py" in kept.ssh(name, "ls /var/lib/pav/payload/pav_payload")


def test_mpi_ready(kept: Kept) -> None:
    for name in kept.first["hosts"]:
        assert "pav-mpirun" in kept.ssh(name, "ls /var/lib/pav/mpi/bin")
        known = kept.ssh(name, "cat ~/.ssh/known_hosts")
        for other in kept.first["hosts"].values():
            assert other["address"] in known


def test_nccl_tests_skipped_without_gpu(kept: Kept) -> None:
    for host in kept.first["hosts"].values():
        assert host["facts"]["nccl_tests"]["available"] is False
        assert "no GPU" in host["facts"]["nccl_tests"]["reason"]


def test_slurm_up_with_every_node_idle(kept: Kept) -> None:
    host = next(iter(kept.first["hosts"]))
    nodes = dict(
        line.split() for line in kept.ssh(host, "sinfo --noheader --Node --format='%N %T'").splitlines()
    )
    assert nodes == {name: "idle" for name in kept.first["hosts"]}
    conf = kept.ssh(host, "cat /etc/slurm/slurm.conf")
    assert "ProctrackType=proctrack/linuxproc" in conf and "Gres" not in conf  # CPU-only sim hosts
    assert not Path("/etc/slurm/slurm.conf").exists()  # written inside the hosts only


def test_a_dry_run_without_provision_names_the_hosts_the_state_holds(slurm_cluster: SlurmCluster) -> None:
    run = run_cli("--env", "sim", "--stages", "teardown", "--dry-run", env=slurm_cluster.env)
    assert run.rc == 0, run.stderr
    hosts = run.stdout.split("hosts:\n")[1].split("tests")[0]
    assert f"2 host(s) in the env's state ({slurm_cluster.state})" in hosts
    assert len([ln for ln in hosts.splitlines() if ln.startswith("    sim-")]) == 2


SLURM_FOLDERS = "Create the state, spool and log folders"
SLURM_START = "Start munged, slurmctld (controller) and slurmd (directly)"


def slurm_events(run_dir: Path) -> dict[str, list[dict[str, Any]]]:
    """The slurm role's task results in a configure's job events (a whole task's, a loop item's), by task."""
    found: dict[str, list[dict[str, Any]]] = {}
    for path in sorted((run_dir / "ansible" / "configure").glob("artifacts/*/job_events/*.json")):
        event = json.loads(path.read_text())
        data = event.get("event_data", {})
        if data.get("role") == "slurm" and event.get("event") in ("runner_on_ok", "runner_item_on_ok"):
            found.setdefault(data["task"], []).append(event)
    return found


def test_slurm_folders_and_daemon_starts_are_one_module_run_a_host(kept: Kept) -> None:
    """The slurm role's four folders and the daemons' start (direct: no systemd in the sim hosts) are one
    module run on each host, in both configures, not one an item; the first configure's start names each
    daemon it started, slurmctld on the controller only."""
    for run in ("r1", "r2"):
        events = slurm_events(kept.cluster.base / run)
        for task in (SLURM_FOLDERS, SLURM_START):
            assert sorted(e["event"] for e in events[task]) == ["runner_on_ok"] * 2, (run, task, events[task])
    first = slurm_events(kept.cluster.base / "r1")[SLURM_START]
    started = {e["event_data"]["host"]: e["event_data"]["res"]["stdout"].splitlines() for e in first}
    controller = next(iter(kept.first["hosts"]))
    for host in kept.first["hosts"]:
        daemons = ["munged", "slurmctld", "slurmd"] if host == controller else ["munged", "slurmd"]
        assert started[host] == [f"{daemon} started" for daemon in daemons], (host, started)


def test_module_runs_compile_their_sources_once_per_host(kept: Kept) -> None:
    """The sim hosts' Python keeps what it compiles from Ansible's module zips (simhosts/zipcache.py), in a
    folder only root may write."""
    for name in kept.first["hosts"]:
        mode, owner, count = kept.ssh(
            name, "stat -c '%a %U' /var/cache/pav-sim-pyc; ls /var/cache/pav-sim-pyc | wc -l"
        ).split()
        assert (mode, owner) == ("700", "root") and int(count) > 10, (name, mode, owner, count)
