"""New hosts' SSH (pav.provisioning.ssh): every host waited for at once, the key each one showed pinned
(trust on first use), silent hosts named, up to --allow-missing of them let go. The hosts are real SSH
servers on 127.0.0.1 (paramiko's, as tests/terraform/test_nebius_driver.py runs them) or closed ports."""

from __future__ import annotations

import signal
import socket
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import paramiko
import pytest

from pav.errors import Interrupted, PavError
from pav.provisioning.hosts import ProvisionedHost
from pav.provisioning.ssh import PinnedKey, open_client, wait_and_pin
from tests.driver.signals import pav_handlers
from tests.terraform.test_nebius_driver import FakeVm

WAIT_S = 1.5  # for hosts that never answer: one try, the pause after it, and the deadline


@pytest.fixture
def key(tmp_path: Path) -> tuple[Path, paramiko.PKey]:
    made = paramiko.ECDSAKey.generate()
    path = tmp_path / "id_ecdsa"
    made.write_private_key_file(str(path))
    return path, made


@pytest.fixture
def vms(key: tuple[Path, paramiko.PKey]) -> Iterator[list[FakeVm]]:
    made = [FakeVm(key[1]), FakeVm(key[1])]
    yield made
    for vm in made:
        vm.stop.set()
        vm.sock.close()


def host(vm: FakeVm, name: str) -> ProvisionedHost:
    return ProvisionedHost(name, "127.0.0.1", "10.0.0.5", "pav", ssh_port=vm.port)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


DEAD = ProvisionedHost("dead", "127.0.0.1", "10.0.0.9", "pav", ssh_port=closed_port())


def test_the_key_each_host_showed_is_pinned(
    tmp_path: Path, key: tuple[Path, paramiko.PKey], vms: list[FakeVm]
) -> None:
    known = tmp_path / "state" / "known_hosts"
    assert wait_and_pin([host(vms[0], "a"), host(vms[1], "b")], key[0], known, 20) == {}
    assert known.read_text() == "".join(
        f"[127.0.0.1]:{vm.port} {vm.host_key.get_name()} {vm.host_key.get_base64()}\n" for vm in vms
    )
    assert vms[0].commands == vms[1].commands == ["true"]
    # Later connections hold the host to its pinned key: the same key passes, another is refused.
    open_client(host(vms[0], "a"), key[0], known, 5).close()
    other = tmp_path / "other_known_hosts"
    vms[1].known_hosts(other)  # vm b's key where vm a's should be
    other.write_text(other.read_text().replace(str(vms[1].port), str(vms[0].port)))
    with pytest.raises(paramiko.BadHostKeyException):
        open_client(host(vms[0], "a"), key[0], other, 5)


def test_a_silent_host_stops_the_run_naming_it(
    tmp_path: Path, key: tuple[Path, paramiko.PKey], vms: list[FakeVm]
) -> None:
    with pytest.raises(PavError) as exc:
        wait_and_pin([host(vms[0], "a"), DEAD], key[0], tmp_path / "known_hosts", WAIT_S)
    message = str(exc.value)
    assert message.startswith(f"host dead (127.0.0.1:{DEAD.ssh_port}) did not answer SSH within 2s: ")
    hint = (
        "check that it booted and that the port is reachable, or pass --allow-missing 1 to go on without it"
    )
    assert message.endswith(hint)
    # The hosts that answered are pinned all the same: teardown and a later run reach them.
    assert (tmp_path / "known_hosts").read_text().startswith(f"[127.0.0.1]:{vms[0].port} ")


def test_allow_missing_lets_a_silent_host_go(
    tmp_path: Path, key: tuple[Path, paramiko.PKey], vms: list[FakeVm]
) -> None:
    silent = wait_and_pin(
        [host(vms[0], "a"), DEAD], key[0], tmp_path / "known_hosts", WAIT_S, allow_missing=1
    )
    assert list(silent) == ["dead"] and "did not answer SSH" in silent["dead"]
    assert len((tmp_path / "known_hosts").read_text().splitlines()) == 1


def test_when_no_host_answers_there_is_no_allow_missing_hint(
    tmp_path: Path, key: tuple[Path, paramiko.PKey]
) -> None:
    with pytest.raises(PavError) as exc:
        wait_and_pin([DEAD, replace(DEAD, name="dead-2")], key[0], tmp_path / "known_hosts", WAIT_S)
    assert "(and 1 more host(s))" in str(exc.value) and "--allow-missing" not in str(exc.value)


def test_an_interrupt_stops_the_wait(tmp_path: Path, key: tuple[Path, paramiko.PKey]) -> None:
    with pav_handlers():
        signal.raise_signal(signal.SIGINT)
        with pytest.raises(Interrupted):
            wait_and_pin([DEAD], key[0], tmp_path / "known_hosts", 60)


def test_a_known_hosts_line_brackets_a_port_other_than_22() -> None:
    on_22 = ProvisionedHost("a", "192.0.2.1", "10.0.0.1", "root")
    assert PinnedKey(on_22, "ssh-ed25519", "AAAA").known_hosts_line() == "192.0.2.1 ssh-ed25519 AAAA"
    on_2222 = ProvisionedHost("a", "192.0.2.1", "10.0.0.1", "root", ssh_port=2222)
    assert PinnedKey(on_2222, "ssh-ed25519", "AAAA").known_hosts_line() == "[192.0.2.1]:2222 ssh-ed25519 AAAA"
