"""Tests for scripts/sim-hosts: real sshd hosts in network namespaces.

They need root (namespaces, mounts, links); conftest's sim_deps installs
openssh-server and friends first. Each cluster gets an id and a subnet
derived from the pid, skipping subnets already in use, so parallel runs on one
machine do not collide.
"""

import json
import os
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.sim.script import sim, up_free

HOST_KEYS = {"name", "index", "ip", "port", "user", "netns", "pid"}


def _netns_names():
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _mounts_under(path):
    prefix = str(path)
    with open("/proc/self/mountinfo") as f:
        points = [line.split()[4] for line in f]
    return [p for p in points if p == prefix or p.startswith(prefix + "/")]


def _live_cmdlines():
    """(pid, cmdline) of every process that is not a zombie."""
    procs = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            if stat.rsplit(")", 1)[1].split()[0] == "Z":
                continue
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        procs.append((int(entry.name), cmd))
    return procs


def _pid_alive(pid):
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _port_open(ip, port=22, timeout=2.0):
    try:
        with socket.create_connection((ip, port), timeout=timeout):
            return True
    except OSError:
        return False


@dataclass
class Cluster:
    state_dir: Path
    cid: str
    subnet: int
    key: Path
    hosts: list = field(default_factory=list)
    up_stdout: str = ""

    def ssh_argv(self, host, *extra):
        return [
            "ssh",
            "-F", "/dev/null",
            "-i", str(self.key),
            "-o", "IdentitiesOnly=yes",
            "-o", "StrictHostKeyChecking=yes",
            "-o", f"UserKnownHostsFile={self.state_dir}/hosts/{host['name']}.known_hosts",
            "-o", "GlobalKnownHostsFile=/dev/null",
            "-o", "BatchMode=yes",
            "-o", "ConnectTimeout=10",
            "-o", "LogLevel=ERROR",
            *extra,
            f"{host['user']}@{host['ip']}",
        ]  # fmt: skip

    def ssh(self, host, command, *extra, check=True):
        result = subprocess.run(
            [*self.ssh_argv(host, *extra), command],
            capture_output=True,
            text=True,
            timeout=30,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"ssh {host['name']} {command!r} exited {result.returncode}\n{result.stdout}{result.stderr}"
            )
        return result


def _start_cluster(state_dir, key, count, salt):
    up = up_free(state_dir, Path(f"{key}.pub"), count, "s", salt)
    cluster = Cluster(state_dir, up.cluster, up.subnet, key, up_stdout=up.stdout)
    for i in range(count):
        cluster.hosts.append(json.loads((state_dir / "hosts" / f"sim-{up.cluster}-{i}.json").read_text()))
    return cluster


@pytest.fixture(scope="module")
def ssh_key(tmp_path_factory):
    key = tmp_path_factory.mktemp("sim-key") / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    return key


@pytest.fixture(scope="module")
def cluster(sim_deps, ssh_key, tmp_path_factory):
    state_dir = tmp_path_factory.mktemp("sim-state")
    try:
        yield _start_cluster(state_dir, ssh_key, count=2, salt=1)
    finally:
        sim("down", "--state-dir", state_dir, check=False)


def test_up_writes_host_records(cluster):
    paths = cluster.up_stdout.split()
    assert paths == [str(cluster.state_dir / "hosts" / f"sim-{cluster.cid}-{i}.json") for i in (0, 1)]
    for i, host in enumerate(cluster.hosts):
        assert host.keys() >= HOST_KEYS
        assert host["name"] == f"sim-{cluster.cid}-{i}"
        assert host["index"] == i
        assert host["ip"] == f"10.77.{cluster.subnet}.{10 + i}"
        assert host["port"] == 22 and host["user"] == "root"
        assert host["netns"] == f"pav-{cluster.cid}-{i}"
        assert _pid_alive(host["pid"])
        kh = (cluster.state_dir / "hosts" / f"{host['name']}.known_hosts").read_text()
        assert kh.startswith(f"{host['ip']} ssh-ed25519 ")


def test_hostname_over_pinned_ssh(cluster):
    for host in cluster.hosts:
        out = cluster.ssh(host, "hostname; echo $PAV_SIM_HOST; cat /etc/pav-sim-host").stdout.split()
        assert out == [host["name"]] * 3


def test_host_key_pinning_is_per_host(cluster):
    # Host 1's address with host 0's pinned key must be rejected: every host
    # has its own key, not the machine's.
    h0, h1 = cluster.hosts
    argv = cluster.ssh_argv(h1)
    i = argv.index(f"UserKnownHostsFile={cluster.state_dir}/hosts/{h1['name']}.known_hosts")
    wrong = cluster.state_dir / "wrong_known_hosts"
    key0 = (cluster.state_dir / "hosts" / f"{h0['name']}.known_hosts").read_text().split()[1:]
    wrong.write_text(f"{h1['ip']} {' '.join(key0)}\n")
    argv[i] = f"UserKnownHostsFile={wrong}"
    result = subprocess.run([*argv, "true"], capture_output=True, text=True, timeout=30, check=False)
    assert result.returncode == 255
    assert "HOST IDENTIFICATION HAS CHANGED" in result.stderr


def test_host_reaches_other_host(cluster):
    h0, h1 = cluster.hosts
    cluster.ssh(h0, f'timeout 5 bash -c "</dev/tcp/{h1["ip"]}/22"')


def test_no_route_out_of_the_cluster(cluster):
    routes = cluster.ssh(cluster.hosts[0], "ip -4 route show").stdout
    assert "default" not in routes
    assert f"10.77.{cluster.subnet}.0/24" in routes


