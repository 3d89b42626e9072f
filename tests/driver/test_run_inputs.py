"""A run's inputs are resolved once, before any stage (pav.run_inputs): each flag beats its setting there and
nowhere else, the settings stay as the env's files and -e gave them, and the tests are selected once."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from pav import catalog, cli
from pav.context import RunContext
from pav.envs import custom_env
from pav.errors import PavError
from pav.options import Options
from pav.results import TestResult
from pav.run_inputs import RunInputs, resolve
from pav.settings import Settings, load_settings
from pav.stages import isolate, validate
from tests.conftest import ROOT
from tests.driver.contexts import context

SRC = ROOT / "src" / "pav"
INPUTS_MODULE = SRC / "run_inputs.py"
# The settings a flag overrides: read from ctx.inputs, never from the settings, outside the inputs module.
OVERRIDDEN = {"tests", "platform", "launcher", "test_timeout_s", "test_timeouts_s", "apply_tuning", "hosts",
              "threshold_profile", "isolate", "burn_in_s"}  # fmt: skip
FLAGS = {"tests", "platform", "launcher", "test_timeout_s", "hosts", "apply_tuning",
         "burn_in_s"}  # Options' of those  # fmt: skip
READ_FROM_INPUTS = {"settings": OVERRIDDEN, "options": FLAGS}

SETTINGS = """\
pav_tests: [torch_gloo_allreduce, ddp_cpu_train_multi]
pav_platform: hosts
pav_launcher: direct
pav_test_timeout_s: 600
pav_test_timeouts_s: {ddp_cpu_train_multi: 60}
pav_apply_tuning: false
"""


def own_inventory(tmp_path: Path, settings: str = SETTINGS) -> Path:
    (tmp_path / "hosts.yml").write_text("all:\n  hosts:\n    box1:\n      ansible_host: 10.0.0.1\n")
    (tmp_path / "group_vars").mkdir(exist_ok=True)
    (tmp_path / "group_vars" / "all.yml").write_text(settings)
    return tmp_path / "hosts.yml"


def made(*argv: str) -> RunContext:
    return cli.make_context(cli.build_parser().parse_args([*argv, "--dry-run", "--run-dir", "r"]))


def names(inputs: RunInputs) -> list[str]:
    return [spec.name for spec in inputs.tests]


def test_the_settings_decide_where_no_flag_is_given(tmp_path: Path) -> None:
    ctx = made("--inventory", str(own_inventory(tmp_path)))
    inputs = ctx.inputs
    assert names(inputs) == ["torch_gloo_allreduce", "ddp_cpu_train_multi"]
    assert (inputs.platform, inputs.launcher, inputs.apply_tuning) == ("hosts", "direct", False)
    assert inputs.timeouts.for_test("ddp_cpu_train_multi") == 60
    assert inputs.timeouts.for_test("torch_gloo_allreduce") == 600
    assert inputs.profile == "auto" == ctx.results.threshold_profile_chosen
    assert ctx.results.threshold_profile == ""  # resolved once, by the run's Judge (stages/report.py)


def test_every_flag_beats_its_setting_and_leaves_the_settings_as_the_files_say(tmp_path: Path) -> None:
    inventory = own_inventory(tmp_path)
    ctx = made("--inventory", str(inventory), "--tests", "mpi_allreduce,ddp_cpu_train", "--launcher", "slurm",
               "--test-timeout", "42", "--apply-tuning")  # fmt: skip
    inputs = ctx.inputs
    # --launcher slurm: Slurm's own checks run first, in the catalog's order.
    assert names(inputs) == [*catalog.SLURM_CHECKS, "mpi_allreduce", "ddp_cpu_train"]
    assert (inputs.launcher, inputs.apply_tuning) == ("slurm", True)
    # --test-timeout is every test's limit, a test's own pav_test_timeouts_s included.
    assert {inputs.timeouts.for_test(s.name) for s in inputs.tests} == {42}
    assert ctx.settings == load_settings(tmp_path, provisions=False)  # nothing written over
    assert ctx.settings.tests == ["torch_gloo_allreduce", "ddp_cpu_train_multi"]
    assert ctx.extravars()["pav_launcher"] == "slurm" and ctx.extravars()["pav_apply_tuning"] is True
    assert made("--inventory", str(inventory), "--check-tuning").inputs.apply_tuning is False


def test_the_platform_flag_beats_pav_platform(tmp_path: Path) -> None:
    gpu_tests = SETTINGS.replace("torch_gloo_allreduce, ddp_cpu_train_multi", "torch_nccl_allreduce")
    ctx = made("--inventory", str(own_inventory(tmp_path, gpu_tests)), "--platform", "k8s")
    assert ctx.inputs.platform == "k8s" and ctx.settings.platform == "hosts"


def test_the_hosts_flag_beats_pav_hosts() -> None:
    assert made("--env", "sim").inputs.host_count == 3  # the env's pav_hosts
    ctx = made("--env", "sim", "--hosts", "5")
    assert ctx.inputs.host_count == 5 and ctx.settings.hosts == 3


def test_inputs_are_frozen() -> None:
    inputs = context().inputs
    with pytest.raises(dataclasses.FrozenInstanceError):
        inputs.tests = ()  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        inputs.timeouts.default_s = 1  # type: ignore[misc]
    with pytest.raises(TypeError):
        inputs.timeouts.per_test["ddp_cpu_train"] = 1  # type: ignore[index]


def test_a_tests_own_timeout_and_the_flag_over_both() -> None:
    settings = Settings(test_timeout_s=600, test_timeouts_s={"ddp_cpu_train": 60})
    env = custom_env(ROOT / "inventories" / "local" / "hosts.yml")
    by_settings = resolve(env, Options(), settings).timeouts
    assert (by_settings.for_test("ddp_cpu_train"), by_settings.for_test("torch_gloo_allreduce")) == (60, 600)
    by_flag = resolve(env, Options(test_timeout_s=30), settings).timeouts
    assert (by_flag.for_test("ddp_cpu_train"), by_flag.for_test("torch_gloo_allreduce")) == (30, 30)
    assert settings.test_timeouts_s == {"ddp_cpu_train": 60}


def test_unknown_names_stop_the_run_naming_where_they_were_set(tmp_path: Path) -> None:
    inventory = own_inventory(tmp_path, SETTINGS + "pav_threshold_profile: h100-typo\n")
    with pytest.raises(PavError, match=r"unknown threshold profile 'h100-typo'.*fix pav_threshold_profile"):
        made("--inventory", str(inventory))
    with pytest.raises(PavError, match=r"unknown test\(s\) ddp_cpu_trian in --tests"):
        made("--inventory", str(own_inventory(tmp_path)), "--tests", "ddp_cpu_trian")
    typo = SETTINGS.replace("{ddp_cpu_train_multi: 60}", "{ddp_cpu_trian: 60}")
    with pytest.raises(PavError, match=r"ddp_cpu_trian in pav_test_timeouts_s of .*all\.yml"):
        made("--inventory", str(own_inventory(tmp_path, typo)))


def test_a_for_testing_test_without_its_switch_says_how_it_is_known(monkeypatch: pytest.MonkeyPatch) -> None:
    """A recheck re-runs what failed, a FOR TESTING test too (docs/slurm.md's sim walk): "unknown" would
    send the user looking for a typo."""
    monkeypatch.delenv("PAV_FAULT_TESTS", raising=False)
    with pytest.raises(PavError, match=r"fault_rank_exit in --tests are FOR TESTING .* PAV_FAULT_TESTS=1"):
        catalog.refuse_unknown(["fault_rank_exit"], "--tests")
    with pytest.raises(PavError, match="unknown test"):
        catalog.refuse_unknown(["fault_rank_exitt"], "--tests")
    monkeypatch.setenv("PAV_FAULT_TESTS", "1")
    catalog.refuse_unknown(["fault_rank_exit"], "--tests")


def test_a_k8s_run_refuses_a_cpu_test_and_the_slurm_launcher() -> None:
    env = custom_env(ROOT / "inventories" / "local" / "hosts.yml")
    with pytest.raises(PavError, match="test torch_gloo_allreduce runs through torchrun on CPUs"):
        resolve(env, Options(platform="k8s"), Settings(tests=["torch_gloo_allreduce"]))
    gpu = Settings(tests=["torch_nccl_allreduce"])
    with pytest.raises(PavError, match=r"drop --launcher slurm .* or run with --platform hosts"):
        resolve(env, Options(platform="k8s", launcher="slurm"), gpu)
    with pytest.raises(PavError, match="--launcher slurm launches on hosts"):
        resolve(env, Options(platform="k8s"), Settings(tests=["torch_nccl_allreduce"], launcher="slurm"))
    assert names(resolve(env, Options(platform="k8s"), gpu)) == ["torch_nccl_allreduce"]


@pytest.mark.parametrize(
    ("settings", "hosts", "why"),
    [
        ({}, 3, ""),
        ({}, 2, ""),
        ({"isolate": False}, 3, "pav_isolate is false: no re-runs"),
        ({"launcher": "slurm"}, 3, "pair re-runs are not done under --launcher slurm"),
    ],
)
def test_one_decision_whether_pairs_can_be_re_run(settings: dict[str, object], hosts: int, why: str) -> None:
    """validate keeps the hosts' folders exactly where the isolate stage may re-run on them; the isolate
    stage says why it does not."""
    test = "torch_gloo_collectives_multi"
    ctx = context(hosts, tests=[test], **settings)
    assert ctx.inputs.no_pair_reruns == why
    assert ctx.inputs.isolation_possible(hosts) == (not why and hosts >= 3)
    assert validate.folded(ctx)["pav_validate_tears_down"] is not ctx.inputs.isolation_possible(hosts)
    if why:
        ctx.results.tests.append(TestResult(test, ctx.host_names, "fail", "wrong result"))
        isolate.run(ctx)
        assert ctx.results.isolation["note"] == why and ctx.results.isolation["steps"] == []


def select_calls(source: str) -> list[int]:
    """Lines calling catalog.select (as catalog.select, or a name imported from pav.catalog)."""
    tree = ast.parse(source)
    imported = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "pav.catalog"
        for alias in node.names
        if alias.name == "select"
    }
    return sorted(
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and (
            (isinstance(node.func, ast.Attribute) and node.func.attr == "select"
             and isinstance(node.func.value, ast.Name) and node.func.value.id == "catalog")
            or (isinstance(node.func, ast.Name) and node.func.id in imported)
        )
    )  # fmt: skip


def test_tests_are_selected_in_the_inputs_module_only() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in sorted(SRC.rglob("*.py"))
        if path not in (INPUTS_MODULE, SRC / "catalog.py")
        for line in select_calls(path.read_text())
    ]
    fix = "catalog.select outside pav.run_inputs: read ctx.inputs.tests instead"
    assert not found, "\n".join([fix, *found])
    assert len(select_calls(INPUTS_MODULE.read_text())) == 1  # the one selection: the scan sees it


def test_the_select_scan_finds_every_form() -> None:
    source = (
        "from pav import catalog\nfrom pav.catalog import select as pick\n"
        "a = catalog.select(['x'])\nb = pick([])\nc = other.select()\n"
    )
    assert select_calls(source) == [3, 4]


def test_a_dry_run_selects_its_tests_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    calls: list[list[str]] = []
    real = catalog.select
    monkeypatch.setattr(catalog, "select", lambda names, where="": calls.append(list(names)) or real(names))
    assert cli.run(["--inventory", str(own_inventory(tmp_path)), "--dry-run", "--run-dir", "r"]) == 0
    assert calls == [["torch_gloo_allreduce", "ddp_cpu_train_multi"]]


def overridden_reads(source: str) -> list[tuple[int, str]]:
    """(line, owner.name) of every read of an overridden setting off something named settings, or of a flag
    that overrides one off something named options."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Attribute):
            continue
        value = node.value
        owner = (
            value.id
            if isinstance(value, ast.Name)
            else value.attr
            if isinstance(value, ast.Attribute)
            else ""
        )
        if node.attr in READ_FROM_INPUTS.get(owner, set()):
            found.append((node.lineno, f"{owner}.{node.attr}"))
    return sorted(found)


# The loader that reads and checks the settings, before any flag applies.
SETTINGS_LOADER = {"settings.py", "driver_settings.py", "k8s_settings.py", "group_vars.py"}


def test_no_stage_reads_a_setting_a_flag_overrides() -> None:
    """A stage that read ctx.settings.tests would miss --tests, one that read ctx.options.hosts pav_hosts:
    the settings hold what the files say, the options what the command line says; the inputs both."""
    found = [
        f"{path.relative_to(ROOT)}:{line}: {name}"
        for path in sorted(SRC.rglob("*.py"))
        if path != INPUTS_MODULE and path.name not in SETTINGS_LOADER
        for line, name in overridden_reads(path.read_text())
    ]
    assert not found, "read these from ctx.inputs (pav.run_inputs):\n" + "\n".join(found)
    source = "ctx.settings.tests\nsettings.hosts\nctx.settings.remote_dir\nctx.options.hosts\noptions.keep\n"
    assert overridden_reads(source) == [(1, "settings.tests"), (2, "settings.hosts"), (4, "options.hosts")]
