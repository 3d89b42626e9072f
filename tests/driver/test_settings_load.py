"""One loader for every key family the driver reads (issue 37): the driver's pav_* settings and the k8s_* job
settings come from one read of the env's group_vars and -e, -e winning over the files for both; a group_vars
folder is split by reader (pav.yml, k8s.yml, every other file Ansible's) and a key in another reader's file
is refused; the settings modules import one way."""

from __future__ import annotations

import ast
from dataclasses import fields
from pathlib import Path

import pytest
import yaml

from pav import cli, paths
from pav.errors import PavError
from pav.group_vars import read_group_vars
from pav.k8s_config import load_config
from pav.k8s_fabric import fabric_env
from pav.k8s_settings import K8S_DEFAULTS, K8sSettings
from pav.settings import load_settings, settings_file
from tests.conftest import ROOT
from tests.docs_quotes import assert_documented

K8S_ENV = paths.INVENTORIES / "nebius-eu-k8s"
SETTINGS_MODULES = ("settings", "driver_settings", "k8s_settings", "setting_keys", "group_vars", "k8s_config")


def split_env(tmp_path: Path, **files: str) -> Path:
    """An own inventory whose group_vars/all/ holds the given files (pav="..." -> pav.yml)."""
    (tmp_path / "hosts.yml").write_text("all:\n  hosts:\n    box1:\n      ansible_connection: local\n")
    folder = tmp_path / "group_vars" / "all"
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / f"{name}.yml").write_text(text)
    return tmp_path


def refusal(inventory: Path, extra_vars: dict[str, str] | None = None) -> str:
    with pytest.raises(PavError) as refused:
        load_settings(inventory, extra_vars)
    message = str(refused.value)
    assert "\n" not in message
    return message


def test_each_familys_file_is_read_by_its_reader(tmp_path: Path) -> None:
    env = split_env(
        tmp_path,
        pav="pav_hosts: 4\npav_tests: [gpu_probe]\n",
        k8s="k8s_namespace: acceptance\nk8s_privileged: true\n",
        roles="pav_become: false\nnccl_env_fabric: socket\n",
    )
    settings = load_settings(env)
    assert (settings.hosts, settings.tests) == (4, ["gpu_probe"])
    assert (settings.k8s.namespace, settings.k8s.privileged) == ("acceptance", True)
    assert settings.role_vars == {"pav_become": False, "nccl_env_fabric": "socket"}
    folder = env / "group_vars" / "all"
    assert settings.origins["k8s_namespace"] == str(folder / "k8s.yml")
    assert settings_file(env) == folder / "pav.yml" and settings_file(env, "k8s") == folder / "k8s.yml"


def test_a_single_all_yml_keeps_working(tmp_path: Path) -> None:
    """A user's one file holds every family, as before the split."""
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "all.yml").write_text(
        "pav_hosts: 5\nk8s_namespace: mine\nnccl_env_fabric: roce\npav_install_mpi: false\n"
    )
    settings = load_settings(tmp_path)
    assert (settings.hosts, settings.k8s.namespace) == (5, "mine")
    assert settings.role_vars == {"nccl_env_fabric": "roce", "pav_install_mpi": False}
    assert load_config(tmp_path).namespace == "mine"


def test_a_misspelt_pav_key_names_the_nearest_and_the_file(tmp_path: Path) -> None:
    env = split_env(tmp_path, pav="pav_hosts: 2\npav_isolat: false\n")
    pav = env / "group_vars" / "all" / "pav.yml"
    assert refusal(env) == f"{pav}: unknown setting pav_isolat; did you mean pav_isolate?"


def test_a_misspelt_k8s_key_names_the_nearest_and_the_file(tmp_path: Path) -> None:
    env = split_env(tmp_path, k8s="k8s_namespace: x\nk8s_privilegd: true\n")
    k8s = env / "group_vars" / "all" / "k8s.yml"
    assert refusal(env) == f"{k8s}: unknown setting k8s_privilegd; did you mean k8s_privileged?"
    assert (
        refusal(K8S_ENV, {"k8s_nod_preset": "8gpu-128vcpu-1600gb"})
        == "-e: unknown setting k8s_nod_preset; did you mean k8s_node_preset?"
    )


