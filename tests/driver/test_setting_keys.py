"""Every pav_* and k8s_* key is one the tool reads: a misspelt one in an env's group_vars or in -e stops the
run with one line naming the nearest known key (issue 37), and a key the roles use is declared in
src/pav/setting_keys.py, or this suite fails."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pav import cli, paths
from pav.errors import PavError
from pav.extravars import DRIVER_OWNED
from pav.k8s_config import load_config
from pav.provisioning.hosts import ProvisionedHost, host_vars
from pav.setting_keys import ANSIBLE_KEYS, RUN_VARS, driver_keys, k8s_keys, known_keys, nearest
from pav.settings import load_settings
from pav.stages.configure import INSTALLS, install_vars
from tests.conftest import ROOT, assert_one_line_error, run_cli
from tests.docs_quotes import assert_documented
from tests.driver.contexts import context

KEY = re.compile(r"\bpav_[a-z0-9_]+")
# pav_ names in roles/, playbooks/, templates/ and plugins/ that are no variable.
NOT_VARIABLES = {
    "pav_host_probe": "preflight's module (plugins/modules/pav_host_probe.py)",
    "pav_files": "host_tuning's and nccl_env's module (plugins/modules/pav_files.py)",
    "pav_facts_wait": "torch_payload's module (plugins/modules/pav_facts_wait.py)",
    "pav_mpi_allreduce": "the mpi role's test program",
    "pav_cluster_ed25519": "the file name of mpirun's cluster key (mpi_cluster_key_name)",
    "pav_payload": "the payload's Python package (payload/pav_payload)",
}


def env_dir(tmp_path: Path, text: str, name: str = "all.yml") -> Path:
    (tmp_path / "hosts.yml").write_text("all:\n  hosts:\n    box1:\n      ansible_connection: local\n")
    path = tmp_path / "group_vars" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_a_misspelt_setting_is_refused_naming_the_nearest_key(tmp_path: Path) -> None:
    path = env_dir(tmp_path, "pav_tests: [gpu_probe]\npav_threshhold_profile: h100-sxm-8gpu\n")
    expected = f"{path}: unknown setting pav_threshhold_profile; did you mean pav_threshold_profile?"
    with pytest.raises(PavError) as refused:
        load_settings(tmp_path)
    assert str(refused.value) == expected


@pytest.mark.parametrize(
    ("key", "nearest_key"),
    [
        ("pav_instal_mpi", "pav_install_mpi"),  # a playbooks' key
        ("pav_becom", "pav_become"),
        ("pav_test_timeout", "pav_test_timeout_s"),
        ("k8s_namspace", "k8s_namespace"),  # a k8s job setting, refused on any platform
    ],
)
def test_each_family_names_its_nearest_key(tmp_path: Path, key: str, nearest_key: str) -> None:
    env_dir(tmp_path, f"{key}: x\n")
    with pytest.raises(PavError, match=f"unknown setting {key}; did you mean {nearest_key}\\?$"):
        load_settings(tmp_path)


def test_a_key_near_none_points_at_the_list(tmp_path: Path) -> None:
    env_dir(tmp_path, "pav_colour: blue\n")
    with pytest.raises(
        PavError, match=r"unknown setting pav_colour; the pav_\* keys are listed in docs/config"
    ):
        load_settings(tmp_path)
    env_dir(tmp_path, "k8s_colour: blue\n")
    with pytest.raises(PavError, match=r"the k8s_\* keys are listed in templates/k8s/defaults.yml$"):
        load_settings(tmp_path)


def test_role_variables_and_ansibles_own_keys_are_left_to_ansible(tmp_path: Path) -> None:
    env_dir(
        tmp_path, "nccl_env_fabrc: socket\nansible_user: me\npav_become: false\npav_private_ip: 10.0.0.2\n"
    )
    assert load_settings(tmp_path).threshold_profile == "auto"


def test_a_misspelt_setting_in_e_is_refused() -> None:
    with pytest.raises(PavError, match=r"^-e: unknown setting pav_isolat; did you mean pav_isolate\?$"):
        load_settings(ROOT / "inventories" / "sim", {"pav_isolat": "false"})
    with pytest.raises(PavError, match=r"^-e: unknown setting k8s_privilegd; did you mean k8s_privileged\?$"):
        load_settings(ROOT / "inventories" / "sim", {"k8s_privilegd": "true"})
    load_settings(ROOT / "inventories" / "sim", {"pav_install_mpi": "false"})  # the playbooks' key: known


def test_the_cli_refuses_before_anything_is_provisioned_in_one_line(tmp_path: Path) -> None:
    env = {"PAV_STATE_DIR": str(tmp_path / "state")}
    args = ("--env", "sim", "-e", "pav_threshhold_profile=cpu", "--run-dir", str(tmp_path / "r"))
    run = run_cli(*args, env=env, timeout=60)  # no --dry-run: a real run, stopped before provision
    assert_one_line_error(run, "did you mean pav_threshold_profile?", documented=True)
    assert (
        run.stderr
        == "error: -e: unknown setting pav_threshhold_profile; did you mean pav_threshold_profile?\n"
    )
    assert not (tmp_path / "r").exists() and not (tmp_path / "state").exists()


def test_k8s_config_refuses_alike(tmp_path: Path) -> None:
    path = env_dir(tmp_path, "k8s_node_presett: 8gpu-128vcpu-1600gb\n")
    with pytest.raises(PavError) as refused:
        load_config(tmp_path)
    assert str(refused.value) == f"{path}: unknown setting k8s_node_presett; did you mean k8s_node_preset?"


def test_every_env_loads() -> None:
    envs = sorted(p.parent for p in paths.INVENTORIES.glob("*/group_vars"))
    assert {e.name for e in envs} >= {"local", "sim", "nebius-eu", "nebius-us-h200", "nebius-eu-k8s"}
    for env in envs:
        settings = load_settings(env)
        if settings.platform == "k8s":
            load_config(env)


def test_every_pav_key_the_roles_playbooks_and_templates_use_is_declared() -> None:
    """A new pav_* variable in a role or playbook must be declared in src/pav/setting_keys.py: else an env
    setting it would be refused as unknown."""
    used: dict[str, str] = {}
    for folder in ("roles", "playbooks", "templates", "plugins"):
        for path in sorted((ROOT / folder).rglob("*")):
            if path.is_file() and not path.is_symlink():
                for key in KEY.findall(path.read_text(errors="replace")):
                    used.setdefault(key, str(path.relative_to(ROOT)))
    assert {"pav_become", "pav_install_mpi", "pav_validate_collects"} <= used.keys()  # the scan found them
    undeclared = {key: where for key, where in used.items() if key not in known_keys() | NOT_VARIABLES.keys()}
    assert not undeclared, f"declare these in src/pav/setting_keys.py: {undeclared}"


def test_every_key_the_driver_passes_to_the_playbooks_is_declared(tmp_path: Path) -> None:
    passed = set(context().extravars()) | set(install_vars(dict.fromkeys(INSTALLS, True)))
    host = ProvisionedHost("h0", "1.2.3.4", "10.0.0.4", "root")
    passed |= {k for k in host_vars(host, tmp_path / "key", tmp_path / "known") if k.startswith("pav_")}
    for path in (ROOT / "src" / "pav").rglob("*.py"):  # dict keys such as validate's "pav_launches": ...
        if path.name != "setting_keys.py":
            passed |= set(re.findall(r'"(pav_[a-z0-9_]+)":', path.read_text()))
    assert passed - set(DRIVER_OWNED) - known_keys() == set()
    assert passed & set(ANSIBLE_KEYS) == set()  # the user's to set, never the driver's
    assert {k for k in DRIVER_OWNED if k.startswith("pav_")} <= known_keys()


def test_the_families_do_not_overlap() -> None:
    families = [driver_keys(), set(ANSIBLE_KEYS), set(RUN_VARS), k8s_keys()]
    assert sum(len(f) for f in families) == len(set().union(*families))
    assert nearest("pav_xyzzy", known_keys()) is None


def test_a_group_vars_folder_is_read_as_ansible_reads_it(tmp_path: Path) -> None:
    """group_vars/all/: the driver's settings in pav.yml; Ansible reads every file there, and not all.yml."""
    pav = env_dir(tmp_path, "pav_threshold_profile: cpu\n", "all/pav.yml")
    env_dir(tmp_path, "pav_become: false\nnccl_env_fabric: socket\n", "all/main.yml")
    env_dir(tmp_path, "$ANSIBLE_VAULT;1.1;AES256\n6162636465\n", "all/vault.yml")
    env_dir(tmp_path, "secret: !vault |\n  $ANSIBLE_VAULT;1.1;AES256\n  6162\n", "all/tagged.yml")
    assert load_settings(tmp_path).threshold_profile == "cpu"
    misspelt = env_dir(tmp_path, "pav_instal_mpi: false\n", "all/mpi.yml")
    with pytest.raises(PavError, match=f"^{misspelt}: unknown setting pav_instal_mpi; did you mean"):
        load_settings(tmp_path)
    stray = env_dir(tmp_path, "pav_tests: [gpu_probe]\n", "all/mpi.yml")
    with pytest.raises(PavError, match=f"^{stray}: pav_tests is read by the driver from {pav} only; move it"):
        load_settings(tmp_path)
    stray.unlink()
    beside = env_dir(tmp_path, "pav_tests: [gpu_probe]\n", "all.yml")
    with pytest.raises(PavError, match=f"^{beside}: Ansible ignores this file beside the folder"):
        load_settings(tmp_path)


def test_in_process_the_error_is_one_line_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = env_dir(tmp_path, "pav_threshold_profil: auto\n")
    with pytest.raises(PavError) as refused:
        cli.run(["--inventory", str(tmp_path / "hosts.yml"), "--dry-run"])
    assert (
        str(refused.value)
        == f"{path}: unknown setting pav_threshold_profil; did you mean pav_threshold_profile?"
    )
    assert_documented(f"error: {refused.value}")
    assert capsys.readouterr().out == ""
