"""The Nebius Managed Kubernetes Terraform (terraform/modules/nebius-mk8s-cluster, envs/nebius-mk8s),
with real Terraform and no Nebius provider (tests/terraform/tftree.py): what the node groups and
applications follow from the values, and the kubeconfig the root outputs, used as kubectl would."""

from __future__ import annotations

import base64
import json
import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from pav.envs import resolve_env
from pav.errors import PavError
from pav.k8s import provision
from pav.provisioning import nebius
from tests.terraform.tftree import (
    FAKE_CA,
    MODULES,
    apply_outputs,
    root_vars,
    stub_tree,
    terraform_env,
)

__all__ = ["terraform_env"]  # the autouse fixture: no user Terraform config leaks in

pytestmark = pytest.mark.slow  # real Terraform runs

MODULE = MODULES / "nebius-mk8s-cluster"
ENV = "nebius-eu-k8s"
# What the GPU node group, the system node group and the applications come out as, read from the module.
PROBE = {
    "nebius-mk8s-cluster": """
output "probe" {
  value = {
    node_os      = local.node_os
    applications = local.applications
    taints       = local.gpu_taints
    system       = module.base.spec.system_nodes
  }
}
""",
}


@pytest.fixture(scope="module")
def stub_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = stub_tree(tmp_path_factory.mktemp("mk8s"), "nebius-mk8s", PROBE)
    (root / "test_probe.tf").write_text('output "probe" {\n  value = module.cluster.probe\n}\n')
    return root


def test_module_declares_the_cluster_node_groups_and_applications() -> None:
    text = (MODULE / "main.tf").read_text()
    for needle in (
        'resource "nebius_mk8s_v1_cluster" "this"',
        'resource "nebius_mk8s_v1_node_group" "gpu"',
        'resource "nebius_mk8s_v1_node_group" "system"',
        "drivers_preset = local.v.drivers_preset",
        "= module.base.gpu_cluster",
        "= module.base.filesystems",
        "= local.gpu_taints",
        "public_endpoint = {}",
        # nvidia.com/gpu appears only with a device plugin (the node image brings the driver alone); RDMA
        # in pods on a fabric needs the network operator, only when the nodes join a GPU cluster
        'resource "nebius_applications_v1alpha1_k8s_release" "this"',
        "for_each   = local.applications",
        "= local.node_os",
    ):
        assert needle in text, needle


@pytest.mark.parametrize(
    ("changes", "os", "applications", "taints", "system"),
    [
        (
            {"drivers_preset": "cuda12.8"},
            "ubuntu24.04",
            ["network-operator", "nvidia-device-plugin"],
            [{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}],
            1,
        ),
        (
            {"node_count": 1, "infiniband_fabric": "", "system_node_count": 0},
            None,
            ["nvidia-device-plugin"],
            [],
            0,
        ),
    ],
)
def test_node_groups_and_applications_follow_the_values(
    stub_root: Path,
    changes: dict[str, Any],
    os: str | None,
    applications: list[str],
    taints: list[dict[str, str]],
    system: int,
) -> None:
    """The cuda12.8 driver preset exists only on Ubuntu 24.04 node images (the others keep Nebius' default);
    the device plugin always (nvidia.com/gpu), the network operator when the nodes join a fabric; GPU
    nodes are tainted for GPU pods only while a CPU node group is there to take the system pods."""
    probe = apply_outputs(stub_root, root_vars(**changes))["probe"]
    assert probe.get("node_os") == os
    assert sorted(probe["applications"]) == applications
    assert probe["taints"] == taints
    assert probe["system"]["count"] == system and probe["system"]["platform"].startswith("cpu-")


def test_env_outputs_a_kubeconfig_kubectl_can_use(stub_root: Path, tmp_path: Path) -> None:
    outputs = apply_outputs(stub_root, root_vars(name_prefix="pav-t"))
    assert outputs["cluster"]["gpus_per_node"] == 8
    assert outputs["cluster"]["gpu_cluster_id"] == "computegpucluster-fake"
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
    # Service-account mode: no token in the environment; the nebius CLI's profile for the account gives it.
    # (The CLI is not installed here: a script answers the one call the plugin makes, only as it is made.)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nebius").write_text(
        '#!/bin/sh\n[ "$*" = "iam get-access-token --profile pav sa" ] && echo t1.from-profile || exit 3\n'
    )
    (bin_dir / "nebius").chmod(0o755)
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "PAV_NEBIUS_PROFILE": "pav sa"}
    out = subprocess.run([exec_["command"], *exec_["args"]], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["status"]["token"] == "t1.from-profile"


def test_service_account_mode_needs_a_cli_profile_for_kubectl(tmp_path: Path) -> None:
    """Terraform takes the service account's key; kubectl cannot: the run stops before anything exists."""
    pem = tmp_path / "key.pem"
    pem.write_text("-----BEGIN PRIVATE KEY-----\nx\n-----END PRIVATE KEY-----\n")
    sa = {"NEBIUS_SERVICE_ACCOUNT_ID": "serviceaccount-e00a", "NEBIUS_PUBLIC_KEY_ID": "publickey-e00a"}
    sa["NEBIUS_PRIVATE_KEY_FILE"] = str(pem)
    with pytest.raises(PavError) as exc:
        provision.check_kubectl_auth(sa)
    assert "\n" not in str(exc.value)
    assert "PAV_NEBIUS_PROFILE" in str(exc.value) and "nebius profile create" in str(exc.value)
    provision.check_kubectl_auth({**sa, "PAV_NEBIUS_PROFILE": "pav-sa"})
    provision.check_kubectl_auth({"NEBIUS_IAM_TOKEN": "t1.x"})


def test_driver_values_file_is_checked_key_by_key(tmp_path: Path) -> None:
    """The mk8s env takes the keys nebius-spec reads for node groups, not the VM-only ones."""
    env = resolve_env(ENV)
    values = tmp_path / "terraform.yml"

    def load(text: str) -> dict[str, Any]:
        values.write_text("parent_id: project-e00abc123\n" + text)
        return nebius.load_user_values(values, env)

    with pytest.raises(PavError, match="unknown key 'boot_image_family'"):
        load("boot_image_family: ubuntu22.04-cuda12\n")
    with pytest.raises(PavError, match="node_count is set by the driver"):
        load("node_count: 3\n")
    with pytest.raises(PavError, match="etcd_cluster_size must be a whole number"):
        load("etcd_cluster_size: three\n")
    with pytest.raises(PavError, match=r"region is fixed by inventories/nebius-eu-k8s/provision\.yml"):
        load("region: eu-west1\n")
    assert load("drivers_preset: cuda12.8\nsystem_node_count: 0\n")["drivers_preset"] == "cuda12.8"
