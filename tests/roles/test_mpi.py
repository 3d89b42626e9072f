"""The mpi role on three simulated hosts (scripts/sim-hosts): real sshd, real ansible-playbook, real mpirun.

The role installs nothing here (openmpi-bin and libopenmpi-dev are on this machine, and the hosts see its
filesystem through an overlay), sets up host-to-host SSH with pinned host keys, writes a hostfile, builds
pav_mpi_allreduce and the pav-mpirun launcher. The test then launches 6 ranks over the 3 hosts from host 0.
Needs root (namespaces); skipped otherwise.
"""

import hashlib
import json
import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.sim.script import REPO, hosts_up

VENV_BIN = REPO / ".venv" / "bin"
HOSTS = 3
SLOTS = 2
REAL_SSH_DIR = Path("/root/.ssh")
SSH_FILES = ("pav_cluster_ed25519", "known_hosts", "config", "authorized_keys")
RECAP = re.compile(r"^(\S+)\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)


def _snapshot_real_ssh():
    """Contents (sha256) of the files the role writes, as this machine's own /root/.ssh holds them."""
    snap = {}
    for name in SSH_FILES:
        path = REAL_SSH_DIR / name
        snap[name] = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None
    return snap


class Cluster:
    def __init__(self, state_dir, key, hosts):
        self.state_dir = state_dir
        self.key = key
        self.hosts = hosts
        self.known_hosts = state_dir / "pinned_known_hosts"
        self.known_hosts.write_text(
            "".join((state_dir / "hosts" / f"{h['name']}.known_hosts").read_text() for h in hosts)
        )

    def ssh(self, host, command, timeout=60):
        argv = [
            "ssh", "-F", "/dev/null", "-i", str(self.key),
            "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10",
            "-o", "StrictHostKeyChecking=yes", "-o", f"UserKnownHostsFile={self.known_hosts}",
            "-o", "GlobalKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
            f"root@{host['ip']}", command,
        ]  # fmt: skip
        return subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, check=False
        )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with hosts_up(tmp_path_factory.mktemp("mpi-sim"), HOSTS, "m") as up:
        yield Cluster(up.state_dir, up.key, up.records)


@pytest.fixture(scope="module")
def applied(cluster, tmp_path_factory):
    """Runs the role twice; returns both runs and the mpi_info each host reported."""
    run_dir = tmp_path_factory.mktemp("mpi-run")
    remote_dir = f"/var/tmp/pav-test-{os.getpid()}"
    inventory = {
        "all": {
            "hosts": {
                h["name"]: {
                    "ansible_host": h["ip"],
                    "ansible_user": "root",
                    "ansible_ssh_private_key_file": str(cluster.key),
                    "ansible_python_interpreter": "/usr/bin/python3",
                    "ansible_ssh_common_args": (
                        f"-o UserKnownHostsFile={cluster.known_hosts} -o StrictHostKeyChecking=yes"
                    ),
                }
                for h in cluster.hosts
            },
            "vars": {"pav_remote_dir": remote_dir, "pav_run_dir": str(run_dir), "mpi_slots_per_host": SLOTS},
        }
    }
    (run_dir / "inventory.yml").write_text(yaml.safe_dump(inventory))
    play = [
        {
            "name": "Apply the mpi role",
            "hosts": "all",
            "gather_facts": False,
            "roles": [{"role": "mpi"}],
            "post_tasks": [
                {
                    "name": "Save mpi_info on the controller",
                    "ansible.builtin.copy": {
                        "content": "{{ mpi_info | to_nice_json }}",
                        "dest": f"{run_dir}/mpi_info.{{{{ inventory_hostname }}}}.json",
                        "mode": "0644",
                    },
                    "delegate_to": "localhost",
                }
            ],
        }
    ]
    (run_dir / "play.yml").write_text(yaml.safe_dump(play, sort_keys=False))
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(REPO / "ansible" / "ansible.cfg"),
        "ANSIBLE_ROLES_PATH": str(REPO / "roles"),
        "ANSIBLE_FORCE_COLOR": "0",
        "ANSIBLE_NOCOLOR": "1",
    }
    before = _snapshot_real_ssh()

    def playbook():
        return subprocess.run(
            [str(VENV_BIN / "ansible-playbook"), "-i", "inventory.yml", "play.yml"],
            cwd=run_dir,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )

    first = playbook()
    second = playbook() if first.returncode == 0 else None
    info = {
        h["name"]: json.loads((run_dir / f"mpi_info.{h['name']}.json").read_text())
        for h in cluster.hosts
        if (run_dir / f"mpi_info.{h['name']}.json").exists()
    }
    return {
        "first": first,
        "second": second,
        "info": info,
        "remote_dir": remote_dir,
        "run_dir": run_dir,
        "before": before,
    }


def _require_applied(applied):
    if applied["first"].returncode != 0:
        pytest.fail("the play failed (see test_play_succeeds_and_is_idempotent)")


def _recap(out):
    return {m[1]: {"ok": int(m[2]), "changed": int(m[3]), "unreachable": int(m[4]), "failed": int(m[5])}
            for m in RECAP.finditer(out)}  # fmt: skip


