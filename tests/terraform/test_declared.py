"""What a Terraform root would create, read offline (pav.terraform_declared): the dry run lists it. Read
from the real roots of terraform/envs, and from a small root for what is left out."""

from __future__ import annotations

from pathlib import Path

from pav.terraform_declared import declared_resources
from tests.conftest import ROOT

ENVS = ROOT / "terraform" / "envs"


def test_the_sim_root_makes_a_network_and_its_hosts() -> None:
    assert declared_resources(ENVS / "sim") == ["terraform_data.network", "terraform_data.host"]


def test_a_vm_cluster_lists_the_resources_of_the_modules_it_calls() -> None:
    found = declared_resources(ENVS / "nebius-vm")
    assert "module.cluster.nebius_compute_v1_instance.node" in found
    base = "module.cluster.module.base."
    assert {f"{base}nebius_vpc_v1_subnet.this", f"{base}nebius_compute_v1_gpu_cluster.this"} <= set(found)
    assert all(r.startswith("module.cluster.") for r in found)
    assert not any("nebius_mk8s" in r for r in found)


def test_a_kubernetes_cluster_lists_its_node_groups() -> None:
    found = declared_resources(ENVS / "nebius-mk8s")
    assert {
        "module.cluster.nebius_mk8s_v1_node_group.gpu",
        "module.cluster.nebius_mk8s_v1_node_group.system",
    } <= set(found)
    assert not any(".nebius_compute_v1_instance." in r for r in found)


def test_data_sources_and_registry_modules_are_not_listed(tmp_path: Path) -> None:
    root, child = tmp_path / "root", tmp_path / "modules" / "net"
    root.mkdir()
    child.mkdir(parents=True)
    (root / "main.tf").write_text(
        'data "http" "ip" {\n  url = "https://example.com"\n}\n'
        'resource "null_resource" "a" {}\n'
        'module "net" {\n  source = "../modules/net"\n  cidr   = "10.0.0.0/24"\n}\n'
        'module "remote" {\n  source  = "terraform-aws-modules/vpc/aws"\n  version = "5.0.0"\n}\n'
    )
    (root / "b.tf").write_text('  resource "null_resource" "b" {\n}\n')
    (child / "main.tf").write_text('resource "null_resource" "subnet" {}\n')
    assert declared_resources(root) == [
        "null_resource.b",
        "null_resource.a",
        "module.net.null_resource.subnet",
    ]
