"""An env's Terraform side (pav.provisioning.terraform_env) and where its state lives
(pav.paths): what the dry run previews, what a run with no state finds, and what teardown
leaves behind. Nothing here runs Terraform: without a state file there is nothing to ask it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from pav.envs import resolve_env
from pav.errors import PavError
from pav.paths import state_dir
from pav.provisioning import sim
from pav.provisioning.hosts import ProvisionedHost
from pav.provisioning.terraform_env import TerraformEnv


@pytest.fixture
def state_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("PAV_STATE_DIR", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg" / "provision-and-validate"


def test_state_lives_per_env_under_the_xdg_state_home(
    state_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert state_dir("sim") == state_root / "sim"
    monkeypatch.delenv("XDG_STATE_HOME")
    assert state_dir("sim") == Path.home() / ".local" / "state" / "provision-and-validate" / "sim"


def test_pav_state_dir_names_the_folder_itself(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PAV_STATE_DIR", "here")
    assert state_dir("sim") == state_dir("nebius-eu") == tmp_path / "here"  # absolute: the run may cd


def test_a_sim_env_previews_its_variables_without_making_anything(state_root: Path) -> None:
    env = TerraformEnv.for_env(resolve_env("sim"))
    assert env.state == state_root / "sim" and env.known_hosts == env.state / "known_hosts"
    preview = env.preview_variables(3)
    assert preview["hosts"] == 3 and preview["state_dir"] == str(env.state / "sim")
    assert len(preview["cluster_id"]) == 5 and 20 <= preview["subnet_index"] <= 219
    assert preview["ssh_public_key_file"] == str(env.private_key()) + ".pub"
    # A preview generates no key and reserves no subnet: a dry run changes nothing.
    assert not env.private_key().exists() and not sim.subnet_file(env.state).exists()
    with pytest.raises(PavError, match="--hosts 65: the sim env makes 1 to 64 hosts"):
        env.preview_variables(65)


def test_max_hours_is_refused_where_no_cloud_resource_is_labelled(state_root: Path) -> None:
    with pytest.raises(PavError) as exc:
        TerraformEnv.for_env(resolve_env("sim"), max_hours=4)
    assert str(exc.value) == "--max-hours labels cloud resources; env sim makes none (use a nebius-* env)"
    assert TerraformEnv.for_env(resolve_env("nebius-eu"), max_hours=4).nebius


def test_a_root_pav_has_no_variables_for_is_one_line(state_root: Path, tmp_path: Path) -> None:
    env = TerraformEnv.for_env(replace(resolve_env("sim"), name="mine", terraform_dir=tmp_path / "mine"))
    with pytest.raises(
        PavError, match=r"env mine: no Terraform variables are defined for it in pav\.provisioning"
    ):
        env.preview_variables(1)


def test_without_state_there_are_no_hosts_and_nothing_to_destroy(state_root: Path) -> None:
    env = TerraformEnv.for_env(resolve_env("sim"))
    env.state.mkdir(parents=True)
    env.known_hosts.write_text("10.77.20.10 ssh-ed25519 AAAA\n")
    sim.subnet_file(env.state).write_text("20\n")
    assert env.current_hosts() == []
    assert env.destroy() == []
    # Pinned keys and the subnet go with the cluster: the next one is new hosts, maybe on another subnet.
    assert not env.known_hosts.exists() and not sim.subnet_file(env.state).exists()


def test_inventory_hosts_pin_the_keys_the_run_learnt(state_root: Path) -> None:
    env = TerraformEnv.for_env(resolve_env("sim"))
    host = ProvisionedHost("sim-a-0", "10.77.20.10", "10.77.20.10", "root", ssh_port=2222, gpus=0)
    found = env.inventory_hosts([host])["sim-a-0"]
    assert found["ansible_host"] == "10.77.20.10" and found["ansible_port"] == 2222
    assert found["ansible_ssh_private_key_file"] == str(env.private_key())
    assert f"UserKnownHostsFile={env.known_hosts}" in found["ansible_ssh_common_args"]
    assert "StrictHostKeyChecking=yes" in found["ansible_ssh_common_args"]


def test_the_state_folder_is_its_owners_alone(tmp_path: Path) -> None:
    """Issue 47: Terraform writes terraform.tfstate (credentials, addresses) with the user's umask; the folder
    that holds it is made 0700, and an existing one left open is closed."""
    from pav.terraform import Terraform

    made = tmp_path / "state" / "sim"
    Terraform(tmp_path, made)
    assert made.stat().st_mode & 0o777 == 0o700
    opened = tmp_path / "open"
    opened.mkdir(mode=0o755)
    Terraform(tmp_path, opened)
    assert opened.stat().st_mode & 0o777 == 0o700
