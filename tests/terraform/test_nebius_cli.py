"""--env nebius-eu without a cloud: the dry run shows root, variables and resources; a real run without
credentials stops before anything is created, naming the missing credential."""

from __future__ import annotations

import os
from pathlib import Path

from tests.conftest import assert_one_line_error, run_cli

NO_CREDS = {k: "" for k in os.environ if k.startswith("NEBIUS_")}


def test_dry_run_shows_root_and_declared_resources(tmp_path: Path) -> None:
    env = {**NO_CREDS, "PAV_STATE_DIR": str(tmp_path / "state")}
    run = run_cli("--env", "nebius-eu", "--dry-run", "--hosts", "2", env=env)
    assert run.rc == 0, run.stderr
    assert "terraform/envs/nebius-eu" in run.stdout
    assert "module.cluster.nebius_compute_v1_instance.node" in run.stdout
    assert "module.cluster.nebius_compute_v1_gpu_cluster.this" in run.stdout
    assert "NEBIUS_IAM_TOKEN is not set" in run.stdout
    assert not (tmp_path / "state").exists()


def test_run_without_credentials_stops_before_creating(tmp_path: Path) -> None:
    env = {**NO_CREDS, "PAV_STATE_DIR": str(tmp_path / "state"), "NEBIUS_IAM_TOKEN": ""}
    run = run_cli("--env", "nebius-eu", "--run-dir", str(tmp_path / "run"), env=env)
    assert_one_line_error(run, "NEBIUS_IAM_TOKEN")
    assert not (tmp_path / "state" / "terraform.tfstate").exists()
    assert not (tmp_path / "state" / ".terraform").exists()
