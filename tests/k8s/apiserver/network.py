"""The pods' network, as a container runtime and the cluster DNS give it: each pod an address of its own
(127.0.0.N, reported in status.podIP), and a name the cluster DNS answers resolved to the address of the pod
it names (a Service's name: the pod its selector picks; HOSTNAME.SUBDOMAIN under a headless Service: the pod
of that hostname and subdomain).

The pods of one double share one network namespace of their own (an unprivileged user and network namespace
made by unshare, its loopback up), standing in for the cluster's pod network. A listener on a wildcard
address takes its port in that namespace only: torch's TCPStore binds 0.0.0.0 on the port the operator names
(training-operator's 23456, the torch plugin's 29500) whatever address the pod has, so addresses alone would
not keep the pods of two doubles (two tests on two xdist workers) apart; the namespace does. Where the
kernel refuses such a namespace (isolated() is False), pods run on this machine's loopback as before, and
tests/k8s/conftest.py keeps every test whose pods run on one xdist worker."""

from __future__ import annotations

import functools
import subprocess
import sys
import threading

# The namespace's holder: brings its loopback up, says so, and lives until its stdin closes (the double
# stops, or the test run ends however it ends).
HOLDER = """
import fcntl, socket, struct, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
ifreq = struct.pack("16sH22x", b"lo", 0)
flags = struct.unpack("16sH22x", fcntl.ioctl(s, 0x8913, ifreq))[1]  # SIOCGIFFLAGS
fcntl.ioctl(s, 0x8914, struct.pack("16sH22x", b"lo", flags | 1))  # SIOCSIFFLAGS: IFF_UP
print("up", flush=True)
sys.stdin.read()
"""


class PodNetwork:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.holder: subprocess.Popen[str] | None = None
        self.next = 2  # 127.0.0.1 stays this machine's

    def address(self) -> str:
        with self.lock:
            n, self.next = self.next, self.next + 1
        return f"127.{(n >> 16) & 255}.{(n >> 8) & 255}.{n & 255}"

    def enter(self) -> list[str]:
        """The argv prefix that runs a container in the pods' namespace (made at the first pod)."""
        if not isolated():
            return []
        with self.lock:
            if self.holder is None:
                self.holder = _hold()
            return _enter(self.holder.pid)

    def stop(self) -> None:
        with self.lock:
            holder, self.holder = self.holder, None
        if holder is not None:
            _release(holder)


def _hold() -> subprocess.Popen[str]:
    argv = ["unshare", "--user", "--map-root-user", "--net", sys.executable, "-c", HOLDER]
    holder = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None
    if holder.stdout.readline().strip() != "up":
        holder.kill()
        holder.wait()
        raise RuntimeError("the pods' network namespace did not come up")
    return holder


def _release(holder: subprocess.Popen[str]) -> None:
    """Close the holder's stdin: it exits, and the namespace with it once no pod is left in it."""
    assert holder.stdin is not None and holder.stdout is not None
    holder.stdin.close()
    holder.wait(timeout=30)
    holder.stdout.close()


def _enter(pid: int) -> list[str]:
    # --preserve-credentials: the uid stays (it maps to root inside); no setgroups, which the namespace denies
    return ["nsenter", "--target", str(pid), "--user", "--net", "--preserve-credentials", "--"]


@functools.cache
def isolated() -> bool:
    """Whether this machine lets the double give its pods a network namespace of their own."""
    try:
        holder = _hold()
    except (OSError, RuntimeError):
        return False
    try:
        entered = subprocess.run([*_enter(holder.pid), "true"], capture_output=True, timeout=30, check=False)
        return entered.returncode == 0
    except OSError:
        return False
    finally:
        _release(holder)
