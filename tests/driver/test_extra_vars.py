"""-e/--extra-vars as ansible-playbook takes them: parsed, refused with one line when malformed, over the
env's settings, into every playbook (roles check them), and the local env's own choice of the payload's
and the modules' Python."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest

from pav import module_python, torch_python
from pav.errors import PavError
from pav.extravars import parse_extra_vars
from pav.settings import load_settings
from tests.conftest import ROOT, assert_one_line_error, run_cli, run_cli_here


def test_the_forms_ansible_playbook_takes(tmp_path: Path) -> None:
    varfile = tmp_path / "vars.yml"
    varfile.write_text("pav_hosts: 4\nnested: {a: [1, 2]}\n")
    parsed = parse_extra_vars(["a=1 b='two words'", f"@{varfile}", '{"c": true}', "a=3"])
    assert parsed == {"a": "3", "b": "two words", "pav_hosts": 4, "nested": {"a": [1, 2]}, "c": True}


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ("novalue", "-e 'novalue': expected key=value, @file.yml or a YAML mapping"),
        ("=1", "-e '=1': expected key=value"),
        ("a='open", '-e "a=\'open": No closing quotation; close the quote'),
        ("{not: [closed", "not a valid mapping"),
        ("1x=2", "-e '1x': not a variable name"),
        ("pav_run_dir=/tmp/x", "-e pav_run_dir: the driver sets it for each run; use --run-dir"),
        ("@/nonexistent/vars.yml", "cannot read /nonexistent/vars.yml"),
    ],
)
def test_malformed_values_are_refused_naming_them(value: str, needle: str) -> None:
    with pytest.raises(PavError) as caught:
        parse_extra_vars([value])
    assert needle in str(caught.value)


def test_pav_keys_override_the_envs_settings_typed_as_yaml() -> None:
    base = load_settings(ROOT / "inventories" / "sim")
    settings = load_settings(ROOT / "inventories" / "sim", {"pav_hosts": "5", "pav_isolate": "false"})
    assert (base.hosts, base.isolate) == (3, True)
    assert (settings.hosts, settings.isolate) == (5, False)
    with pytest.raises(PavError, match=r"-e: pav_hosts must be an integer, got 'five'"):
        load_settings(ROOT / "inventories" / "sim", {"pav_hosts": "five"})


def test_a_bad_value_on_the_command_line_is_one_error_line() -> None:
    run = run_cli_here("--env", "sim", "--dry-run", "-e", "pav_test_timeout_s=soon")
    assert_one_line_error(run, "-e: pav_test_timeout_s must be an integer, got 'soon'")


def test_the_plan_reflects_a_pav_setting_from_the_command_line() -> None:
    run = run_cli_here("--env", "sim", "--dry-run", "-e", "pav_hosts=5")
    assert run.rc == 0, run.stderr
    assert "5 host(s), created by Terraform" in run.stdout


def test_local_env_prefers_the_drivers_python_when_it_has_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch_python.importlib.util, "find_spec", lambda name: object())
    assert torch_python.choose() == sys.executable


def test_local_env_falls_back_to_python3_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with_torch = tmp_path / "python3"
    with_torch.write_text("#!/bin/sh\nexit 0\n")  # finds torch, as the real check's exit 0 says
    with_torch.chmod(0o755)
    monkeypatch.setattr(torch_python.importlib.util, "find_spec", lambda name: None)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert torch_python.choose() == str(with_torch)
    with_torch.write_text("#!/bin/sh\nexit 1\n")  # no torch there either: none (the run stops, below)
    assert torch_python.choose() is None


def test_a_local_run_without_torch_stops_before_any_stage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 64: without torch a local run failed 13 s in, in configure, and its fix left out the `local`
    extra. It stops first, in one line naming a command that installs the extra's torch, no run dir made."""
    no_torch = tmp_path / "python3"
    no_torch.write_text("#!/bin/sh\nexit 1\n")  # the real check's exit 1: no torch
    no_torch.chmod(0o755)
    monkeypatch.setattr(torch_python, "_driver_has_torch", lambda: False)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    run_dir = tmp_path / "run"
    run = run_cli_here("--env", "local", "--run-dir", str(run_dir))
    install = f"{sys.executable} -m pip install torch==2.13.0"  # pyproject.toml's local extra, as pinned
    assert_one_line_error(
        run, f"env local runs the payload on this machine and needs torch, which neither the driver's Python "
        f"({sys.executable}) nor python3 on PATH ({no_torch}) has: install the local extra's torch into the "
        f"driver's Python ({install}; what `pip install 'provision-and-validate[local]'` installs), or pass "
        "-e torch_payload_python=PATH of a Python that has torch",
    )  # fmt: skip
    assert not run_dir.exists() and run.stdout == ""
    assert_one_line_error(run_cli_here("--env", "local", "--dry-run"), "needs torch")  # the dry run too
    teardown = run_cli_here("--env", "local", "--stages", "teardown", "--dry-run")  # runs no payload
    assert teardown.rc == 0, teardown.stderr


