"""host-up and host-down: one host's runtime dir, namespaces, sshd and records."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import time
import traceback
from pathlib import Path
from types import FrameType

from pav.simhosts import faults, net
from pav.simhosts.errors import SimError, log
from pav.simhosts.net import Net
from pav.simhosts.state import (
    HostRecord,
    State,
    drop_index_lock,
    lock_index,
    mounts_under,
    open_state,
    parse_index,
    remove_tree,
)

HOST_INIT = Path(__file__).with_name("host-init.sh")
# Ansible's module Python on the hosts (the sim env's ansible_python_interpreter) is Debian's system Python,
# which reads .pth files here; its cache of compiled module code (zipcache.py) goes where only root writes.
SYSTEM_SITE = Path("/usr/lib/python3/dist-packages")
ZIP_CACHE = Path("/var/cache/pav-sim-pyc")
# The checkout this package is in (src/pav/simhosts/): shown read-only in every host, .venv too.
# Installed from a wheel, the environment it is installed in: the driver's Python (sim-hosts runs with it)
# runs the payload on the hosts.
CHECKOUT = Path(__file__).resolve().parents[3]
if not (CHECKOUT / "src" / "pav").is_dir():
    CHECKOUT = Path(sys.prefix)
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9.-]{0,62}")
# The host's environment: nothing of the caller's.
HOST_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}


def sshd_wait_s() -> tuple[float, str]:
    """Readiness bound for sshd, and how to print it; generous because hosts may start in parallel on a
    loaded 2-core machine."""
    text = os.environ.get("PAV_SIM_SSHD_WAIT_S") or "20"
    try:
        return float(text), text
    except ValueError:
        raise SimError(f"PAV_SIM_SSHD_WAIT_S must be a number of seconds, not {text}") from None


def need_pubkey(path: str) -> Path:
    if not path:
        raise SimError("--pubkey is required")
    try:
        usable = os.access(path, os.R_OK) and os.stat(path).st_size > 0
    except OSError:
        usable = False
    if not usable:
        raise SimError(f"public key file {path} is missing or empty")
    return Path(path)


def pid_alive(pid: int) -> bool:
    """Exists and is not a zombie: the launcher is reparented to this machine's init, which may be slow to
    reap it."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[:1] != ["Z"]


def pid_is_host(pid: int, hd: Path) -> bool:
    """True if pid is one of this host's launcher chain (nsenter -> unshare carry the host's init script and
    dir among their arguments), so a recycled pid is never signalled."""
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return False
    return f" {hd}/host-init.sh {hd} " in f" {cmd} "


def live_host_pid(state: State, index: int) -> int | None:
    pid = state.host_pid(index)
    hd = state.host_dir(index)
    return pid if pid is not None and pid_alive(pid) and pid_is_host(pid, hd) else None


def host_is_up(state: State, net_: Net, index: int) -> bool:
    name = state.host_name(index)
    return (
        live_host_pid(state, index) is not None
        and net.port_open(net_.ip(index))
        and name is not None
        and state.record(name).is_file()
    )


def host_up(state_dir: str, index_text: str, pubkey_text: str, name_text: str) -> None:
    state = open_state(state_dir, create=True)
    assert state is not None
    net_ = state.load_net()
    if net_ is None:
        raise SimError(f"no network in {state.root}: run net-up first")
    index = parse_index(index_text)
    pubkey = need_pubkey(pubkey_text)
    name = name_text or f"sim-{net_.cluster}-{index}"
    if not NAME.fullmatch(name):
        raise SimError(f"bad host name: {name}")

    lock_index(state, index)  # held until this command exits
    if host_is_up(state, net_, index):
        running = state.host_name(index)
        log(f"host {running} (index {index}) is already up at {net_.ip(index)}")
        print(state.record(str(running)))
        return
    if not net.link_exists(net_.bridge):
        drop_index_lock(state, index)
        raise SimError(f"bridge {net_.bridge} is missing: run net-up first")
    # Leftovers of a crashed or half-finished attempt.
    hd = state.host_dir(index)
    if hd.exists() or net.netns_exists(net_.netns(index)) or net.link_exists(net_.veth(index)):
        log(f"host {index}: removing leftovers of an earlier attempt")
        remove_host(state, net_, index)

    previous = signal.signal(signal.SIGTERM, _exit_1)
    try:
        record = _make_host(state, net_, index, name, pubkey)
    except BaseException as exc:
        _clean_up_failed(state, net_, index, exc)
        raise SystemExit(1) from None
    signal.signal(signal.SIGTERM, previous)

    if faults.deaf(index):
        net.link_down_in(net_, index)
        log(f"host {name} up at {record.ip} but deaf: link down, {faults.deaf_reason(index)}")
        return
    log(f"host {name} up at {record.ip} (pid {record.pid})")
    print(state.record(name))


