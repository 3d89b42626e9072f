"""--env nebius-eu without a cloud: the dry run shows root, variables and resources; a real run without
credentials stops before anything is created, naming the missing credential."""

from __future__ import annotations

import os
from pathlib import Path

from tests.conftest import assert_one_line_error, run_cli_here

NO_CREDS = {k: "" for k in os.environ if k.startswith("NEBIUS_")}


def test_dry_run_shows_root_and_declared_resources(tmp_path: Path) -> None:
    env = {**NO_CREDS, "PAV_STATE_DIR": str(tmp_path / "state")}
    run = run_cli_here("--env", "nebius-eu", "--dry-run", "--hosts", "2", env=env)
    assert run.rc == 0, run.stderr
    assert "terraform/envs/nebius-vm" in run.stdout
    assert "module.cluster.nebius_compute_v1_instance.node" in run.stdout
    assert "module.cluster.module.base.nebius_compute_v1_gpu_cluster.this" in run.stdout
    assert "region: eu-north1" in run.stdout and "platform: gpu-h100-sxm" in run.stdout
    assert "NEBIUS_IAM_TOKEN is not set" in run.stdout
    assert not (tmp_path / "state").exists()


def test_run_without_credentials_stops_before_creating(tmp_path: Path) -> None:
    env = {**NO_CREDS, "PAV_STATE_DIR": str(tmp_path / "state"), "NEBIUS_IAM_TOKEN": ""}
    run = run_cli_here("--env", "nebius-eu", "--run-dir", str(tmp_path / "run"), env=env)
    assert_one_line_error(run, "NEBIUS_IAM_TOKEN")
    assert not (tmp_path / "state" / "terraform.tfstate").exists()
    assert not (tmp_path / "state" / ".terraform").exists()


def test_dry_run_with_credentials_shows_the_variables_and_max_hours(tmp_path: Path) -> None:
    values = tmp_path / "terraform.yml"
    values.write_text("parent_id: project-e00planted\ninfiniband_fabric: fabric-3\nmax_lifetime_hours: 24\n")
    token = "planted-token-" + "x" * 20
    env = {**NO_CREDS, "PAV_STATE_DIR": str(tmp_path / "state"), "PAV_TFVARS": str(values),
           "NEBIUS_IAM_TOKEN": token}  # fmt: skip
    run = run_cli_here("--env", "nebius-eu", "--dry-run", "--hosts", "2", "--max-hours", "3", env=env)
    assert run.rc == 0, run.stderr
    shown = {ln.strip() for ln in run.stdout.splitlines()}
    assert {"parent_id = project-e00planted", "node_count = 2", "max_lifetime_hours = 3"} <= shown
    assert token not in run.stdout + run.stderr
    assert not (tmp_path / "state").exists()


def test_max_hours_is_refused_where_nothing_is_labelled() -> None:
    assert_one_line_error(
        run_cli_here("--env", "sim", "--dry-run", "--max-hours", "3"), "--max-hours", "nebius"
    )
    assert_one_line_error(run_cli_here("--env", "nebius-eu", "--dry-run", "--max-hours", "0"), "--max-hours")
