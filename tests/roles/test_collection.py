"""The roles as the Ansible collection pav.gpu_acceptance (galaxy.yml), as a bare-metal user gets them.

The real `ansible-galaxy collection build` makes the tarball from the repo, `ansible-galaxy collection
install` puts it in a folder of the test's, and a playbook of the user's own (its own folder and
ansible.cfg, nothing of the repo's ansible/ansible.cfg or roles_path) runs preflight and nccl_env by their
collection names against one simulated host (scripts/sim-hosts). The sim host needs root; the tarball
tests do not.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.sim.script import REPO, hosts_up

pytestmark = pytest.mark.slow

VENV_BIN = REPO / ".venv" / "bin"
FQCN = "pav.gpu_acceptance"
# What the tarball holds at its top level; anything else there is the driver or local state leaking in
# (add it to galaxy.yml's build_ignore).
SHIPPED = {"MANIFEST.json", "FILES.json", "README.md", "CHANGELOG.md", "meta", "plugins", "roles", "payload"}
RECAP = re.compile(r"^(\S+)\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)

# The user's playbook: two roles by their collection names, nccl_env in check mode (it writes /etc/pav).
USER_PLAY = """\
- name: Acceptance facts for my GPU hosts
  hosts: all
  gather_facts: false
  roles:
    - pav.gpu_acceptance.preflight
    - role: pav.gpu_acceptance.nccl_env
      check_mode: true
      nccl_env_socket_ifname: eth0
  post_tasks:
    - name: Keep what the roles found
      ansible.builtin.copy:
        content: "{{ {'preflight_facts': preflight_facts, 'nccl_env_vars': nccl_env_vars} | to_nice_json }}"
        dest: "{{ playbook_dir }}/found.{{ inventory_hostname }}.json"
        mode: "0644"
      delegate_to: localhost
      check_mode: false
"""


def _tool(name: str, *args: object, cwd: Path, env: dict[str, str], timeout: float = 120):
    return subprocess.run(
        [str(VENV_BIN / name), *map(str, args)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def _user_env(home: Path, collections: Path) -> dict[str, str]:
    """A user's shell: none of this process's ANSIBLE_* settings, their own ansible.cfg, an empty roles
    path, and the folder the collection was installed into."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    (home / "roles").mkdir(exist_ok=True)
    (home / "ansible.cfg").write_text("[defaults]\nretry_files_enabled = False\n")
    return {
        **env,
        "ANSIBLE_CONFIG": str(home / "ansible.cfg"),
        "ANSIBLE_ROLES_PATH": str(home / "roles"),
        "ANSIBLE_COLLECTIONS_PATH": str(collections),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_FORCE_COLOR": "0",
    }


@dataclass
class Built:
    tarball: Path
    names: list[str]
    collections: Path  # what ANSIBLE_COLLECTIONS_PATH points at
    installed: Path  # collections/ansible_collections/pav/gpu_acceptance


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    base = tmp_path_factory.mktemp("collection")
    galaxy = yaml.safe_load((REPO / "galaxy.yml").read_text())
    assert f"{galaxy['namespace']}.{galaxy['name']}" == FQCN
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    dist = base / "dist"
    build = _tool("ansible-galaxy", "collection", "build", REPO, "--output-path", dist, cwd=base, env=env)
    assert build.returncode == 0, build.stdout + build.stderr
    tarball = dist / f"pav-gpu_acceptance-{galaxy['version']}.tar.gz"
    assert tarball.is_file(), build.stdout
    with tarfile.open(tarball) as tar:
        names = tar.getnames()
    collections = base / "collections"
    install = _tool("ansible-galaxy", "collection", "install", "--offline", tarball, "-p", collections,
                    cwd=base, env={**env, "ANSIBLE_COLLECTIONS_PATH": str(collections)})  # fmt: skip
    assert install.returncode == 0, install.stdout + install.stderr
    installed = collections / "ansible_collections" / "pav" / "gpu_acceptance"
    assert (installed / "MANIFEST.json").is_file(), install.stdout
    return Built(tarball, names, collections, installed)


