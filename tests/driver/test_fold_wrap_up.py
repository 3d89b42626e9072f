"""Which wrap-up work rides on validate's playbook (pav.stages.validate.folded): collect whenever the run
collects; teardown only of static hosts that no isolation re-run can still need. The local env's run shows
the saving itself (tests/driver/test_local_env.py: no collect or teardown playbook of their own)."""

from __future__ import annotations

import pytest

from pav.context import STAGES, Options
from pav.stages.validate import folded
from tests.driver.contexts import context


@pytest.mark.parametrize("hosts", [1, 2])
def test_static_hosts_too_few_to_isolate_collect_and_tear_down_in_validate(hosts: int) -> None:
    assert folded(context(hosts)) == {
        "pav_validate_collects": True, "pav_validate_tears_down": True, "collect_unpack": False,
    }  # fmt: skip


def test_three_hosts_keep_their_folders_for_isolation_unless_it_cannot_run() -> None:
    assert folded(context(3))["pav_validate_tears_down"] is False
    assert folded(context(3, isolate=False))["pav_validate_tears_down"] is True
    assert folded(context(3, launcher="slurm"))["pav_validate_tears_down"] is True


def test_a_provisioned_env_is_destroyed_by_its_own_stage_not_cleaned() -> None:
    found = folded(context(1, provisions=True))
    assert found["pav_validate_collects"] is True and found["pav_validate_tears_down"] is False


def test_keep_and_stage_subsets_are_honoured() -> None:
    assert folded(context(1, options=Options(keep=True)))["pav_validate_tears_down"] is False
    no_teardown = Options(stages=tuple(s for s in STAGES if s != "teardown"))
    assert folded(context(1, options=no_teardown))["pav_validate_tears_down"] is False
    no_collect = Options(stages=tuple(s for s in STAGES if s != "collect"))
    assert folded(context(1, options=no_collect))["pav_validate_collects"] is False
