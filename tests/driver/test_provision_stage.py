"""Provision and teardown (pav.stages.provision, pav.stages.teardown) in process.

A provisioning env here is the sim env's own variables and Terraform engine over a root of the same name
whose hosts are SSH servers on 127.0.0.1 (paramiko's, tests/terraform/test_nebius_driver.py) instead of
namespaces: Terraform applies and destroys for real, the driver waits for SSH, pins each host's key and
writes the inventory. Static envs: what resolve makes of the inventory, and the teardown paths that need
no playbook."""

from __future__ import annotations

import shutil
import socket
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import paramiko
import pytest

from pav.context import Options, RunContext
from pav.errors import PavError
from pav.provisioning import sim
from pav.stages import provision, teardown
from pav.yamlfile import load_mapping
from tests.conftest import ROOT
from tests.driver.contexts import context
from tests.driver.test_platforms import static_env
from tests.terraform.test_nebius_driver import FakeVm

SIM_ROOT = ROOT / "terraform" / "envs" / "sim"
HOSTS = """
resource "terraform_data" "host" {
  count = var.hosts
  input = { name = "fake-${var.cluster_id}-${count.index}" }
}

output "hosts" {
  value = {
    for i, h in terraform_data.host : h.input.name => {
      name = h.input.name, public_ip = "127.0.0.1", private_ip = "10.77.${var.subnet_index}.${10 + i}",
      ssh_user = "pav", ssh_port = local.ports[i], gpus = 0, fabric = "socket"
    }
  }
}
"""


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PAV_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


@pytest.fixture
def vms(state: Path) -> Iterator[list[FakeVm]]:
    """Two hosts that answer SSH to the env's own key (made as the sim env makes it, before the run)."""
    key = paramiko.Ed25519Key.from_private_key_file(str(sim.ssh_key(state)))
    made = [FakeVm(key), FakeVm(key)]
    yield made
    for vm in made:
        vm.stop.set()
        vm.sock.close()


def provisioning_env(tmp_path: Path, ports: list[int], **settings: object) -> RunContext:
    """A run of an env whose root, named sim, makes one host per port: the sim env's variables, the real
    root's variable declarations and Terraform settings, hosts on 127.0.0.1."""
    root = tmp_path / "sim"
    root.mkdir()
    for name in ("variables.tf", "versions.tf"):
        shutil.copy(SIM_ROOT / name, root / name)
    (root / "main.tf").write_text(f"locals {{\n  ports = {ports}\n}}\n{HOSTS}")
    inv = tmp_path / "inv"
    (inv / "group_vars").mkdir(parents=True)
    (inv / "group_vars" / "all.yml").write_text("pav_isolate: true\n")
    ctx = context(0, provisions=True, options=Options(hosts=len(ports), allow_missing=1), **settings)
    ctx.env = replace(ctx.env, name="fake", inventory_dir=inv, terraform_dir=root)
    ctx.run_dir = tmp_path / "run"
    return ctx


