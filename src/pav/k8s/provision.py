"""A k8s env's cluster: Terraform creates Nebius Managed Kubernetes with a GPU node group; its output is a
kubeconfig the driver writes into the state dir. Without a Terraform root, KUBECONFIG's cluster is used."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from pav.envs import EnvSpec
from pav.errors import PavError
from pav.paths import make_private
from pav.provisioning import nebius
from pav.terraform import Terraform


def kubeconfig_path(env: EnvSpec) -> Path:
    if env.terraform_dir is None:
        explicit = os.environ.get("KUBECONFIG", "")
        return Path(explicit) if explicit else Path.home() / ".kube" / "config"
    return env.state_dir / "kubeconfig"


# kubectl's token in service-account mode: the kubeconfig's exec plugin asks the nebius CLI, with the
# profile this names (one made for the service account: `nebius profile create --service-account-file`).
CLI_PROFILE = "PAV_NEBIUS_PROFILE"


def check_kubectl_auth(environ: Mapping[str, str]) -> None:
    """Terraform takes a service account's key itself; kubectl cannot, so say so before anything exists."""
    if nebius.auth_mode(environ) != "service_account" or environ.get(CLI_PROFILE, "").strip():
        return
    raise PavError(
        f"kubectl needs a token the service account's key cannot give it directly: make a nebius CLI profile "
        f"for the service account (nebius iam auth-public-key generate --service-account-id SA --output "
        f"creds.json; nebius profile create --endpoint api.nebius.cloud --service-account-file creds.json "
        f"--profile NAME) and set {CLI_PROFILE}=NAME, or set NEBIUS_IAM_TOKEN"
    )


def apply(env: EnvSpec, workers: int, run_id: str, max_hours: int | None = None) -> Path:
    assert env.terraform_dir is not None
    check_kubectl_auth(os.environ)
    state = env.state_dir
    variables = nebius.variables(state, env, workers, run_id=run_id, max_hours=max_hours)
    tf = Terraform(env.terraform_dir, state)
    tf.init()
    tf.apply(variables)
    return write_kubeconfig(tf.outputs(), kubeconfig_path(env))


def write_kubeconfig(outputs: dict[str, Any], path: Path) -> Path:
    """The root's kubeconfig output (no secret in it: each kubectl call gets a token from NEBIUS_IAM_TOKEN or
    the nebius CLI)."""
    text = outputs.get("kubeconfig")
    if not isinstance(text, str) or "clusters" not in (yaml.safe_load(text) or {}):
        raise PavError("the Terraform root has no kubeconfig output; the cluster may not have come up")
    make_private(path.parent)
    path.write_text(text)
    path.chmod(0o600)
    return path


def destroy(env: EnvSpec) -> list[str]:
    assert env.terraform_dir is not None
    tf = Terraform(env.terraform_dir, env.state_dir)
    if tf.state_file.exists():
        nebius.refresh_auth(tf.var_file, os.environ)
    destroyed = tf.destroy()
    kubeconfig_path(env).unlink(missing_ok=True)
    return destroyed
