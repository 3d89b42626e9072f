"""Choosing the platform: pav_platform in an env, --platform on the command line; bad values are one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from pav.errors import PavError
from pav.settings import load_settings
from tests.conftest import assert_one_line_error, run_cli_here


def test_pav_platform_must_be_hosts_or_k8s(tmp_path: Path) -> None:
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "all.yml").write_text("pav_platform: kubernetes\n")
    with pytest.raises(PavError, match="pav_platform must be hosts or k8s, got 'kubernetes'"):
        load_settings(tmp_path)


def test_platform_flag_on_an_env_with_cpu_tests_is_one_clear_line(tmp_path: Path) -> None:
    result = run_cli_here(
        "--env", "local", "--platform", "k8s", "--dry-run", "--run-dir", str(tmp_path / "run")
    )
    assert_one_line_error(result, "take it out of pav_tests")


def test_a_k8s_run_with_a_cpu_test_stops_before_provision(tmp_path: Path) -> None:
    """Not a dry run: the refusal comes before provision would create a paid cluster, with nothing written."""
    run_dir = tmp_path / "run"
    result = run_cli_here(
        "--env", "nebius-eu-k8s", "--tests", "torch_gloo_allreduce", "--run-dir", str(run_dir)
    )
    assert_one_line_error(result, "test torch_gloo_allreduce runs through torchrun on CPUs", "take it out")
    assert not run_dir.exists() and "provision" not in result.stdout