def test_etc_write_stays_in_overlay(cluster):
    h0, h1 = cluster.hosts
    name = f"pav-sim-probe-{cluster.cid}"
    cluster.ssh(h0, f"echo {cluster.cid} > /etc/{name}")
    upper = cluster.state_dir / "run" / "0" / "fs" / "upper" / "etc" / name
    assert upper.read_text().strip() == cluster.cid
    assert not Path("/etc", name).exists()
    assert cluster.ssh(h1, f"test -e /etc/{name}", check=False).returncode == 1


def test_shared_dir_is_shared_between_hosts(cluster):
    """/srv/pav-shared is one folder of the state dir, read-write in every host (the sim's NFS)."""
    h0, h1 = cluster.hosts
    cluster.ssh(h0, f"echo {cluster.cid} > /srv/pav-shared/probe-{cluster.cid}")
    assert cluster.ssh(h1, f"cat /srv/pav-shared/probe-{cluster.cid}").stdout.strip() == cluster.cid
    assert (cluster.state_dir / "shared" / f"probe-{cluster.cid}").read_text().strip() == cluster.cid


def test_password_auth_refused(cluster):
    host = cluster.hosts[0]
    result = cluster.ssh(
        host,
        "true",
        "-o", "PubkeyAuthentication=no",
        "-o", "PreferredAuthentications=password,keyboard-interactive",
        check=False,
    )  # fmt: skip
    assert result.returncode == 255
    # The server lists the methods it would accept: publickey only.
    assert "Permission denied (publickey)" in result.stderr
    conf = f"/etc/ssh/pav-{cluster.cid}-0.sshd_config"
    effective = cluster.ssh(host, f"/usr/sbin/sshd -T -f {conf}").stdout
    assert "passwordauthentication no" in effective
    assert "kbdinteractiveauthentication no" in effective
    assert "permitrootlogin without-password" in effective  # = prohibit-password


def test_list_and_idempotent_host_up(cluster):
    lines = sim("list", "--state-dir", cluster.state_dir).stdout.splitlines()
    assert lines == [f"{h['name']} {h['ip']} {h['pid']} alive" for h in cluster.hosts]
    h0 = cluster.hosts[0]
    result = sim(
        "host-up", "--state-dir", cluster.state_dir, "--index", 0,
        "--pubkey", f"{cluster.key}.pub",
    )  # fmt: skip
    assert "already up" in result.stderr
    record = json.loads((cluster.state_dir / "hosts" / f"{h0['name']}.json").read_text())
    assert record["pid"] == h0["pid"]


def test_injected_host_up_failure_leaves_nothing(cluster):
    env = dict(os.environ, PAV_SIM_FAIL_HOST="5")
    result = sim(
        "host-up", "--state-dir", cluster.state_dir, "--index", 5,
        "--pubkey", f"{cluster.key}.pub",
        env=env, check=False,
    )  # fmt: skip
    assert result.returncode != 0
    assert f"sim-{cluster.cid}-5" in result.stderr
    assert f"pav-{cluster.cid}-5" not in _netns_names()
    assert not Path(f"/sys/class/net/pv-{cluster.cid}-5").exists()
    assert not (cluster.state_dir / "run" / "5").exists()
    assert not (cluster.state_dir / "hosts" / f"sim-{cluster.cid}-5.json").exists()
    assert not _mounts_under(cluster.state_dir / "run" / "5")
    assert not [c for _, c in _live_cmdlines() if "/run/5/host-init.sh" in c and str(cluster.state_dir) in c]
    # The rest of the cluster is untouched.
    assert cluster.ssh(cluster.hosts[0], "hostname").stdout.strip() == cluster.hosts[0]["name"]


def test_host_down_then_down_leaves_nothing(sim_deps, ssh_key, tmp_path):
    state_dir = tmp_path / "state"
    try:
        c = _start_cluster(state_dir, ssh_key, count=2, salt=2)
        h0, h1 = c.hosts
        # A process that leaves its ssh session behind must still not
        # outlive the host.
        marker = f"pavsim-marker-{c.cid}"
        c.ssh(h0, f'setsid bash -c "exec -a {marker} sleep 300" </dev/null >/dev/null 2>&1 &')
        deadline = time.monotonic() + 5
        while not any(marker in cmd for _, cmd in _live_cmdlines()):
            assert time.monotonic() < deadline, "marker process did not start"
            time.sleep(0.05)

        sim("host-down", "--state-dir", state_dir, "--index", 1)
        assert c.ssh(h0, "hostname").stdout.strip() == h0["name"]
        assert not _port_open(h1["ip"])
        assert f"pav-{c.cid}-1" not in _netns_names()
        assert not _pid_alive(h1["pid"])
        assert "already down" in sim("host-down", "--state-dir", state_dir, "--index", 1).stderr
        assert sim("list", "--state-dir", state_dir).stdout.split() == [
            h0["name"],
            h0["ip"],
            str(h0["pid"]),
            "alive",
        ]

        sim("down", "--state-dir", state_dir)
        assert not [n for n in _netns_names() if n.startswith(f"pav-{c.cid}-")]
        assert not _mounts_under(state_dir)
        assert not Path(f"/sys/class/net/pavbr-{c.cid}").exists()
        assert not [n for n in os.listdir("/sys/class/net") if n.startswith(f"pv-{c.cid}-")]
        leftovers = [
            (pid, cmd)
            for pid, cmd in _live_cmdlines()
            if str(state_dir) in cmd or f"pav-{c.cid}-" in cmd or marker in cmd
        ]
        assert not leftovers
        assert not _pid_alive(h0["pid"])
        assert not (state_dir / "run").exists() and not (state_dir / "hosts").exists()
        assert not (state_dir / "shared").exists()
        # Twice is fine.
        sim("down", "--state-dir", state_dir)
    finally:
        sim("down", "--state-dir", state_dir, check=False)
