"""--dry-run's plan (pav.plan.render): the stages, hosts and tests a run would take, with nothing changed
anywhere. Static hosts are listed; an env that provisions shows its Terraform root, variables and the
resources it declares, or, without the provision stage, what its state holds now."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from pav import catalog, plan
from pav.catalog import SLURM_CHECKS as CHECKS
from pav.context import STAGES, Options, RunContext
from pav.envs import resolve_env
from pav.settings import load_settings
from tests.driver.contexts import context

TUNING = (
    "/etc/security/limits.d/90-pav-gpu.conf, /etc/sysctl.d/90-pav-gpu.conf, /etc/pav/nccl.env, "
    "/etc/profile.d/pav-nccl.sh, /etc/fstab (/dev/shm)"
)


def marks(text: str) -> dict[str, str]:
    """stage -> its line after the [run ]/[skip] mark."""
    return {ln.split("] ")[1].split(":")[0]: ln.strip() for ln in text.splitlines() if ln.startswith("  [")}


def test_a_static_run_lists_its_stages_hosts_and_tests() -> None:
    ctx = context(2, tests=["torch_gloo_allreduce", "gpu_probe"])
    text = plan.render(ctx)
    assert text.startswith("env: t\nrun dir: run\nstages:\n")
    lines = marks(text)
    assert list(lines) == list(STAGES)
    assert lines["provision"] == "[run ] provision: static inventory"
    assert lines["configure"] == f"[run ] configure: tuning applied: writes {TUNING} on h[0-1]"
    assert lines["isolate"] == "[run ] isolate: a failing multi-host test re-runs on pairs of hosts"
    assert "hosts:\n  h0 (10.0.0.0)\n  h1 (10.0.0.1)\n" in text
    assert "threshold profile: auto: by the GPUs preflight finds, cpu without any" in text
    tests = text.split("tests (launcher direct):\n")[1].split("after the report:")[0].splitlines()
    assert [t.split()[:4] for t in tests] == [
        [
            "torch_gloo_allreduce",
            "host",
            "CPU",
            catalog.CATALOG["torch_gloo_allreduce"].description.split()[0],
        ],
        ["gpu_probe", "host", "GPU", catalog.CATALOG["gpu_probe"].description.split()[0]],
    ]


def test_the_plan_says_what_leaves_the_run_dir_flag_by_flag() -> None:
    ctx = context(2)
    assert plan.render(ctx).endswith("after the report:\n  nothing beyond the run dir (--metrics-textfile, "
                                     "--pushgateway, --on-fail, --recheck)\n")  # fmt: skip
    ctx.options.on_fail, ctx.options.metrics_textfile = "drain", Path("/prom")
    after = plan.render(ctx).split("after the report:\n")[1].splitlines()
    assert after == [
        "  metrics textfile: /prom/pav-t.prom (written, then renamed)",
        "  --on-fail drain: after a FAIL, drain each Slurm node its bad parts name (scontrol update "
        'State=DRAIN Reason="pav RUN_ID: ...")',
    ]
    ctx.options.recheck = True
    assert plan.render(ctx).endswith(
        "  --recheck: only the Slurm nodes this tool drained, each with the tests it failed; RESUME those "
        "that pass\n"
    )


def test_check_mode_stages_not_asked_for_and_keep() -> None:
    options = Options(stages=("configure", "validate"), keep=True, apply_tuning=False)
    lines = marks(plan.render(context(1, options=options, isolate=False, threshold_profile="cpu")))
    assert lines["provision"].startswith("[skip] provision")
    assert lines["configure"] == (
        "[run ] configure: tuning in check mode (diff only; hosts it did not create change with "
        f"--apply-tuning only): would write {TUNING} on h0"
    )
    assert lines["isolate"] == "[skip] isolate: off (pav_isolate is false: no re-runs)"
    assert lines["report"].startswith("[run ] report")  # always
    assert lines["teardown"] == "[skip] teardown: --keep"


def test_tuning_files_follow_extra_vars_and_the_envs_settings(tmp_path: Path) -> None:
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "all.yml").write_text("nccl_env_file: /opt/site/nccl.env\n")
    ctx = context(1, options=Options(extra_vars={"host_tuning_sysctl_file": "/etc/sysctl.d/99-x.conf"}))
    ctx.env = replace(ctx.env, inventory_dir=tmp_path)
    ctx.settings = load_settings(tmp_path, ctx.options.extra_vars)  # as make_context reads the env's files
    assert plan.tuning_files(ctx) == [
        "/etc/security/limits.d/90-pav-gpu.conf", "/etc/sysctl.d/99-x.conf", "/opt/site/nccl.env",
        "/etc/profile.d/pav-nccl.sh", "/etc/fstab (/dev/shm)",
    ]  # fmt: skip


def test_slurm_runs_list_the_slurm_checks_first() -> None:
    text = plan.render(context(2, launcher="slurm", tests=["torch_gloo_allreduce"]))
    listed = text.split("tests (launcher slurm):\n")[1].split("after the report:")[0]
    tests = [t.split()[0] for t in listed.splitlines()]
    assert tests == [*CHECKS, "torch_gloo_allreduce"]


@pytest.fixture
def sim_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> RunContext:
    monkeypatch.setenv("PAV_STATE_DIR", str(tmp_path / "state"))
    ctx = context(0, provisions=True, options=Options(hosts=2))
    ctx.env = resolve_env("sim")
    return ctx


def test_an_env_that_provisions_shows_its_root_variables_and_resources(
    sim_run: RunContext, tmp_path: Path
) -> None:
    text = plan.render(sim_run)
    root = sim_run.env.terraform_dir
    assert marks(text)["provision"] == f"[run ] provision: terraform apply in {root}"
    hosts = text.split("hosts:\n")[1].split("threshold profile:")[0]
    assert hosts.startswith(
        f"  2 host(s), created by Terraform root {root}\n  state dir: {tmp_path / 'state'}\n"
    )
    assert "    hosts = 2\n" in hosts and f"    state_dir = {tmp_path / 'state' / 'sim'}\n" in hosts
    assert hosts.endswith("  resources declared:\n    terraform_data.network\n    terraform_data.host\n")
    assert not (tmp_path / "state" / "ssh").exists()  # the preview made no key


def test_without_provision_the_plan_shows_what_the_state_holds(sim_run: RunContext, tmp_path: Path) -> None:
    sim_run.options.stages = ("validate", "collect", "report")
    hosts = plan.render(sim_run).split("hosts:\n")[1].split("threshold profile:")[0]
    assert hosts == f"  none: the env's state ({tmp_path / 'state'}) holds no hosts\n"
