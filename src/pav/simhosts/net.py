"""The cluster's network: its bridge, and per host a network namespace joined to it by a veth pair."""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pav.simhosts.errors import SimError

# ip netns add/del race on the first creation of /run/netns across concurrent callers (Terraform starts
# hosts in parallel, and test runs of different clusters share the machine), so they take a machine-wide lock.
NETNS_LOCK = Path("/run/lock/pav-sim-hosts.lock")


@dataclass(frozen=True)
class Net:
    """A cluster's id and subnet index, and the names and addresses they give its links and hosts."""

    cluster: str
    subnet: int

    @property
    def bridge(self) -> str:
        return f"pavbr-{self.cluster}"

    @property
    def gateway(self) -> str:
        """The bridge's address: this machine's on the cluster subnet."""
        return f"10.77.{self.subnet}.1"

    @property
    def prefix(self) -> str:
        return f"10.77.{self.subnet}.0/24"

    @property
    def bridge_mac(self) -> str:
        return f"02:77:{self.subnet:02x}:ff:00:01"

    def netns(self, index: int) -> str:
        return f"pav-{self.cluster}-{index}"

    def veth(self, index: int) -> str:
        return f"pv-{self.cluster}-{index}"

    def ip(self, index: int) -> str:
        return f"10.77.{self.subnet}.{10 + index}"

    def mac(self, index: int) -> str:
        """Derived from subnet and index, so a host brought down and up again keeps its MAC and the neighbour
        caches of the bridge and the other hosts stay valid (a fresh random MAC left a stale ARP entry that
        blackholed the new host for up to a minute)."""
        return f"02:77:{self.subnet:02x}:{index:02x}:00:01"


def run(*argv: str, quiet: bool = False) -> None:
    """Runs a command (ip, mount, ...); its output goes to stderr (or nowhere if quiet); failing raises."""
    out = subprocess.DEVNULL if quiet else sys.stderr
    result = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out, check=False)
    if result.returncode != 0:
        raise SimError(f"{' '.join(argv)} failed (exit {result.returncode})")


def succeeds(*argv: str) -> bool:
    """Whether a command exits 0; its output is dropped."""
    return subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, check=False).returncode == 0


def output(*argv: str) -> str:
    """A command's stdout; empty when it fails."""
    result = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False)
    return result.stdout if result.returncode == 0 else ""


