"""The pods' NCCL/UCX environment is the one roles/nccl_env derives: its vars/main.yml, rendered by Ansible
with the k8s env's variables, gives the same variables as pav.k8s_fabric (so the two cannot drift apart)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pav import paths
from pav.errors import PavError
from pav.k8s_fabric import ROLE_DEFAULTS, fabric_env
from pav.settings import load_settings

ENV = paths.INVENTORIES / "nebius-eu-k8s"


def derive_with_ansible(group_vars: Path, tmp_path: Path) -> dict[str, str]:
    out = tmp_path / "derived.json"
    play = [
        {
            "name": "Derive",
            "hosts": "localhost",
            "connection": "local",
            "gather_facts": False,
            "vars_files": [
                str(ROLE_DEFAULTS),
                str(paths.ROLES / "nccl_env" / "vars" / "main.yml"),
                str(group_vars),
            ],
            "tasks": [
                {"ansible.builtin.copy": {"content": "{{ nccl_env_derived | to_json }}", "dest": str(out)}},
            ],
        }
    ]
    playbook = tmp_path / "derive.yml"
    playbook.write_text(yaml.safe_dump(play))
    env = {**os.environ, "ANSIBLE_PYTHON_INTERPRETER": sys.executable, "ANSIBLE_NOCOWS": "1"}
    ansible = Path(sys.executable).parent / "ansible-playbook"
    proc = subprocess.run(
        [str(ansible), "-i", "localhost,", str(playbook)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    return {k: str(v) for k, v in json.loads(out.read_text()).items()}


def test_pods_get_what_nccl_env_derives_on_hosts(tmp_path: Path) -> None:
    group_vars = ENV / "group_vars" / "all" / "roles.yml"
    derived = derive_with_ansible(group_vars, tmp_path)
    assert fabric_env(load_settings(ENV)) == derived
    assert derived["NCCL_IB_DISABLE"] == "0" and derived["NCCL_COLLNET_ENABLE"] == "0"


def test_run_tests_environment_reaches_the_pods_too(tmp_path: Path) -> None:
    """NCCL_NVLS_ENABLE and friends: what an env puts on every launch on hosts, pods get as well."""
    inventory = tmp_path / "env"
    (inventory / "group_vars").mkdir(parents=True)
    data = yaml.safe_load((ENV / "group_vars" / "all" / "roles.yml").read_text())
    data["run_tests_environment"] = {"NCCL_NVLS_ENABLE": "0"}
    (inventory / "group_vars" / "all.yml").write_text(yaml.safe_dump(data))
    assert fabric_env(load_settings(inventory))["NCCL_NVLS_ENABLE"] == "0"


def test_infiniband_without_hcas_is_refused(tmp_path: Path) -> None:
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "all.yml").write_text("nccl_env_fabric: infiniband\n")
    with pytest.raises(PavError, match="nccl_env_ib_hca is empty"):
        fabric_env(load_settings(tmp_path))
