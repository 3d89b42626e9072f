"""Settings from group_vars: per-test timeouts over the run's one limit, bad values named by key."""

from __future__ import annotations

from pathlib import Path

import pytest

from pav import catalog
from pav.errors import PavError
from pav.launches import HostView, plan_launches
from pav.settings import settings_from
from tests.conftest import assert_one_line_error, run_cli


def test_a_tests_own_timeout_wins_over_the_runs() -> None:
    settings = settings_from({"pav_test_timeout_s": 600, "pav_test_timeouts_s": {"ddp_cpu_train": 60}}, "gv")
    host = HostView("h0", "10.0.0.1", {"gpu": {"count": 0}, "cpu": {"vcpus": 4}})
    launches, _ = plan_launches(
        catalog.select(["ddp_cpu_train", "torch_gloo_allreduce"]), [host], settings, "r"
    )
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


def test_an_unknown_test_in_the_timeouts_is_refused(tmp_path: Path) -> None:
    (tmp_path / "hosts.yml").write_text("all:\n  hosts:\n    localhost:\n      ansible_connection: local\n")
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "all.yml").write_text("pav_test_timeouts_s:\n  ddp_cpu_trian: 60\n")
    run = run_cli("--inventory", str(tmp_path / "hosts.yml"), "--dry-run")
    assert_one_line_error(run, "ddp_cpu_trian", "pav_test_timeouts_s")
