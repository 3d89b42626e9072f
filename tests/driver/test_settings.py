"""Settings from group_vars: per-test timeouts over the run's one limit, bad values named by key."""

from __future__ import annotations

from pathlib import Path

import pytest

from pav import cli, run_inputs
from pav.envs import resolve_env
from pav.errors import PavError
from pav.launches import HostView, plan_launches
from pav.options import Options
from pav.results import HostRecord
from pav.settings import Settings, load_settings, settings_from
from pav.stages.report import run_judge
from tests.conftest import assert_one_line_error, run_cli_here
from tests.driver.contexts import context


def test_a_tests_own_timeout_wins_over_the_runs() -> None:
    settings = settings_from({"pav_test_timeout_s": 600, "pav_test_timeouts_s": {"ddp_cpu_train": 60}}, "gv")
    settings.tests = ["ddp_cpu_train", "torch_gloo_allreduce"]
    inputs = run_inputs.resolve(resolve_env("local"), Options(), settings)
    host = HostView("h0", "10.0.0.1", {"gpu": {"count": 0}, "cpu": {"vcpus": 4}})
    launches, _ = plan_launches(list(inputs.tests), [host], settings, "r", inputs.timeouts.for_test)
    assert {la.test: la.timeout_s for la in launches} == {"ddp_cpu_train": 60, "torch_gloo_allreduce": 600}


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"ddp_cpu_train": 0}, "pav_test_timeouts_s.ddp_cpu_train must be a positive number of seconds"),
        ({"ddp_cpu_train": "1h"}, "pav_test_timeouts_s.ddp_cpu_train must be a positive number of seconds"),
        (["ddp_cpu_train"], "pav_test_timeouts_s must be a mapping of test name to seconds"),
    ],
)
def test_bad_per_test_timeouts_name_the_key(value: object, message: str) -> None:
    with pytest.raises(PavError, match=message):
        settings_from({"pav_test_timeouts_s": value}, "group_vars/all.yml")


def test_no_hosts_set_by_e_is_refused_naming_the_setting() -> None:
    """-e pav_hosts=0 once passed a dry run, and the sim provider then blamed --hosts 0 (issue 51)."""
    run = run_cli_here("--env", "sim", "-e", "pav_hosts=0", "--dry-run")
    assert_one_line_error(run, "pav_hosts must be at least 1, got 0", "-e")


def test_an_unknown_test_in_the_timeouts_is_refused(tmp_path: Path) -> None:
    (tmp_path / "hosts.yml").write_text("all:\n  hosts:\n    localhost:\n      ansible_connection: local\n")
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "all.yml").write_text("pav_test_timeouts_s:\n  ddp_cpu_trian: 60\n")
    run = run_cli_here("--inventory", str(tmp_path / "hosts.yml"), "--dry-run")
    assert_one_line_error(run, "ddp_cpu_trian", "pav_test_timeouts_s")


def test_hosts_the_tool_did_not_create_are_tuned_only_when_told(tmp_path: Path) -> None:
    (tmp_path / "hosts.yml").write_text("all:\n  hosts:\n    box1:\n      ansible_connection: local\n")
    own = ("--inventory", str(tmp_path / "hosts.yml"), "--dry-run")
    plan = run_cli_here(*own).stdout
    assert (
        "configure: tuning in check mode (diff only; hosts it did not create change with --apply-tuning"
        in plan
    )
    assert "would write /etc/security/limits.d/90-pav-gpu.conf, /etc/sysctl.d/90-pav-gpu.conf" in plan
    assert "/etc/pav/nccl.env, /etc/profile.d/pav-nccl.sh, /etc/fstab (/dev/shm) on box1" in plan
    assert "configure: tuning applied: writes /etc/security" in run_cli_here(*own, "--apply-tuning").stdout
    assert "configure: tuning applied" in run_cli_here(*own, "-e", "pav_apply_tuning=true").stdout
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "all.yml").write_text("pav_apply_tuning: true\nnccl_env_file: /opt/nccl.env\n")
    plan = run_cli_here(*own).stdout
    assert "configure: tuning applied: writes" in plan and "/opt/nccl.env" in plan


def test_the_default_profile_is_auto() -> None:
    """Healthy GPU hosts of an own inventory are held to their GPUs' profile, not cpu's (issue 36)."""
    assert Settings().threshold_profile == "auto"


def test_an_own_inventory_without_a_profile_resolves_auto_by_its_hosts_gpus(tmp_path: Path) -> None:
    (tmp_path / "hosts.yml").write_text("all:\n  hosts:\n    box1:\n      ansible_host: 10.0.0.1\n")
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "all.yml").write_text("pav_tests: [gpu_probe]\n")
    for group_vars in (True, False):  # with a settings file that names no profile, and with none
        if not group_vars:
            (tmp_path / "group_vars" / "all.yml").unlink()
        settings = load_settings(tmp_path, provisions=False)
        assert settings.threshold_profile == "auto"
    ctx = context(threshold_profile=settings.threshold_profile)
    h100 = [["0", "NVIDIA H100 80GB HBM3"]] * 8
    ctx.results.hosts = {"box1": HostRecord("box1", facts={"gpu": {"count": 8, "devices": h100}})}
    assert run_judge(ctx).profile.name == "h100-sxm-8gpu" == ctx.results.threshold_profile
    ctx.judge = None  # a run's judge is made once; another run's hosts need their own
    ctx.results.hosts = {"box1": HostRecord("box1", facts={"gpu": {"count": 0, "devices": []}})}
    assert run_judge(ctx).profile.name == "cpu"


def test_a_dry_run_says_what_auto_will_pick(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "hosts.yml").write_text("all:\n  hosts:\n    box1:\n      ansible_connection: local\n")
    plan = dry_run(capsys, "--inventory", str(tmp_path / "hosts.yml"))
    assert "threshold profile: auto: by the GPUs preflight finds, cpu without any, h100-sxm-8gpu" in plan
    assert "threshold profile: cpu\n" in dry_run(capsys, "--env", "sim")  # pinned: see its group_vars
    assert "threshold profile: h100-sxm-8gpu\n" in dry_run(capsys, "--env", "nebius-eu")


def dry_run(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """The plan, in-process (cli.run: main's signal handlers stay out of the test process)."""
    assert cli.run([*args, "--dry-run", "--run-dir", "r"]) == 0
    return capsys.readouterr().out
