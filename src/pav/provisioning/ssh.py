"""Wait until every new host answers SSH, and pin the host key each one showed (trust on first use)."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pav import interrupts
from pav.errors import PavError
from pav.provisioning.hosts import ProvisionedHost

if TYPE_CHECKING:
    import paramiko


@dataclass(frozen=True)
class PinnedKey:
    host: ProvisionedHost
    key_type: str
    key_b64: str

    def known_hosts_line(self) -> str:
        h = self.host
        where = h.public_ip if h.ssh_port == 22 else f"[{h.public_ip}]:{h.ssh_port}"
        return f"{where} {self.key_type} {self.key_b64}"


def wait_and_pin(
    hosts: list[ProvisionedHost], key: Path, known_hosts: Path, timeout_s: float, allow_missing: int = 0
) -> dict[str, str]:
    """Wait for every host's SSH at once and pin the keys of those that answered. Up to allow_missing hosts
    may stay silent: they are returned (name -> why) with no key pinned, so the configure stage finds them
    unreachable and the run goes on without them; one more stops the run here."""
    with ThreadPoolExecutor(max_workers=min(16, len(hosts) or 1)) as pool:
        outcomes = list(pool.map(lambda h: _wait_or_why(h, key, timeout_s), hosts))
    pinned = [o for o in outcomes if isinstance(o, PinnedKey)]
    silent = {h.name: o for h, o in zip(hosts, outcomes, strict=True) if isinstance(o, str)}
    known_hosts.parent.mkdir(parents=True, exist_ok=True)
    known_hosts.write_text("".join(p.known_hosts_line() + "\n" for p in pinned))
    interrupts.raise_if_requested()
    if len(silent) > allow_missing:
        first = next(iter(silent.values()))
        more = f" (and {len(silent) - 1} more host(s))" if len(silent) > 1 else ""
        some_answered = len(silent) < len(hosts)
        hint = f", or pass --allow-missing {len(silent)} to go on without it" if some_answered else ""
        raise PavError(f"{first}{more}{hint}")
    return silent


def _wait_or_why(host: ProvisionedHost, key: Path, timeout_s: float) -> PinnedKey | str:
    try:
        return _wait_one(host, key, timeout_s)
    except PavError as exc:
        return str(exc)


def _wait_one(host: ProvisionedHost, key: Path, timeout_s: float) -> PinnedKey:
    import paramiko  # here, not at the top: most runs never speak SSH from the driver (0.1 s of every start)

    deadline = time.monotonic() + timeout_s
    last = "no answer"
    while time.monotonic() < deadline:
        if interrupts.requested():
            raise PavError(f"host {host.name}: the run was interrupted before it answered SSH")
        try:
            return _connect(host, key)
        except (OSError, paramiko.SSHException, EOFError) as exc:
            last = str(exc) or type(exc).__name__
        time.sleep(1)
    raise PavError(
        f"host {host.name} ({host.public_ip}:{host.ssh_port}) did not answer SSH within {timeout_s:.0f}s: "
        f"{last}; check that it booted and that the port is reachable"
    )


def open_client(
    host: ProvisionedHost, key: Path, known_hosts: Path | None, timeout_s: float
) -> paramiko.SSHClient:
    """A connected client: to a new host (``known_hosts`` None: its key is learned), or to one whose key is
    pinned in ``known_hosts`` (any other key is refused). The caller closes it."""
    import paramiko

    client = paramiko.SSHClient()
    if known_hosts is None:
        client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
    else:
        client.load_host_keys(str(known_hosts))
        client.set_missing_host_key_policy(paramiko.RejectPolicy())
    try:
        client.connect(
            host.public_ip,
            port=host.ssh_port,
            username=host.ssh_user,
            key_filename=str(key),
            timeout=timeout_s,
            banner_timeout=timeout_s,
            auth_timeout=timeout_s,
            allow_agent=False,
            look_for_keys=False,
        )
    except TimeoutError as exc:
        client.close()
        raise OSError("timed out") from exc
    except BaseException:
        client.close()
        raise
    return client


def _connect(host: ProvisionedHost, key: Path) -> PinnedKey:
    # The host is new: its key is learned here and pinned for every later connection of the run.
    client = open_client(host, key, None, 5)
    try:
        _, stdout, _ = client.exec_command("true", timeout=10)
        stdout.channel.recv_exit_status()
        server_key = client.get_transport().get_remote_server_key()
        return PinnedKey(host, server_key.get_name(), server_key.get_base64())
    except TimeoutError as exc:
        raise OSError("timed out") from exc
    finally:
        client.close()