def test_provision_pins_each_host_and_teardown_destroys_them(
    tmp_path: Path, state: Path, vms: list[FakeVm]
) -> None:
    ports = [vms[0].port, vms[1].port, closed_port()]  # the third host never answers
    ctx = provisioning_env(tmp_path, ports, ssh_timeout_s=2)
    said = provision.run(ctx)
    assert ctx.provisioned == {"terraform": str(state)} and ctx.results.state_dir == str(state)
    names = list(load_mapping(ctx.inventory_file)["all"]["hosts"])  # type: ignore[arg-type]
    assert (
        said
        == (  # the hosts as a range (issue 65): NAME-0 and NAME-1 are NAME-[0-1]
            f"2 host(s) up: {names[0][:-1]}[0-1]; never answered SSH: {names[2]} (--allow-missing) "
            f"(state in {state})"
        )
    )
    # Each host's own key pinned, and every inventory host held to the pinned keys.
    pinned = (state / "known_hosts").read_text().splitlines()
    assert pinned == [
        f"[127.0.0.1]:{vm.port} {vm.host_key.get_name()} {vm.host_key.get_base64()}" for vm in vms
    ]
    inventory = load_mapping(ctx.inventory_file)["all"]["hosts"]  # type: ignore[arg-type]
    assert [h["ansible_port"] for h in inventory.values()] == ports
    assert all(
        f"UserKnownHostsFile={state / 'known_hosts'}" in h["ansible_ssh_common_args"]
        for h in inventory.values()
    )
    assert (ctx.inventory_file.parent / "group_vars" / "all.yml").is_file()  # type: ignore[union-attr]
    assert ctx.missing[names[2]].startswith("is unreachable: it never answered SSH within 2s")

    provision.resolve(ctx)
    assert ctx.host_names == names[:2]
    assert ctx.results.hosts[names[2]].status == "unreachable"

    assert teardown.run(ctx) == "destroyed 3 resource(s)"
    assert ctx.results.destroyed == [f"terraform_data.host[{i}]" for i in range(3)]
    assert not (state / "known_hosts").exists() and not sim.subnet_file(state).exists()
    assert teardown.run(ctx) == "nothing to destroy"


def test_a_provisioning_env_without_state_has_no_hosts(tmp_path: Path, state: Path) -> None:
    ctx = provisioning_env(tmp_path, [22])
    ctx.options.stages = ("validate", "collect", "report")
    with pytest.raises(PavError, match="env fake has no hosts; run with the provision stage first"):
        provision.resolve(ctx)
    ctx.options.stages = ("teardown", "report")  # a teardown of what is not there: nothing to resolve
    provision.resolve(ctx)
    assert ctx.inventory_file is None and ctx.hosts == []


def test_a_static_env_provisions_nothing_and_resolves_its_inventory(tmp_path: Path) -> None:
    ctx = static_env(tmp_path, Options())
    assert provision.run(ctx) == "static inventory: nothing to provision"
    ctx.missing = {"node-2": "is unreachable: no route to host"}
    provision.resolve(ctx)
    assert ctx.host_names == ["node-1"]
    assert {n: (r.address, r.status) for n, r in ctx.results.hosts.items()} == {
        "node-1": ("10.0.0.11", "unknown"), "node-2": ("10.0.0.12", "unreachable"),
    }  # fmt: skip


def test_an_env_with_no_hosts_file_asks_for_an_inventory(tmp_path: Path) -> None:
    ctx = static_env(tmp_path, Options())
    ctx.env = replace(ctx.env, hosts_file=None)
    with pytest.raises(PavError, match="env t has no hosts file; pass --inventory FILE"):
        provision.resolve(ctx)


def test_static_teardown_without_a_playbook(tmp_path: Path) -> None:
    """Hosts whose folder validate's playbook removed already are not visited again; no hosts, no work."""
    ctx = static_env(tmp_path, Options())
    assert teardown.run(ctx) == "no hosts: nothing to remove"
    provision.resolve(ctx)
    ctx.torn_down = {"node-1": True, "node-2": False}
    assert teardown.run(ctx) == "removed /var/lib/pav/runs/id on 1 of 2 host(s)"
    ctx.torn_down = {"node-1": False, "node-2": False}
    ctx.options.stages = ("teardown",)
    kept = "(a kept run's work goes with --stages teardown --run-dir ITS_RUN_DIR)"
    assert teardown.run(ctx) == f"/var/lib/pav/runs/id was on no host {kept}"


def test_a_per_host_remote_dir_reads_as_host(tmp_path: Path) -> None:
    ctx = static_env(tmp_path, Options(), remote_dir="/scratch/{{ inventory_hostname }}/pav")
    provision.resolve(ctx)
    ctx.torn_down = {"node-1": True, "node-2": True}
    assert teardown.run(ctx) == "removed /scratch/HOST/pav/runs/id on 2 of 2 host(s)"