def _exit_1(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(1)


def _clean_up_failed(state: State, net_: Net, index: int, exc: BaseException) -> None:
    """What a failed host-up leaves is removed; the failure was said first."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    if isinstance(exc, SimError):
        log(exc.message)
    elif isinstance(exc, OSError):
        log(str(exc))
    elif not isinstance(exc, KeyboardInterrupt | SystemExit):
        traceback.print_exc()
    log(f"cleaning up failed host {index}")
    try:
        remove_host(state, net_, index)
    except SimError as err:
        log(err.message)
    except OSError as err:
        log(str(err))
    except Exception:
        traceback.print_exc()
    drop_index_lock(state, index)


def _make_host(state: State, net_: Net, index: int, name: str, pubkey: Path) -> HostRecord:
    hd = state.host_dir(index)
    _prepare(state, index, name, pubkey)
    net.netns_up(net_, index)
    proc = _launch(state, net_, index, name)
    try:
        (hd / "pid").write_text(f"{proc.pid}\n")
        faults.check_fail(name, index)
        _wait_for_sshd(proc, hd, name, index, net_.ip(index))
    except BaseException:
        # Killed by its handle: just after the launch the child may not have exec'd nsenter yet, so neither
        # its command line nor the netns tells remove_host it is the host's (one outlived a failed
        # host-up under load).
        proc.kill()
        proc.wait(timeout=10)
        raise
    return _write_records(state, net_, index, name, proc.pid)


def _prepare(state: State, index: int, name: str, pubkey: Path) -> None:
    """The runtime dir: a tmpfs for the overlay's upper and work dirs, root's home, sshd's config."""
    hd = state.host_dir(index)
    for folder in (hd / "fs", state.hosts, state.shared):
        folder.mkdir(parents=True, exist_ok=True)
    (hd / "name").write_text(f"{name}\n")
    net.run("mount", "-t", "tmpfs", "-o", "mode=755", "tmpfs", str(hd / "fs"))
    for sub in ("upper", "work", "root"):
        _mkdir(hd / "fs" / sub, 0o755)
    # root's home shows this machine's /root (its Python installs, e.g. a pyenv interpreter behind the
    # project's venv, must work inside), but with the Debian skeleton's .bashrc/.profile over the machine's
    # (a pyenv init there added ~0.4 s to every ssh command) and an opaque .ssh holding only the authorized
    # key, so no key or known_hosts of this machine shows through.
    home = hd / "fs" / "upper" / "root"
    _mkdir(home, 0o700)
    for dotfile in (".bashrc", ".profile"):
        with contextlib.suppress(OSError):
            shutil.copy(f"/etc/skel/{dotfile}", home / dotfile)
    _mkdir(home / ".ssh", 0o700)
    # Opaque: the same path's entries of the lower layer (this machine's /root/.ssh) are hidden.
    os.setxattr(home / ".ssh", "trusted.overlay.opaque", b"y")
    _write(home / ".ssh" / "authorized_keys", pubkey.read_bytes(), 0o600)
    # /var/tmp of its own, opaque too: a local run's folders there are this machine's as well, and a local
    # run tearing them down would change the lower layer under a running host.
    _mkdir(hd / "fs" / "upper" / "var", 0o755)
    _mkdir(hd / "fs" / "upper" / "var" / "tmp", 0o1777)
    os.setxattr(hd / "fs" / "upper" / "var" / "tmp", "trusted.overlay.opaque", b"y")
    # The tool's work folder (/var/lib/pav) hidden by a whiteout, for the same reason: the host starts
    # without it, as a fresh machine would, whatever a local run left in this machine's.
    _folders(hd / "fs" / "upper" / "var" / "lib")
    os.mknod(hd / "fs" / "upper" / "var" / "lib" / "pav", stat.S_IFCHR, os.makedev(0, 0))
    _module_cache(hd / "fs" / "upper")
    shutil.copyfile(HOST_INIT, hd / "host-init.sh")
    (hd / "sshd_config").write_text(sshd_config(name))


def _module_cache(upper: Path) -> None:
    """The host's system Python keeps what it compiles from Ansible's module zips (zipcache.py, issue 49):
    the hook and the .pth that loads it in the system site folder, the cache folder root's alone."""
    if not SYSTEM_SITE.is_dir():
        return
    site = upper / SYSTEM_SITE.relative_to("/")
    _folders(site)
    shutil.copyfile(Path(__file__).with_name("zipcache.py"), site / "pav_sim_zipcache.py")
    line = f"import pav_sim_zipcache; pav_sim_zipcache.install({str(ZIP_CACHE)!r})\n"
    _write(site / "pav-sim-zipcache.pth", line.encode(), 0o644)
    cache = upper / ZIP_CACHE.relative_to("/")
    _folders(cache.parent)
    _mkdir(cache, 0o700)


def _folders(path: Path) -> None:
    """path and the parents it lacks, each 0755 as the lower layer's are (an upper folder's mode wins)."""
    if not path.exists():
        _folders(path.parent)
        _mkdir(path, 0o755)


def sshd_config(name: str) -> str:
    return f"""\
# Written by sim-hosts for {name}; used only inside the simulated host.
Port 22
ListenAddress 0.0.0.0
AddressFamily inet
HostKey /etc/ssh/ssh_host_ed25519_key
PermitRootLogin prohibit-password
PubkeyAuthentication yes
AuthorizedKeysFile .ssh/authorized_keys
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
UseDNS no
MaxStartups 100:30:200
MaxSessions 100
PrintMotd no
X11Forwarding no
AcceptEnv LANG LC_*
SetEnv PAV_SIM_HOST={name}
PidFile /run/sshd.pid
Subsystem sftp /usr/lib/openssh/sftp-server
"""


def _launch(state: State, net_: Net, index: int, name: str) -> subprocess.Popen[bytes]:
    """Starts the host: host-init.sh as PID 1 of new mount, UTS and PID namespaces in the host's netns.

    A session of its own: the host must not share the caller's session or process group (Terraform and
    pytest may signal those). The pid is unshare's (nsenter execs it), the one host-down kills; with
    --kill-child its death takes the host's PID 1, and with it the PID namespace.
    """
    hd = state.host_dir(index)
    conf = f"pav-{net_.cluster}-{index}.sshd_config"
    argv = [
        "nsenter", f"--net=/run/netns/{net_.netns(index)}",
        "unshare", "--mount", "--uts", "--pid", "--fork", "--kill-child", "--propagation", "private",
        "bash", str(hd / "host-init.sh"), str(hd), name, net_.ip(index), conf,
        str(CHECKOUT), str(state.shared),
    ]  # fmt: skip
    with open(hd / "host.log", "wb") as host_log:
        return subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=host_log, stderr=subprocess.STDOUT, env=HOST_ENV,
            start_new_session=True,
        )  # fmt: skip