def test_play_succeeds_and_is_idempotent(cluster, applied):
    first, second = applied["first"], applied["second"]
    assert first.returncode == 0, first.stdout[-6000:] + first.stderr[-3000:]
    recap = _recap(first.stdout)
    assert set(recap) == {h["name"] for h in cluster.hosts}
    assert all(r["changed"] > 0 and r["failed"] == 0 and r["unreachable"] == 0 for r in recap.values()), recap
    assert second.returncode == 0, second.stdout[-6000:] + second.stderr[-3000:]
    recap2 = _recap(second.stdout)
    assert set(recap2) == {h["name"] for h in cluster.hosts}
    assert all(r["changed"] == 0 and r["failed"] == 0 for r in recap2.values()), second.stdout[-6000:]


def test_mpi_info(cluster, applied):
    _require_applied(applied)
    bin_dir = f"{applied['remote_dir']}/mpi/bin"
    assert set(applied["info"]) == {h["name"] for h in cluster.hosts}
    for info in applied["info"].values():
        assert info["flavor"] == "openmpi"
        assert re.fullmatch(r"\d+\.\d+(\.\d+)?\S*", info["version"]), info
        assert info["mpirun"] == "/usr/bin/mpirun"
        assert info["launcher"] == f"{bin_dir}/pav-mpirun"
        assert info["program"] == f"{bin_dir}/pav_mpi_allreduce"
        assert info["hostfile"] == f"{applied['remote_dir']}/mpi/hostfile"
        assert info["if_include"] == "eth0"
        assert info["hosts"] == [h["ip"] for h in cluster.hosts]
        assert info["slots_total"] == HOSTS * SLOTS


def test_hostfile_and_ssh_between_hosts(cluster, applied):
    _require_applied(applied)
    h0 = cluster.hosts[0]
    hostfile = cluster.ssh(h0, f"cat {applied['remote_dir']}/mpi/hostfile")
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


def test_allreduce_over_three_hosts(cluster, applied):
    _require_applied(applied)
    bin_dir = f"{applied['remote_dir']}/mpi/bin"
    out = "/tmp/pav-mpi-test"
    launch = cluster.ssh(
        cluster.hosts[0],
        f"{bin_dir}/pav-mpirun -np {HOSTS * SLOTS} {bin_dir}/pav_mpi_allreduce --out {out} "
        "--test-id mpi_allreduce",
        timeout=120,
    )
    assert launch.returncode == 0, launch.stdout + launch.stderr
    report = json.loads(cluster.ssh(cluster.hosts[0], f"cat {out}/mpi_allreduce.rank0.json").stdout)
    assert report["schema_version"] == 1 and report["kind"] == "mpi" and report["rank"] == 0
    assert report["test_id"] == "mpi_allreduce"
    assert report["status"] == "pass", report
    assert report["world_size"] == HOSTS * SLOTS
    assert report["hostname"] == cluster.hosts[0]["name"]
    metrics = report["metrics"]
    assert metrics["world_size"] == HOSTS * SLOTS
    assert metrics["wrong_total"] == 0
    assert metrics["count"] == 1 << 20
    assert metrics["allreduce_time_us_median"] > 0
    assert len(metrics["hosts"]) == HOSTS * SLOTS
    assert set(metrics["hosts"]) == {h["name"] for h in cluster.hosts}


def test_allreduce_reports_wrong_results(cluster, applied):
    """A rank on the last host contributes a wrong element 0: every rank sees it in every iteration."""
    _require_applied(applied)
    bin_dir = f"{applied['remote_dir']}/mpi/bin"
    world, iters = HOSTS * SLOTS, 3
    launch = cluster.ssh(
        cluster.hosts[0],
        f"cd /tmp && {bin_dir}/pav-mpirun -np {world} pav_mpi_allreduce --out results/bad --test-id bad "
        f"--count 1000 --iters {iters} --inject-wrong {world - 1}",
        timeout=120,
    )
    assert launch.returncode != 0, launch.stdout + launch.stderr
    report = json.loads(cluster.ssh(cluster.hosts[0], "cat /tmp/results/bad/bad.rank0.json").stdout)
    assert report["status"] == "fail"
    assert report["metrics"]["wrong_total"] == world * iters
    assert "wrong elements" in report["reason"]


def test_ssh_files_land_in_hosts_not_on_this_machine(cluster, applied):
    _require_applied(applied)
    for h in cluster.hosts:
        ssh_dir = Path(h["upper"]) / "root" / ".ssh"
        key = ssh_dir / "pav_cluster_ed25519"
        assert key.is_file() and key.stat().st_mode & 0o777 == 0o600
        known = (ssh_dir / "known_hosts").read_text()
        for other in cluster.hosts:
            assert f"{other['ip']} ssh-ed25519 " in known and f"{other['name']} ssh-ed25519 " in known
        assert (applied["run_dir"] / "cluster-ssh" / "pav_cluster_ed25519.pub").read_text().strip() in (
            ssh_dir / "authorized_keys"
        ).read_text()
    assert _snapshot_real_ssh() == applied["before"]
    assert not (REAL_SSH_DIR / "pav_cluster_ed25519").exists()