def test_local_env_runs_modules_with_the_system_python_when_ansible_can(tmp_path: Path) -> None:
    system = tmp_path / "python3"
    system.write_text("#!/bin/sh\nexit 0\n")  # the version check's exit 0: 3.8 or later
    system.chmod(0o755)
    assert module_python.choose(str(system)) == str(system)
    system.write_text("#!/bin/sh\nexit 1\n")  # older than ansible-core runs modules with
    assert module_python.choose(str(system)) == sys.executable
    assert module_python.choose(str(tmp_path / "absent")) == sys.executable


@pytest.mark.slow
def test_e_reaches_the_roles_and_names_the_python_it_chose(tmp_path: Path) -> None:
    no_torch = tmp_path / "python-without-torch"
    no_torch.write_text("#!/bin/sh\necho \"ModuleNotFoundError: No module named 'torch'\" >&2\nexit 1\n")
    no_torch.chmod(0o755)
    # configure, then the teardown that runs after any failure: configure alone would leave the run's
    # folder on the host (this machine's /var/lib/pav), and a second CLI run to remove it (issue 49).
    run = run_cli("--stages", "configure,teardown", "--run-dir", str(tmp_path / "run"),
                  "-e", f"torch_payload_python={no_torch}")  # fmt: skip
    assert run.rc == 2, run.stdout + run.stderr
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    stages = {s["name"]: s["status"] for s in results["stages"]}
    assert (stages["configure"], stages["teardown"]) == ("failed", "ok")
    assert not (Path("/var/lib/pav/runs") / results["run_id"]).exists()
    assert (
        f"the payload did not run with {no_torch} (ModuleNotFoundError: No module named 'torch')"
        in run.stderr
    )
    assert "-e torch_payload_python=" in run.stderr


@pytest.mark.slow
def test_e_values_are_checked_by_the_roles_argument_specs(tmp_path: Path) -> None:
    run = run_cli("--stages", "configure", "--run-dir", str(tmp_path / "run"),
                  "-e", "torch_payload_gpu_facts_timeout_s=soon")  # fmt: skip
    assert run.rc == 2, run.stdout + run.stderr
    assert "argument 'torch_payload_gpu_facts_timeout_s' is of type str" in run.stderr


# (value given with -e, what the role's spec and Ansible's validator say of it, the fix the line gives)
REFUSED = [
    (
        "torch_payload_gpu_facts_timeout_s=soon",
        "argument 'torch_payload_gpu_facts_timeout_s' is of type str and we were unable to convert to int",
        "role torch_payload's argument spec refuses it",
        "set torch_payload_gpu_facts_timeout_s to a whole number, e.g. 180",
    ),
    (
        "nccl_env_fabric=ib",
        "value of nccl_env_fabric must be one of: infiniband, roce, socket, got: ib",
        "role nccl_env's argument spec refuses it",
        "set nccl_env_fabric to one of infiniband, roce, socket",
    ),
    (
        "host_tuning_manage_shm=maybe",
        "unable to convert to bool",
        "role host_tuning's argument spec refuses it",
        "set host_tuning_manage_shm to true or false, e.g. true",
    ),
]


@pytest.mark.parametrize(("value", "ansible_says", "role", "fix"), REFUSED)
def test_the_dry_run_refuses_what_the_roles_argument_specs_refuse(
    value: str, ansible_says: str, role: str, fix: str
) -> None:
    """A real run refuses these only when the role starts, at configure (the slow test above): after
    provisioning, on a cloud env. The dry run says so before, in Ansible's words, with key, role and fix."""
    key = value.split("=")[0]
    run = run_cli_here("--dry-run", "-e", value)
    assert_one_line_error(run, f"-e: {key}=", role, ansible_says, fix)
    assert f"roles/{role.split()[1][:-2]}/meta/argument_specs.yml" in run.stderr


def test_the_dry_run_takes_what_the_roles_take(tmp_path: Path) -> None:
    """Ansible's conversions: -e strings that read as the type pass, a template is left to Ansible."""
    run = run_cli_here("--dry-run", "-e", "torch_payload_gpu_facts_timeout_s=60 host_tuning_manage_shm=no",
                  "-e", "nccl_env_fabric='{{ my_fabric }}'")  # fmt: skip
    assert run.rc == 0, run.stderr
    assert "tests (launcher direct):" in run.stdout


def test_the_dry_run_names_the_env_file_that_holds_a_refused_value(tmp_path: Path) -> None:
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all:\n  hosts:\n    localhost: {ansible_connection: local}\n")
    roles = tmp_path / "group_vars" / "all" / "roles.yml"
    roles.parent.mkdir(parents=True)
    roles.write_text("host_tuning_nofile: lots\n")
    run = run_cli_here("--inventory", str(inventory), "--dry-run")
    assert_one_line_error(run, f"{roles}: host_tuning_nofile='lots'", "role host_tuning's argument spec")


def test_the_line_docs_configuration_quotes_is_the_one_printed() -> None:
    doc = " ".join((ROOT / "docs" / "configuration.md").read_text().split())
    [quoted] = re.findall(r"`(error: -e: nccl_env_fabric=[^`]*)`", doc)
    run = run_cli_here("--dry-run", "-e", "nccl_env_fabric=ib")
    assert run.stderr.strip() == quoted
