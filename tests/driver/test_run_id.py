"""Run ids name each run's folder on every host and mark its processes: two runs started in the same second
(CI jobs on one inventory, parallel tests) must get different ids, which still sort in time order."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from pav import rundir


class Clock:
    def __init__(self, *times: datetime) -> None:
        self.times = list(times)

    def now(self, tz: object = None) -> datetime:
        return self.times.pop(0)


def test_runs_in_the_same_second_get_different_ids_in_time_order(monkeypatch: pytest.MonkeyPatch) -> None:
    first = datetime(2026, 11, 24, 23, 3, 20, 512_731, tzinfo=UTC)
    second = first.replace(microsecond=513_002)
    monkeypatch.setattr(rundir, "datetime", Clock(first, second))
    ids = [rundir.new_run_id("local"), rundir.new_run_id("local")]
    assert ids == ["20261124T230320.512Z-local", "20261124T230320.513Z-local"]
    assert sorted(ids) == ids


def test_the_id_is_a_basic_iso_timestamp_and_the_env() -> None:
    assert re.fullmatch(r"\d{8}T\d{6}\.\d{3}Z-sim", rundir.new_run_id("sim"))
