"""A k8s env's cluster: Terraform creates Nebius Managed Kubernetes with a GPU node group; its output is a
kubeconfig the driver writes into the state dir. Without a Terraform root, KUBECONFIG's cluster is used."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from pav.envs import EnvSpec
from pav.errors import PavError
from pav.provisioning import nebius
from pav.provisioning.state import state_dir
from pav.terraform import Terraform
from pav.yamlfile import load_mapping

# Keys a user may set in the env's values file (terraform.yml): those of the VM envs that apply to a
# node group, and the cluster's own.
_SHARED = ("parent_id", "infiniband_fabric", "subnet_id", "preset", "name_prefix", "boot_disk_size_gib",
           "boot_disk_type", "public_ip", "ssh_user", "labels", "max_lifetime_hours")  # fmt: skip
USER_KEYS: dict[str, type] = {
    **{k: nebius.USER_KEYS[k] for k in _SHARED},
    "k8s_version": str,
    "drivers_preset": str,
    "etcd_cluster_size": int,
}


def values(env: EnvSpec, environ: Mapping[str, str]) -> tuple[Path, dict[str, Any]]:
    path = nebius.tfvars_path(env.name, environ)
    if not path.is_file():
        raise PavError(
            f"{path}: no such file; copy terraform/envs/{env.name}/terraform.yml.example there and set "
            "parent_id, or point PAV_TFVARS at your file"
        )
    data = load_mapping(path)
    for key, value in data.items():
        if key in nebius.DRIVER_KEYS:
            raise PavError(f"{path}: {key} is set by the driver; remove that key")
        if key not in USER_KEYS:
            raise PavError(
                f"{path}: unknown key {key!r}; see terraform/envs/{env.name}/terraform.yml.example"
            )
        kind = USER_KEYS[key]
        ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
        if not ok:
            raise PavError(f"{path}: {key} must be {kind.__name__}, got {value!r}; fix that key")
    if not str(data.get("parent_id", "")).startswith("project-"):
        raise PavError(f"{path}: parent_id (your Nebius project ID, project-...) is required; add that key")
    return path, data


def preview(env: EnvSpec, workers: int) -> dict[str, Any]:
    """What apply would pass, without side effects; raises naming what is missing (credentials, values)."""
    nebius.check_credentials(os.environ)
    path, data = values(env, os.environ)
    return {**data, "node_count": workers, "values_file": str(path)}


def kubeconfig_path(env: EnvSpec) -> Path:
    if env.terraform_dir is None:
        explicit = os.environ.get("KUBECONFIG", "")
        return Path(explicit) if explicit else Path.home() / ".kube" / "config"
    return state_dir(env.name) / "kubeconfig"


def apply(env: EnvSpec, workers: int, run_id: str, max_hours: int | None = None) -> Path:
    assert env.terraform_dir is not None
    state = state_dir(env.name)
    auth = nebius.auth_mode(os.environ)  # first: nothing is made for a run that cannot authenticate
    _, data = values(env, os.environ)
    variables = {
        "name_prefix": f"pav-{hashlib.sha256(str(state.resolve()).encode()).hexdigest()[:6]}",
        **data,
        "max_lifetime_hours": nebius.lifetime_hours(data, max_hours),
        "node_count": workers,
        "ssh_public_key": nebius.ssh_public_key(state, env.name),
        "run_id": run_id,
        "nebius_auth": auth,
    }
    tf = Terraform(env.terraform_dir, state)
    tf.init()
    tf.apply(variables)
    return write_kubeconfig(tf.outputs(), kubeconfig_path(env))


def write_kubeconfig(outputs: dict[str, Any], path: Path) -> Path:
    """The root's kubeconfig output (no secret in it: kubectl gets a token through the nebius CLI)."""
    text = outputs.get("kubeconfig")
    if not isinstance(text, str) or "clusters" not in (yaml.safe_load(text) or {}):
        raise PavError("the Terraform root has no kubeconfig output; the cluster may not have come up")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o600)
    return path


def destroy(env: EnvSpec) -> list[str]:
    assert env.terraform_dir is not None
    tf = Terraform(env.terraform_dir, state_dir(env.name))
    if tf.state_file.exists():
        nebius.refresh_auth(tf.var_file, os.environ)
    destroyed = tf.destroy()
    kubeconfig_path(env).unlink(missing_ok=True)
    return destroyed
