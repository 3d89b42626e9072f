"""The variables an inventory file sets itself (issue 64): read in both forms with where each stands, the
group all's as settings under group_vars/all and -e, a role variable there checked by the dry run."""

from __future__ import annotations

from pathlib import Path

from pav.inventory_vars import Scope, inventory_scopes
from pav.settings import load_settings
from tests.conftest import assert_one_line_error, run_cli_here

NESTED = """all:
  vars: {pav_hosts: 2}
  hosts:
    box1: {ansible_connection: local}
  children:
    gpu:
      vars: {nccl_env_fabric: socket}
      hosts:
        box2: {pav_private_ip: 10.0.0.2}
        box3:
"""


def test_each_mapping_of_a_yaml_inventory_is_named_by_its_path(tmp_path: Path) -> None:
    (hosts := tmp_path / "hosts.yml").write_text(NESTED)
    assert inventory_scopes(hosts) == [
        Scope("all.vars", {"pav_hosts": 2}, run_wide=True, ini=False),
        Scope("all.hosts.box1", {"ansible_connection": "local"}, run_wide=False, ini=False),
        Scope("all.children.gpu.vars", {"nccl_env_fabric": "socket"}, run_wide=False, ini=False),
        Scope("all.children.gpu.hosts.box2", {"pav_private_ip": "10.0.0.2"}, run_wide=False, ini=False),
    ]


def test_an_ini_inventory_reads_as_ansible_reads_it(tmp_path: Path) -> None:
    """Python's literals as Ansible's INI plugin reads them; what they do not read (false) as -e reads it."""
    hosts = tmp_path / "hosts"
    hosts.write_text(
        "[gpu]\nbox1 ansible_connection=local\n[gpu:vars]\nnccl_env_fabric=socket\n"
        "[all:vars]\npav_hosts=4\npav_isolate=false\npav_tests=['gpu_probe']\n"
    )
    scopes = {s.where: s for s in inventory_scopes(hosts)}
    assert scopes["[all:vars]"].run_wide and not scopes["[gpu:vars]"].run_wide
    assert scopes["[gpu:vars]"].values == {"nccl_env_fabric": "socket"}
    settings = load_settings(tmp_path, hosts_file=hosts)
    assert (settings.hosts, settings.isolate, settings.tests) == (4, False, ["gpu_probe"])
    assert settings.origins["pav_isolate"] == f"{hosts} ([all:vars])"
    assert "nccl_env_fabric" not in settings.role_vars  # the group gpu's: Ansible's, per host


def test_a_file_the_ini_plugin_cannot_read_is_left_to_ansible_inventory(tmp_path: Path) -> None:
    (hosts := tmp_path / "hosts").write_text("[all:vars]\nnot a pair\n")
    assert inventory_scopes(hosts) == []
    run = run_cli_here("--inventory", str(hosts), "--dry-run")
    assert_one_line_error(run, f"inventory {hosts} is not valid", "fix the file")


def test_group_vars_all_wins_over_the_file_and_e_over_both(tmp_path: Path) -> None:
    """Ansible's order: the inventory file's group vars, then group_vars/all, then extra vars."""
    (hosts := tmp_path / "hosts.yml").write_text(
        "all:\n  vars: {pav_hosts: 2, pav_rdzv_port: 29500, k8s_namespace: inv}\n  hosts: {box1: }\n"
    )
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "all.yml").write_text("pav_hosts: 3\nk8s_namespace: gv\n")
    settings = load_settings(tmp_path, {"pav_hosts": "5"}, hosts_file=hosts)
    assert (settings.hosts, settings.rdzv_port, settings.k8s.namespace) == (5, 29500, "gv")
    assert settings.origins["pav_rdzv_port"] == f"{hosts} (all.vars)"


def test_a_role_variable_of_the_file_meets_its_roles_spec_in_the_dry_run(tmp_path: Path) -> None:
    (hosts := tmp_path / "hosts.yml").write_text(
        "all:\n  vars: {nccl_env_fabric: ib}\n  hosts:\n    box1: {ansible_connection: local}\n"
    )
    run = run_cli_here("--inventory", str(hosts), "--dry-run")
    assert_one_line_error(run, f"{hosts} (all.vars): nccl_env_fabric='ib': role nccl_env's argument spec")
