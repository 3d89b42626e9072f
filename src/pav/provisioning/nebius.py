"""Nebius envs (terraform/envs/nebius-*): credentials from the environment only, the user's values from a
file, and every node's cloud-init seen finished over the pinned host keys before Ansible starts."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from pav import interrupts, paths
from pav.envs import EnvSpec
from pav.errors import PavError
from pav.provisioning.hosts import ProvisionedHost
from pav.provisioning.ssh import open_client
from pav.yamlfile import load_mapping

TOKEN = "NEBIUS_IAM_TOKEN"  # read by the provider itself
# The provider has no default names for these: the env roots' provider block names them (*_env).
SERVICE_ACCOUNT = ("NEBIUS_SERVICE_ACCOUNT_ID", "NEBIUS_PUBLIC_KEY_ID", "NEBIUS_PRIVATE_KEY_FILE")
_SA_HINT = {
    "NEBIUS_SERVICE_ACCOUNT_ID": "the service account's ID, serviceaccount-...",
    "NEBIUS_PUBLIC_KEY_ID": "its authorized key's ID, publickey-...",
    "NEBIUS_PRIVATE_KEY_FILE": "the path of that key's private PEM file",
}
_TOKEN_HOW = f"export {TOKEN}=$(nebius iam get-access-token)"

DEFAULT_LIFETIME_HOURS = 12
# Keys a user may set in the values file, with their YAML types, by Terraform root: the keys
# terraform/modules/nebius-spec reads for that kind of cluster. Everything else is refused, so a typo
# fails here instead of being dropped by Terraform's type conversion.
_COMMON_KEYS: dict[str, type] = {
    "parent_id": str,
    "infiniband_fabric": str,
    "subnet_id": str,
    "preset": str,
    "name_prefix": str,
    "boot_disk_size_gib": int,
    "boot_disk_type": str,
    "public_ip": bool,
    "ssh_user": str,
    "shared_filesystem_id": str,
    "shared_filesystem_size_gib": int,
    "shared_filesystem_type": str,
    "shared_filesystem_mount": str,
    "labels": dict,
    "max_lifetime_hours": int,
}
USER_KEYS: dict[str, dict[str, type]] = {
    "nebius-vm": {**_COMMON_KEYS, "boot_image_family": str, "boot_image_parent_id": str},
    "nebius-mk8s": {
        **_COMMON_KEYS,
        "k8s_version": str,
        "drivers_preset": str,
        "etcd_cluster_size": int,
        "system_node_count": int,
    },
}
REQUIRED_KEYS = ("parent_id",)
DRIVER_KEYS = ("node_count", "ssh_public_key", "run_id", "nebius_auth", "values")


@dataclass(frozen=True)
class CredentialSet:
    auth: str  # the env root's nebius_auth value
    variables: tuple[str, ...]
    how: str


def required_environment() -> tuple[CredentialSet, ...]:
    """Either set is enough; the token wins when both are there, as in the provider."""
    return (
        CredentialSet("token", (TOKEN,), _TOKEN_HOW),
        CredentialSet("service_account", SERVICE_ACCOUNT, "an authorized key of a service account"),
    )


def check_credentials(env: Mapping[str, str]) -> None:
    auth_mode(env)


def auth_mode(env: Mapping[str, str]) -> str:
    """Which credential set the environment holds: raises naming exactly what is missing."""
    if env.get(TOKEN, "").strip():
        return "token"
    missing = [name for name in SERVICE_ACCOUNT if not env.get(name, "").strip()]
    if len(missing) == len(SERVICE_ACCOUNT):
        raise PavError(
            f"no Nebius credentials: {TOKEN} is not set; {_TOKEN_HOW}, or set "
            f"{', '.join(SERVICE_ACCOUNT)} for a service account"
        )
    if missing:
        hints = "; ".join(f"{name}: {_SA_HINT[name]}" for name in missing)
        raise PavError(
            f"Nebius service account credentials incomplete: {' and '.join(missing)} not set ({hints}); "
            f"set {'them' if len(missing) > 1 else 'it'}, or use {TOKEN} instead"
        )
    key_file = Path(env["NEBIUS_PRIVATE_KEY_FILE"])
    if not key_file.is_file() or not os.access(key_file, os.R_OK):
        raise PavError(
            f"NEBIUS_PRIVATE_KEY_FILE={key_file}: no readable file there; "
            "point it at the private PEM file of the service account's authorized key"
        )
    return "service_account"


def tfvars_path(env_name: str, env: Mapping[str, str]) -> Path:
    explicit = env.get("PAV_TFVARS")
    return Path(explicit) if explicit else paths.INVENTORIES / env_name / "terraform.yml"


def lifetime_hours(user: Mapping[str, Any], max_hours: int | None) -> Any:
    """What the pav-expires-at label counts from creation: --max-hours, else the values file's, else 12."""
    return max_hours if max_hours is not None else user.get("max_lifetime_hours", DEFAULT_LIFETIME_HOURS)