def test_tarball_holds_the_roles_and_payload_not_the_driver(built: Built) -> None:
    names = set(built.names)
    assert {n.split("/")[0] for n in names} <= SHIPPED, sorted({n.split("/")[0] for n in names} - SHIPPED)
    for role in ("preflight", "host_tuning", "nccl_env", "mpi", "nccl_tests", "torch_payload", "run_tests",
                 "collect", "slurm", "slurm_jobs", "training_operator"):  # fmt: skip
        assert f"roles/{role}/tasks/main.yml" in names, role
        assert f"roles/{role}/meta/argument_specs.yml" in names, role
    assert "meta/runtime.yml" in names
    assert "payload/pav_payload/__init__.py" in names
    driver = ("tests", "src", ".venv", "runs", "scripts", "playbooks", "inventories", "terraform", "docs")
    for leaked in driver:
        assert not any(n == leaked or n.startswith(f"{leaked}/") for n in names), leaked
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    runtime = yaml.safe_load((built.installed / "meta" / "runtime.yml").read_text())
    assert runtime["requires_ansible"].startswith(">=")


def test_torch_payload_default_source_resolves_inside_the_collection(built: Built) -> None:
    """torch_payload's default torch_payload_src, role_path/../../payload, is the payload the collection
    ships: the role needs no torch_payload_src outside this repo."""
    defaults = (built.installed / "roles" / "torch_payload" / "defaults" / "main.yml").read_text()
    assert "role_path ~ '/../../payload'" in defaults
    role_path = built.installed / "roles" / "torch_payload"
    assert (role_path / ".." / ".." / "payload" / "pav_payload" / "__main__.py").is_file()


def test_collection_names_resolve_only_through_the_installed_collection(built: Built, tmp_path: Path) -> None:
    """The user's playbook parses with the collection on ANSIBLE_COLLECTIONS_PATH, and not without it (the
    repo's roles/ are not what it finds)."""
    home = tmp_path / "user"
    home.mkdir()
    (home / "site.yml").write_text(USER_PLAY)
    found = _tool("ansible-playbook", "--syntax-check", "-i", "localhost,", "site.yml",
                  cwd=home, env=_user_env(home, built.collections))  # fmt: skip
    assert found.returncode == 0, found.stdout + found.stderr
    empty = tmp_path / "no-collections"
    empty.mkdir()
    missing = _tool("ansible-playbook", "--syntax-check", "-i", "localhost,", "site.yml",
                    cwd=home, env=_user_env(home, empty))  # fmt: skip
    assert missing.returncode != 0
    assert f"{FQCN}.preflight" in missing.stdout + missing.stderr


@dataclass
class SimHost:
    name: str
    ip: str
    key: Path
    known_hosts: Path


@pytest.fixture(scope="module")
def sim_host(tmp_path_factory: pytest.TempPathFactory):
    with hosts_up(tmp_path_factory.mktemp("collection-sim"), 1, "g") as up:
        yield SimHost(up.records[0]["name"], up.records[0]["ip"], up.key, up.known_hosts(0))


def test_user_playbook_runs_collection_roles_on_a_sim_host(built: Built, sim_host: SimHost, tmp_path: Path):
    home = tmp_path / "user"
    home.mkdir()
    inventory = {
        "all": {
            "hosts": {
                sim_host.name: {
                    "ansible_host": sim_host.ip,
                    "ansible_user": "root",
                    "ansible_ssh_private_key_file": str(sim_host.key),
                    "ansible_python_interpreter": "/usr/bin/python3",
                    "ansible_ssh_common_args": (
                        f"-o UserKnownHostsFile={sim_host.known_hosts} -o StrictHostKeyChecking=yes"
                    ),
                }
            }
        }
    }
    (home / "hosts.yml").write_text(yaml.safe_dump(inventory))
    (home / "site.yml").write_text(USER_PLAY)
    run = _tool("ansible-playbook", "-i", "hosts.yml", "site.yml",
                cwd=home, env=_user_env(home, built.collections), timeout=300)  # fmt: skip
    out = run.stdout + run.stderr
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-3000:]
    recap = {m[1]: (int(m[2]), int(m[5]), int(m[4])) for m in RECAP.finditer(run.stdout)}
    assert set(recap) == {sim_host.name}, out[-3000:]
    ok, failed, unreachable = recap[sim_host.name]
    assert ok > 0 and failed == 0 and unreachable == 0, recap
    # The tasks ran from the collection's roles, under their collection names.
    assert f"TASK [{FQCN}.preflight : " in run.stdout
    assert f"TASK [{FQCN}.nccl_env : " in run.stdout
    found = json.loads((home / f"found.{sim_host.name}.json").read_text())
    facts = found["preflight_facts"]
    assert facts["hostname"] and isinstance(facts["gpu"], dict) and "count" in facts["gpu"], facts
    assert found["nccl_env_vars"]["NCCL_IB_DISABLE"] == "1"  # the default socket fabric
    assert found["nccl_env_vars"]["NCCL_SOCKET_IFNAME"] == "eth0"  # the user's role parameter