@pytest.mark.parametrize(
    ("files", "wrong", "message"),
    [
        ({"roles": "nccl_env_fabric: socket\npav_tests: [gpu_probe]\n"}, "roles",
         "pav_tests is read by the driver from {folder}/pav.yml only; move it there"),
        ({"roles": "k8s_namespace: x\n"}, "roles",
         "k8s_namespace is read by the driver from {folder}/k8s.yml only; move it there"),
        ({"pav": "k8s_privileged: true\n"}, "pav",
         "k8s_privileged is read by the driver from {folder}/k8s.yml only; move it there"),
        ({"k8s": "pav_hosts: 2\n"}, "k8s",
         "pav_hosts is read by the driver from {folder}/pav.yml only; move it there"),
        ({"pav": "pav_hosts: 2\nnccl_env_fabric: socket\n"}, "pav",
         "nccl_env_fabric is Ansible's (a role variable, ansible_* or a playbook key), not a driver setting; "
         "move it to {folder}/roles.yml"),
        ({"pav": "pav_become: false\n"}, "pav",
         "pav_become is Ansible's (a role variable, ansible_* or a playbook key), not a driver setting; "
         "move it to {folder}/roles.yml"),
    ],
)  # fmt: skip
def test_a_key_in_another_readers_file_is_refused(
    tmp_path: Path, files: dict[str, str], wrong: str, message: str
) -> None:
    env = split_env(tmp_path, **files)
    folder = env / "group_vars" / "all"
    refused = refusal(env)
    assert refused == f"{folder / wrong}.yml: " + message.format(folder=folder)
    assert_documented(f"error: {refused}")


def test_e_wins_over_the_files_for_both_families() -> None:
    settings = load_settings(
        K8S_ENV,
        {
            "k8s_namespace": "acceptance",
            "k8s_privileged": "true",
            "k8s_cpu_reserved": "16",
            "pav_hosts": "1",
        },
    )
    assert settings.hosts == 1 and load_settings(K8S_ENV).hosts == 2
    assert settings.k8s.namespace == "acceptance"
    assert settings.k8s.privileged is True and load_settings(K8S_ENV).k8s.privileged is False
    assert settings.k8s.cpu_reserved == 16 and settings.k8s.node_shape().cpu == 128 - 16
    assert settings.origins["k8s_privileged"] == "-e"
    assert load_config(K8S_ENV, {"k8s_namespace": "x"}).namespace == "x"


def test_a_wrong_k8s_value_in_e_names_e_and_the_key() -> None:
    assert refusal(K8S_ENV, {"k8s_privileged": "maybe"}) == (
        "-e: k8s_privileged must be true or false, got 'maybe'; fix that key"
    )
    assert refusal(K8S_ENV, {"k8s_node_preset": "huge"}).startswith(
        "-e: k8s_node_preset 'huge' is not a Nebius"
    )


def test_e_reaches_the_roles_variables_the_pods_are_given() -> None:
    """On k8s the driver derives the pods' NCCL environment from the nccl_env role's variables: -e over
    roles.yml, as Ansible would see them."""
    assert fabric_env(load_settings(K8S_ENV))["NCCL_IB_DISABLE"] == "0"
    socket = fabric_env(load_settings(K8S_ENV, {"nccl_env_fabric": "socket"}))
    assert socket["NCCL_IB_DISABLE"] == "1" and "NCCL_IB_HCA" not in socket


def test_e_k8s_namespace_reaches_every_manifest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("NEBIUS_IAM_TOKEN", "NEBIUS_SERVICE_ACCOUNT_ID", "KUBECONFIG"):
        monkeypatch.delenv(name, raising=False)
    run_dir = tmp_path / "run"
    args = ["--env", "nebius-eu-k8s", "--tests", "torch_nccl_allreduce", "-e", "k8s_namespace=acceptance"]
    assert cli.run([*args, "--dry-run", "--run-dir", str(run_dir)]) == 0
    written = [yaml.safe_load(p.read_text()) for p in sorted((run_dir / "manifests").glob("*.yaml"))]
    assert len(written) >= 2  # the payload's ConfigMap and the test's job
    namespaced = [m for m in written if m["kind"] != "ClusterTrainingRuntime"]  # the runtime: cluster-scoped
    assert len(namespaced) >= 2 and {m["metadata"]["namespace"] for m in namespaced} == {"acceptance"}


