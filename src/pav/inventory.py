"""The inventory a run uses: staged into the run dir, resolved by Ansible's own parser."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from pav import paths
from pav.errors import PavError
from pav.tools import require_tool
from pav.yamlfile import load_mapping, load_yaml


@dataclass(frozen=True)
class Host:
    name: str
    address: str
    vars: dict[str, Any] = field(default_factory=dict)

    @property
    def local(self) -> bool:
        return self.vars.get("ansible_connection") == "local"


def check_var_files(inventory_dir: Path) -> None:
    """Parse group_vars/host_vars ourselves first: Ansible's own error names neither line nor fix."""
    for sub in ("group_vars", "host_vars"):
        base = inventory_dir / sub
        if not base.is_dir():
            continue
        for path in sorted(base.rglob("*")):
            if path.suffix in (".yml", ".yaml") or (
                path.is_file() and path.parent == base and not path.suffix
            ):
                load_mapping(path)


def stage_inventory(hosts_file: Path, inventory_dir: Path, dest: Path) -> Path:
    """Copy what the run uses into the run dir: the record of exactly what ran, and one place to add to."""
    check_var_files(inventory_dir)
    if hosts_file.suffix in (".yml", ".yaml"):
        load_yaml(hosts_file)
    dest.mkdir(parents=True, exist_ok=True)
    for sub in ("group_vars", "host_vars"):
        if (inventory_dir / sub).is_dir():
            shutil.copytree(inventory_dir / sub, dest / sub, dirs_exist_ok=True)
    staged = dest / hosts_file.name
    shutil.copyfile(hosts_file, staged)
    return staged


def write_generated(hosts: dict[str, dict[str, Any]], inventory_dir: Path, dest: Path) -> Path:
    """An inventory from provisioned hosts, with the env's group_vars beside it."""
    check_var_files(inventory_dir)
    dest.mkdir(parents=True, exist_ok=True)
    for sub in ("group_vars", "host_vars"):
        if (inventory_dir / sub).is_dir():
            shutil.copytree(inventory_dir / sub, dest / sub, dirs_exist_ok=True)
    path = dest / "hosts.yml"
    path.write_text(yaml.safe_dump({"all": {"hosts": hosts}}, sort_keys=False))
    return path


def resolve_hosts(inventory_file: Path, label: Path | None = None) -> list[Host]:
    """Ask ansible-inventory, so INI, YAML and every Ansible inventory feature resolve as Ansible sees them.

    label: the file to name in errors (the user's, when inventory_file is the run dir's copy of it).
    """
    shown = label or inventory_file
    if inventory_file.suffix in (".yml", ".yaml"):
        check_yaml_shape(load_yaml(inventory_file), shown)
    exe = require_tool("ansible-inventory", "install the project (pip install -e .) to get ansible-core")
    env = ansible_env()
    env["ANSIBLE_INVENTORY_UNPARSED_FAILED"] = "true"
    env["ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED"] = "true"
    proc = subprocess.run(
        [exe, "-i", str(inventory_file), "--list"], capture_output=True, text=True, env=env, check=False
    )
    if proc.returncode != 0:
        reason = _first_error(proc.stderr).replace(str(inventory_file), str(shown))
        raise PavError(f"inventory {shown} is not valid: {reason}; fix the file")
    data = json.loads(proc.stdout)
    hostvars: dict[str, dict[str, Any]] = data.get("_meta", {}).get("hostvars", {})
    names = _all_hosts(data)
    if not names:
        raise PavError(f"inventory {shown} has no hosts; add at least one host under all.hosts")
    check_host_names(names, shown)
    hosts = [Host(n, str(hostvars.get(n, {}).get("ansible_host", n)), hostvars.get(n, {})) for n in names]
    racks_of(hosts, shown)
    return hosts


GROUP_KEYS = ("hosts", "children", "vars")
# A host's inventory name becomes a folder of the run dir, part of a process marker and of Slurm and k8s
# commands: it is data, so only the characters of a host name or address are taken (issue 47).
HOST_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,252}")


def check_host_names(names: list[str], shown: Path) -> None:
    """One line for the first inventory name that is not a plain host name or address."""
    for name in names:
        if not HOST_NAME.fullmatch(name) or ".." in name:
            raise PavError(
                f"inventory {shown}: host name {name!r} is not a plain host name (letters, digits, '.', "
                "'_' and '-', not starting with '.' or '-', no '..'); rename it, the address in ansible_host"
            )


RACK = "pav_rack"


def racks_of(hosts: list[Host], shown: Path | None = None) -> dict[str, str]:
    """Each host's rack or leaf switch (pav_rack), where the inventory names one: isolation's pairs keep to
    one pair per rack uplink a round (pav.isolation_pairs). One line for the first value that is no name."""
    out = {}
    for host in hosts:
        rack = host.vars.get(RACK)
        if rack is None:
            continue
        if isinstance(rack, bool) or not isinstance(rack, str | int) or not str(rack).strip():
            where = f"inventory {shown}: " if shown is not None else ""
            raise PavError(
                f"{where}host {host.name}: {RACK} {rack!r} is not a rack name; set it to the name of the "
                "host's rack or leaf switch (a string such as rack-07), the same for hosts of one rack"
            )
        out[host.name] = str(rack)
    return out


# Connections that reach a host by its address (Ansible's default is ssh); local, docker, kubectl ... do not.
SSH_CONNECTIONS = {"ssh", "smart", "paramiko", "paramiko_ssh"}
ADDRESS_VARS = ("ansible_host", "ansible_ssh_host")
SSH_ARG_VARS = ("ansible_ssh_common_args", "ansible_ssh_extra_args", "ansible_ssh_args")
PROXIED = re.compile(r"proxyjump|proxycommand|(?:^|\s)-J\s", re.I)