def _wait_for_sshd(proc: subprocess.Popen[bytes], hd: Path, name: str, index: int, ip: str) -> None:
    wait_s, shown = sshd_wait_s()
    deadline = time.monotonic() + wait_s
    failed = f"host-up {name} (index {index}) failed"
    while not net.port_open(ip):
        if proc.poll() is not None:
            _show_log(hd / "host.log")
            raise SimError(f"{failed}: host process exited before sshd answered on {ip}:22")
        if time.monotonic() >= deadline:
            _show_log(hd / "host.log")
            raise SimError(f"{failed}: sshd did not answer on {ip}:22 within {shown}s")
        time.sleep(0.05)


def _show_log(path: Path) -> None:
    with contextlib.suppress(OSError):
        for line in path.read_text(errors="replace").splitlines():
            print(f"  | {line}", file=sys.stderr)


def _write_records(state: State, net_: Net, index: int, name: str, pid: int) -> HostRecord:
    """The host's key, as the host made it, for pinning; then the record that says the host is up."""
    upper = state.host_dir(index) / "fs" / "upper"
    pub = upper / "etc" / "ssh" / "ssh_host_ed25519_key.pub"
    fields = pub.read_text().split() if pub.is_file() else []
    if len(fields) < 2:
        raise SimError(f"host-up {name} (index {index}) failed: no host key at {pub}")
    record = HostRecord(name, index, net_.ip(index), 22, "root", net_.netns(index), pid, str(upper))
    json_path = state.record(name)
    _replace(state.known_hosts(name), f"{record.ip} {fields[0]} {fields[1]}\n", Path(f"{json_path}.kh.tmp"))
    _replace(json_path, record.to_json(), Path(f"{json_path}.tmp"))
    return record


