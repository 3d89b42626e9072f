"""A host that shows another key than the one pinned for it is refused: provisioned hosts' keys are pinned
(StrictHostKeyChecking=yes with the env's known_hosts, in the generated inventory), and nothing in the
repository turns host key checking off."""

from __future__ import annotations

import shutil
import subprocess

import pytest
import yaml

from tests.conftest import ROOT, assert_one_line_error
from tests.faults.conftest import Configured, Sandbox

pytestmark = pytest.mark.slow

# Ways to switch host key checking off, in ssh options, Ansible settings and paramiko.
DISABLING = (
    "StrictHostKeyChecking=no",
    "StrictHostKeyChecking no",
    "StrictHostKeyChecking=accept-new",
    "UserKnownHostsFile=/dev/null",
    "host_key_checking = False",
    "host_key_checking: false",
    "HOST_KEY_CHECKING=False",
    "AutoAddPolicy",
    "WarningPolicy",
)
ALLOWED = {
    # The one place a key is learned rather than checked: a host's first answer right after Terraform made
    # it, pinned then for every later connection (trust on first use).
    "src/pav/provisioning/ssh.py": ["AutoAddPolicy"],
    "tests/sim/test_mpi_on_sim.py": ["StrictHostKeyChecking no"],  # asserts it is absent
}


def test_generated_inventory_pins_every_host(configured: Configured) -> None:
    state = configured.box.state
    hosts = yaml.safe_load(configured.inventory(0, 1, 2).read_text())["all"]["hosts"]
    pinned = (state / "known_hosts").read_text().splitlines()
    assert len(pinned) == len(hosts) == 3
    for name, host in hosts.items():
        if not (state / "sim" / "hosts" / f"{name}.known_hosts").exists():
            continue  # host 2 after test_host_dies killed it
        assert host["ansible_ssh_common_args"] == (
            f"-o UserKnownHostsFile={state / 'known_hosts'} -o StrictHostKeyChecking=yes"
        )
        # The key pinned is the one the host made for itself (sim-hosts records it from inside the host).
        own = (state / "sim" / "hosts" / f"{name}.known_hosts").read_text().split()
        assert f"{host['ansible_host']} {own[1]} {own[2]}" in pinned


def test_changed_host_key_is_refused(configured: Configured, sandbox: Sandbox) -> None:
    """Host 0's pinned key swapped for host 1's: Ansible must refuse host 0 (before the fix, ansible-runner's
    ANSIBLE_HOST_KEY_CHECKING=False put StrictHostKeyChecking=no ahead of the inventory's options)."""
    state = configured.box.state
    host0, host1, _ = configured.names
    shutil.copytree(configured.inventory(0, 1).parent, sandbox.base / "inv")
    inventory = sandbox.base / "inv" / "hosts.yml"
    hosts = yaml.safe_load(inventory.read_text())["all"]["hosts"]
    lines = (state / "known_hosts").read_text().splitlines()
    by_addr = {ln.split()[0]: ln.split(maxsplit=1)[1] for ln in lines}
    addr0, addr1 = hosts[host0]["ansible_host"], hosts[host1]["ansible_host"]
    tampered = sandbox.base / "known_hosts"
    tampered.write_text(f"{addr0} {by_addr[addr1]}\n{addr1} {by_addr[addr1]}\n")
    for host in hosts.values():
        host["ansible_ssh_common_args"] = f"-o UserKnownHostsFile={tampered} -o StrictHostKeyChecking=yes"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": hosts}}))
    run = sandbox.cli(
        "--inventory", str(inventory), "--stages", "configure", "--tests", "torch_gloo_allreduce"
    )
    assert_one_line_error(
        run, f"host {host0} is unreachable", "REMOTE HOST IDENTIFICATION HAS CHANGED", documented=True
    )
    assert sandbox.left(("run",)) == []


def test_nothing_turns_checking_off() -> None:
    files = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    found = []
    for name in files:
        path = ROOT / name
        if name.startswith("tests/faults/") or not path.is_file():
            continue
        text = path.read_text(errors="replace")
        found += [f"{name}: {bad}" for bad in DISABLING if bad in text and bad not in ALLOWED.get(name, [])]
    assert found == []