def unaddressed(hosts: list[Host]) -> dict[str, str]:
    """Hosts SSH could not find, each with what to say after its name: no ansible_host and a name that does
    not resolve here, or an ansible_host that does not resolve. Asked before any SSH (which fails on them
    with a screenful of DNS error, per host, stages later). A name ssh's own config maps (Host ... HostName)
    or reaches through a jump host resolves where ssh says, not here, and is taken as it is."""
    asked = [h for h in hosts if _over_ssh(h)]
    with ThreadPoolExecutor(max_workers=min(16, len(asked) or 1)) as pool:
        found = list(pool.map(lambda h: _resolves(h.address), asked))
    out = {}
    for host, ok in zip(asked, found, strict=True):
        if ok or _ssh_finds(host.address):
            continue
        given = next((k for k in ADDRESS_VARS if k in host.vars), None)
        out[host.name] = (
            f"cannot be found: its {given} {host.address} does not resolve here; fix {given}"
            if given
            else "has no address: its name does not resolve here and the inventory sets no ansible_host for "
            "it; set ansible_host: ITS_IP_OR_DNS_NAME"
        )
    return out


def check_addresses(hosts: list[Host], shown: Path | None, allow_missing: int = 0) -> dict[str, str]:
    """The hosts without an address, where --allow-missing lets the run go on without them (name -> why);
    one line naming the first of them where it does not."""
    found = unaddressed(hosts)
    if not found or len(found) <= allow_missing:
        return {name: f"{why} (--allow-missing)" for name, why in found.items()}
    name, why = next(iter(found.items()))
    more = f" (and {len(found) - 1} more: {', '.join(list(found)[1:])})" if len(found) > 1 else ""
    where = f"inventory {shown}: " if shown is not None else ""
    raise PavError(f"{where}host {name} {why}{more}")


@dataclass(frozen=True)
class ReadInventory:
    """A static inventory's hosts as read, and those SSH could not find that the run goes on without."""

    hosts: list[Host]
    missing: dict[str, str]


def read_static(hosts_file: Path, allow_missing: int) -> ReadInventory:
    """The user's inventory file read and its hosts' addresses checked: one line for what is wrong."""
    hosts = resolve_hosts(hosts_file)
    return ReadInventory(hosts, check_addresses(hosts, hosts_file, allow_missing))


def _over_ssh(host: Host) -> bool:
    connection = str(host.vars.get("ansible_connection") or "ssh").rsplit(".", 1)[-1]
    if connection not in SSH_CONNECTIONS or "{{" in host.address:  # a templated address: Ansible's to tell
        return False
    return not any(PROXIED.search(str(host.vars.get(k) or "")) for k in SSH_ARG_VARS)


def _resolves(name: str) -> bool:
    try:
        return bool(socket.getaddrinfo(name, None))
    except (OSError, UnicodeError):
        return False


def _ssh_finds(name: str) -> bool:
    """Whether ssh's own config (ssh -G: the options it would use, no connection) maps the name to one that
    resolves, or to a jump host or proxy command that finds it."""
    ssh = shutil.which("ssh")
    if ssh is None or name.startswith("-"):
        return False
    try:
        proc = subprocess.run(
            [ssh, "-G", name],
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    said = dict(ln.split(" ", 1) for ln in proc.stdout.splitlines() if " " in ln)
    if said.get("proxyjump", "none") != "none" or said.get("proxycommand", "none") != "none":
        return True
    hostname = said.get("hostname", name)
    return hostname != name and _resolves(hostname)


def check_yaml_shape(data: Any, shown: Path) -> None:
    """The shape Ansible's YAML inventory plugin reads, checked first so the error names the key: its own
    says only that it 'failed to parse' the file."""
    if not isinstance(data, dict) or not data:
        raise PavError(f"{shown}: an inventory is a mapping of groups, e.g. all: {{hosts: {{NAME: {{}}}}}}")
    for group, node in data.items():
        _check_group(node, str(group), shown)


def _check_group(node: Any, where: str, shown: Path) -> None:
    if node is None:
        return
    if not isinstance(node, dict):
        raise PavError(f"{shown}: {where} must be a mapping with hosts, children or vars; fix that key")
    for key, value in node.items():
        if key not in GROUP_KEYS:
            raise PavError(f"{shown}: {where}.{key} is not a group key (hosts, children, vars); fix that key")
        if value is not None and not isinstance(value, dict):
            kind = type(value).__name__
            raise PavError(f"{shown}: {where}.{key} must be a mapping, got {kind}; fix that key")
    for name, host_vars in (node.get("hosts") or {}).items():
        if host_vars is not None and not isinstance(host_vars, dict):
            raise PavError(f"{shown}: {where}.hosts.{name} must be a mapping of host variables (or empty)")
    for name, child in (node.get("children") or {}).items():
        _check_group(child, f"{where}.children.{name}", shown)


def ansible_env() -> dict[str, str]:
    env = dict(os.environ)
    env["ANSIBLE_CONFIG"] = str(paths.ANSIBLE_CFG)
    env["ANSIBLE_ROLES_PATH"] = str(paths.ROLES)
    return env


def _all_hosts(data: dict[str, Any]) -> list[str]:
    seen: list[str] = []

    def walk(group: str) -> None:
        node = data.get(group, {})
        for host in node.get("hosts", []):
            if host not in seen:
                seen.append(host)
        for child in node.get("children", []):
            walk(child)

    walk("all")
    return seen


def _first_error(stderr: str) -> str:
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    for line in lines:
        if "ERROR" in line or "Error" in line:
            return line.replace("[ERROR]:", "").replace("ERROR!", "").strip()
    return lines[-1] if lines else "ansible-inventory failed"