def host_down(state_dir: str, index_text: str) -> None:
    state = open_state(state_dir, create=False)
    if state is None:
        return
    index = parse_index(index_text)
    net_ = state.load_net()
    if net_ is None:
        log(f"no network recorded in {state.root}: host {index} is already down")
        return
    lock_index(state, index)
    hd = state.host_dir(index)
    if not (hd.exists() or net.netns_exists(net_.netns(index)) or net.link_exists(net_.veth(index))):
        log(f"host {index} is already down")
        drop_index_lock(state, index)
        return
    remove_host(state, net_, index)
    drop_index_lock(state, index)
    log(f"host {index} down")


def remove_host(state: State, net_: Net, index: int) -> None:
    """Tears down whatever exists of a host; safe on partial state and repeatable. The caller holds the
    index lock."""
    hd = state.host_dir(index)
    name = state.host_name(index)
    ns = net_.netns(index)
    _kill_host(state, index, ns)

    if hd.is_dir():
        for point in mounts_under(hd):
            if not net.succeeds("umount", point) and not _lazy_umount(point):
                log(f"host {index}: cannot unmount {point}")
    net.netns_down(net_, index)
    net.forget_neighbour(net_, index)

    if hd.is_dir():
        if mounts_under(hd):
            raise SimError(f"host {index}: mounts remain under {hd}; not removing it")
        remove_tree(hd)
    if name:
        state.record(name).unlink(missing_ok=True)
        state.known_hosts(name).unlink(missing_ok=True)
    # Catch files of a host whose name file was lost.
    for record in state.hosts.glob("*.json") if state.hosts.is_dir() else []:
        with contextlib.suppress(OSError):
            if f'"index": {index},' in record.read_text():
                record.unlink(missing_ok=True)
                record.with_name(record.name.removesuffix(".json") + ".known_hosts").unlink(missing_ok=True)


def _kill_host(state: State, index: int, ns: str) -> None:
    """SIGKILL: unshare ignores TERM, and --kill-child then kills the host's PID 1, which takes the whole
    PID namespace with it. Anything else still in the host's netns belongs to the host too."""
    hd = state.host_dir(index)
    pid = state.host_pid(index)
    if pid is not None and pid_alive(pid) and pid_is_host(pid, hd):
        _kill(pid)
    deadline = time.monotonic() + 10
    if net.netns_exists(ns):
        while pids := net.netns_pids(ns):
            for other in pids:
                _kill(other)
            if time.monotonic() >= deadline:
                log(f"host {index}: processes still in {ns} after SIGKILL: {' '.join(map(str, pids))}")
                break
            time.sleep(0.05)
    while pid is not None and pid_alive(pid) and pid_is_host(pid, hd) and time.monotonic() < deadline:
        time.sleep(0.05)


def _kill(pid: int) -> None:
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)


def _lazy_umount(point: str) -> bool:
    try:
        net.run("umount", "-l", point)
    except SimError:
        return False
    return True


def _mkdir(path: Path, mode: int) -> None:
    path.mkdir()
    path.chmod(mode)


def _write(path: Path, data: bytes, mode: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    path.chmod(mode)


def _replace(path: Path, text: str, tmp: Path) -> None:
    tmp.write_text(text)
    tmp.replace(path)