def variables(
    state_dir: Path,
    env: EnvSpec,
    hosts: int,
    tfvars_file: Path | None = None,
    *,
    run_id: str | None = None,
    environ: Mapping[str, str] | None = None,
    max_hours: int | None = None,
) -> dict[str, Any]:
    """The root's variables: nebius_auth, and values = the env's, the user's and the driver's. Never a
    credential."""
    environ = os.environ if environ is None else environ
    auth = auth_mode(environ)  # first: nothing is made for a run that cannot authenticate
    if not 1 <= hosts <= 64:
        raise PavError(f"--hosts {hosts}: a Nebius env makes 1 to 64 nodes")
    path = tfvars_file or tfvars_path(env.name, environ)
    user = load_user_values(path, env)
    _refuse_secrets(user, path, environ)
    digest = hashlib.sha256(str(state_dir.resolve()).encode()).hexdigest()
    values = {
        # Two state dirs in one project must not collide on names (VMs, disks, networks).
        "name_prefix": f"pav-{digest[:6]}",
        **_merged(env, user, hosts, max_hours),
        "ssh_public_key": ssh_public_key(state_dir, env.name),
        "run_id": run_id or f"{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}-{env.name}",
    }
    return {"nebius_auth": auth, "values": values}


def preview(env: EnvSpec, hosts: int, max_hours: int | None = None) -> dict[str, Any]:
    """What apply would pass, without side effects (no key made); raises naming what is missing."""
    check_credentials(os.environ)
    path = tfvars_path(env.name, os.environ)
    return {**_merged(env, load_user_values(path, env), hosts, max_hours), "values_file": str(path)}


def _merged(env: EnvSpec, user: Mapping[str, Any], hosts: int, max_hours: int | None) -> dict[str, Any]:
    """provision.yml's defaults, the user's values over them, provision.yml's fixed values, the counts."""
    return {
        **env.terraform_defaults,
        **user,
        **env.terraform_values,
        "max_lifetime_hours": lifetime_hours(user, max_hours),
        "node_count": hosts,
    }


def load_user_values(path: Path, env: EnvSpec) -> dict[str, Any]:
    example = env.inventory_dir / "terraform.yml.example"
    if not path.is_file():
        raise PavError(
            f"{path}: no such file; copy {_shown(example)} there and set parent_id, or point PAV_TFVARS at "
            "your file"
        )
    root = env.terraform_dir.name if env.terraform_dir else ""
    allowed = USER_KEYS.get(root)
    if allowed is None:
        known = ", ".join(USER_KEYS)
        raise PavError(f"env {env.name}: root {root!r} takes no Nebius values file; name one of {known}")
    data = load_mapping(path)
    for key, value in data.items():
        if key in DRIVER_KEYS:
            raise PavError(f"{path}: {key} is set by the driver; remove that key")
        if key in env.terraform_values:
            fixed_by = _shown(env.inventory_dir / "provision.yml")
            raise PavError(f"{path}: {key} is fixed by {fixed_by} for env {env.name}; remove that key")
        if key not in allowed:
            raise PavError(f"{path}: unknown key {key!r}; see {_shown(example)}")
        if not _is_kind(value, allowed[key]):
            raise PavError(f"{path}: {key} must be {_KIND[allowed[key]]}, got {value!r}; fix that key")
    for key in REQUIRED_KEYS:
        if not data.get(key):
            raise PavError(f"{path}: {key} is required (your Nebius project ID, project-...); add that key")
    if not str(data["parent_id"]).startswith("project-"):
        raise PavError(f"{path}: parent_id must be a project ID (project-...), got {data['parent_id']!r}")
    return data


def _shown(path: Path) -> str:
    """A path of the checkout as users see it in the docs (inventories/...), others as they are."""
    try:
        return str(path.relative_to(paths.ROOT))
    except ValueError:
        return str(path)


_KIND = {str: "a string", int: "a whole number", bool: "true or false", dict: "a mapping of string to string"}


def _is_kind(value: Any, kind: type) -> bool:
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind is dict:
        return isinstance(value, dict) and all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        )
    return isinstance(value, kind)


def _refuse_secrets(user: Mapping[str, Any], path: Path, env: Mapping[str, str]) -> None:
    """The var file lands in the state dir and in logs of failed runs: a token pasted into it must not."""
    token = env.get(TOKEN, "").strip()
    if token and token in json.dumps(user):
        raise PavError(f"{path}: holds the value of {TOKEN}; credentials belong in the environment only")