@contextlib.contextmanager
def netns_lock() -> Iterator[None]:
    NETNS_LOCK.parent.mkdir(parents=True, exist_ok=True)
    with open(NETNS_LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def link_exists(name: str) -> bool:
    return succeeds("ip", "link", "show", "dev", name)


def netns_exists(ns: str) -> bool:
    return os.path.exists(f"/run/netns/{ns}")


def no_ipv6(link: str) -> None:
    """IPv4 only on the cluster links: otherwise link-local IPv6 chatter (DAD, router solicitations, MLD)
    starts on every port. The file is absent when the kernel has no IPv6; nothing to silence then."""
    path = f"/proc/sys/net/ipv6/conf/{link}/disable_ipv6"
    if os.access(path, os.W_OK):
        Path(path).write_text("1\n")


def port_open(ip: str, port: int = 22) -> bool:
    try:
        with socket.create_connection((ip, port), timeout=1):
            return True
    except OSError:
        return False


def bridge_up(net: Net, owner: str) -> None:
    """Creates the bridge (or adopts the one this state dir made before) and gives it the gateway address."""
    with netns_lock():
        br = net.bridge
        if link_exists(br):
            alias = _read(f"/sys/class/net/{br}/ifalias")
            if alias and alias != owner:
                raise SimError(f"bridge {br} belongs to state dir {alias}")
        else:
            # Another cluster on the same subnet would make the routes collide.
            holders = output("ip", "-o", "-4", "addr", "show", "to", net.prefix).split()
            if len(holders) > 1:
                raise SimError(f"subnet {net.prefix} already used by interface {holders[1]}")
            # A fixed MAC: a bridge otherwise takes the lowest MAC of its ports, which changes as hosts come
            # and go and leaves the hosts' ARP entry for the bridge address stale (connections from this
            # machine then hang until the entry expires).
            run("ip", "link", "add", br, "address", net.bridge_mac, "type", "bridge")
        no_ipv6(br)
        # The alias records which state dir owns the bridge, so a second cluster with the same id is refused
        # instead of silently sharing it.
        run("ip", "link", "set", "dev", br, "alias", owner)
        run("ip", "addr", "replace", f"{net.gateway}/24", "dev", br)
        run("ip", "link", "set", "dev", br, "up")


def bridge_down(net: Net) -> None:
    with netns_lock():
        run("ip", "link", "del", net.bridge)


def netns_up(net: Net, index: int) -> None:
    """The host's namespace, its eth0 (the veth's peer) with the host's address, on the bridge."""
    ns, veth = net.netns(index), net.veth(index)
    with netns_lock():
        run("ip", "netns", "add", ns)
        run("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0",
            "address", net.mac(index), "netns", ns)  # fmt: skip
        no_ipv6(veth)
        succeeds("nsenter", f"--net=/run/netns/{ns}", "sh", "-c",
                 "echo 1 >/proc/sys/net/ipv6/conf/eth0/disable_ipv6")  # fmt: skip
        run("ip", "link", "set", "dev", veth, "master", net.bridge, "up")
        run("ip", "-n", ns, "addr", "add", f"{net.ip(index)}/24", "dev", "eth0")
        run("ip", "-n", ns, "link", "set", "dev", "lo", "up")
        run("ip", "-n", ns, "link", "set", "dev", "eth0", "up")


def netns_down(net: Net, index: int) -> None:
    ns, veth = net.netns(index), net.veth(index)
    with netns_lock():
        if netns_exists(ns):
            run("ip", "netns", "del", ns)
        # Deleting the netns destroys the peer and with it the pair, asynchronously: the link can vanish
        # between the check and the delete, which is success too. This is for a failure between creating
        # the veth and moving it.
        if link_exists(veth) and not succeeds("ip", "link", "del", veth) and link_exists(veth):
            raise SimError(f"cannot delete link {veth}")


def netns_pids(ns: str) -> list[int]:
    return [int(pid) for pid in output("ip", "netns", "pids", ns).split() if pid.isdigit()]


def forget_neighbour(net: Net, index: int) -> None:
    """Belt and braces for the stable MAC: forget the address in the root namespace so a host re-created
    with another name is resolved anew."""
    if link_exists(net.bridge):
        succeeds("ip", "neigh", "flush", "to", net.ip(index), "dev", net.bridge)


def link_down_in(net: Net, index: int) -> None:
    run("ip", "-n", net.netns(index), "link", "set", "dev", "eth0", "down")


def leftover_indices(net: Net) -> set[int]:
    """Indices of the cluster's netns and veths that exist, whatever the state dir says."""
    found = set()
    for line in output("ip", "netns", "list").splitlines():
        name = line.split()[0] if line.split() else ""
        index = _index_after(name, f"pav-{net.cluster}-")
        if index is not None:
            found.add(index)
    for line in output("ip", "-o", "link", "show").splitlines():
        fields = line.split(": ")
        index = _index_after(fields[1].split("@")[0] if len(fields) > 1 else "", f"pv-{net.cluster}-")
        if index is not None:
            found.add(index)
    return found


def _index_after(name: str, prefix: str) -> int | None:
    rest = name.removeprefix(prefix)
    if rest != name and 1 <= len(rest) <= 3 and rest.isascii() and rest.isdigit():
        return int(rest)
    return None


def _read(path: str) -> str:
    try:
        return Path(path).read_text().rstrip("\n")
    except OSError:
        return ""