def test_a_vault_encrypted_driver_file_is_refused(tmp_path: Path) -> None:
    env = split_env(
        tmp_path, pav="$ANSIBLE_VAULT;1.1;AES256\n6162636465\n", vault="$ANSIBLE_VAULT;1.1;AES256\n61\n"
    )
    message = refusal(env)
    assert message.startswith(f"{env / 'group_vars' / 'all' / 'pav.yml'}: vault-encrypted")
    assert_documented(f"error: {message}")
    (env / "group_vars" / "all" / "pav.yml").unlink()
    assert load_settings(env).threshold_profile == "auto"  # vault.yml alone: Ansible's


def test_the_shipped_envs_are_split_by_reader() -> None:
    envs = sorted(p.parent for p in paths.INVENTORIES.glob("*/group_vars"))
    assert {e.name for e in envs} >= {"local", "sim", "nebius-eu", "nebius-us-h200", "nebius-eu-k8s"}
    for env in envs:
        folder = env / "group_vars" / "all"
        assert not (env / "group_vars" / "all.yml").exists(), env
        assert (folder / "pav.yml").is_file() and (folder / "roles.yml").is_file(), env
        found = read_group_vars(env)  # refuses a key in another reader's file
        settings = load_settings(env)
        assert found.of("pav") and found.of("roles"), env
        assert (folder / "k8s.yml").is_file() == (settings.platform == "k8s") == bool(found.of("k8s")), env
    k8s = load_settings(K8S_ENV).k8s
    assert (k8s.node_preset, k8s.privileged, k8s.namespace) == ("8gpu-128vcpu-1600gb", False, "pav")


def test_the_k8s_defaults_file_and_the_type_name_the_same_keys() -> None:
    defaults = yaml.safe_load(K8S_DEFAULTS.read_text())
    assert {f"k8s_{f.name}" for f in fields(K8sSettings)} == set(defaults)


def pav_imports(module: str) -> set[str]:
    """The pav modules a module imports, at the top or inside a function."""
    source = ROOT / "src" / "pav" / (module.replace(".", "/") + ".py")
    found: set[str] = set()
    for node in ast.walk(ast.parse(source.read_text())):
        names = []
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("pav"):
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for name in names:
            path = ROOT / "src" / (name.replace(".", "/") + ".py")
            if name.startswith("pav.") and path.is_file():
                found.add(name.removeprefix("pav."))
    return found


def test_the_settings_modules_import_one_way() -> None:
    """No cycle through any settings module: none is reached again from what it imports."""
    for start in SETTINGS_MODULES:
        seen, todo = set(), list(pav_imports(start))
        while todo:
            module = todo.pop()
            if module not in seen:
                seen.add(module)
                todo += pav_imports(module)
        assert start not in seen, f"pav.{start} imports itself back"
    assert "settings" not in pav_imports("setting_keys")
    assert not pav_imports("k8s_settings") & {"settings", "driver_settings", "setting_keys", "group_vars"}


def test_every_driver_setting_is_a_key_the_driver_reads_and_is_typed() -> None:
    """Settings' key fields are the pav_* keys read by the driver (setting_keys), each checked by its type:
    a value of another type is refused naming the key and the kind it must be."""
    from pav import driver_settings, setting_keys

    names = [f"pav_{f.name}" for f in driver_settings.key_fields()]
    assert "pav_k8s" not in names and "pav_role_vars" not in names  # loader fields, not keys
    assert all(setting_keys.reader(name) == "pav" for name in names), names
    with pytest.raises(PavError, match=r"x.yml: pav_hosts must be an integer, got 'three'"):
        driver_settings.settings_from({"pav_hosts": "three"}, "x.yml")