def refresh_auth(var_file: Path, env: Mapping[str, str]) -> None:
    """Destroy reuses apply's var file: make its nebius_auth match the credentials present now, and
    raise naming the missing one before Terraform fails on it with less to go on."""
    auth = auth_mode(env)
    if var_file.is_file():
        data = json.loads(var_file.read_text())
        data["nebius_auth"] = auth
        var_file.write_text(json.dumps(data, indent=2))


def private_key(state_dir: Path) -> Path:
    return state_dir / "ssh" / "id_ed25519"  # where sim keeps its key too


def ssh_public_key(state_dir: Path, env_name: str) -> str:
    """One key pair per state dir, made without ssh-keygen; returns the public line."""
    key = private_key(state_dir)
    if not key.exists():
        key.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        pem = Ed25519PrivateKey.generate().private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
        )
        # Made 0600 by mkstemp (never readable by others, not even for a moment), then renamed: a key file
        # that exists is always complete.
        fd, tmp = tempfile.mkstemp(dir=key.parent, prefix=".id_ed25519.")
        with os.fdopen(fd, "wb") as out:
            out.write(pem)
        os.replace(tmp, key)
    public = serialization.load_ssh_private_key(key.read_bytes(), password=None).public_key()
    openssh = public.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    line = f"{openssh.decode()} pav-{env_name}"
    key.with_suffix(".pub").write_text(line + "\n")  # for people who ssh in by hand
    return line


def wait_cloud_init(hosts: list[ProvisionedHost], key: Path, known_hosts: Path, timeout_s: float) -> None:
    """SSH answers before cloud-init is done (packages, mounts): wait for it on every host."""
    if not known_hosts.is_file():
        raise PavError(
            f"{known_hosts} does not exist; wait for SSH (provisioning/ssh.py) pins host keys first"
        )
    deadline = time.monotonic() + timeout_s
    for host in hosts:
        _wait_one(host, key, known_hosts, deadline, timeout_s)


def _wait_one(host: ProvisionedHost, key: Path, known_hosts: Path, deadline: float, timeout_s: float) -> None:
    import paramiko  # here, not at the top: only a Nebius run needs it (0.1 s of every start)

    last = "no answer"
    while time.monotonic() < deadline:
        interrupts.raise_if_requested()
        try:
            rc, output = _cloud_init_status(host, key, known_hosts, deadline)
        except paramiko.BadHostKeyException:
            raise PavError(
                f"host {host.name} ({host.public_ip}) showed a host key other than the one pinned in "
                f"{known_hosts}; refusing to connect (re-provision, or remove the host from that file)"
            ) from None
        except (OSError, paramiko.SSHException, EOFError) as exc:
            if "not found in known_hosts" in str(exc):
                raise PavError(
                    f"host {host.name} ({host.public_ip}) has no pinned key in {known_hosts}; "
                    "wait for SSH (provisioning/ssh.py) pins it first"
                ) from None
            last = str(exc) or type(exc).__name__
            time.sleep(2)  # a reboot inside cloud-init drops the session; try again
            continue
        if rc is None:
            break
        # 2: finished with recoverable errors (deprecated keys and the like), which do not stop a run.
        if rc in (0, 2):
            return
        raise PavError(
            f"host {host.name} ({host.public_ip}): cloud-init failed (exit {rc}: {output or 'no output'}); "
            "see /var/log/cloud-init-output.log on it"
        )
    raise PavError(
        f"host {host.name} ({host.public_ip}): cloud-init did not finish within {timeout_s:.0f}s ({last}); "
        "raise pav_ssh_timeout_s or look at /var/log/cloud-init-output.log on it"
    )


def _cloud_init_status(
    host: ProvisionedHost, key: Path, known_hosts: Path, deadline: float
) -> tuple[int | None, str]:
    """Exit code and last output line of `cloud-init status --wait`; None when the deadline came first."""
    client = open_client(host, key, known_hosts, 10)
    try:
        _, stdout, _ = client.exec_command("cloud-init status --wait 2>&1")
        channel = stdout.channel
        while not channel.exit_status_ready():
            interrupts.raise_if_requested()
            if time.monotonic() >= deadline:
                return None, ""
            time.sleep(1)
        lines = [ln.strip(" .") for ln in stdout.read().decode(errors="replace").splitlines()]
        return channel.recv_exit_status(), next((ln for ln in reversed(lines) if ln), "")
    except TimeoutError as exc:
        raise OSError("timed out") from exc
    finally:
        client.close()
