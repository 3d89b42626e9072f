"""The history command (pav.commands.history) in process, on run dirs of real GPU runs of one machine
(tests/thresholds/fixtures): a healthy run, then one with GPU 0 busy, under one results root."""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import pytest

from pav.commands import history
from tests.thresholds.test_real_gpu_runs import FIXTURES

ENV = "local"


def run(root: Path, env: str = ENV, last: int = 5, tolerance: float = 0.05, as_json: bool = False) -> int:
    args = argparse.Namespace(
        env=env, results_root=root, last=last, tolerance=tolerance, json=as_json, key=None
    )
    return history.run(args)


def add_run(root: Path, fixture: str) -> str:
    (root / fixture).mkdir(parents=True)
    shutil.copy(FIXTURES / fixture / "results.json", root / fixture / "results.json")
    return json.loads((root / fixture / "results.json").read_text())["run_id"]


def add_earlier(root: Path, fixture: str, count: int = history.history.MIN_RUNS) -> str:
    """COUNT copies of a run, started a day before the fixtures were: a drop is judged from MIN_RUNS earlier
    runs of the same key. Returns the last one's id."""
    data = json.loads((FIXTURES / fixture / "results.json").read_text())
    for i in range(count):
        data["run_id"], data["started"] = f"20261125T00000{i}.000Z-{ENV}", f"2026-11-25T00:00:0{i}Z"
        (root / data["run_id"]).mkdir(parents=True)
        (root / data["run_id"] / "results.json").write_text(json.dumps(data))
    return data["run_id"]


def test_a_busy_gpus_run_after_a_healthy_one_is_flagged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    healthy, busy = add_earlier(tmp_path, "h100x4-healthy"), add_run(tmp_path, "h100x4-gpu-busy")
    assert run(tmp_path) == history.EXIT_DROP
    out = capsys.readouterr().out
    assert f"run {busy} vs previous {healthy} and the median of 3 run(s)" in out.splitlines()[0]
    drops = [line.split()[1:3] for line in out.splitlines() if line.startswith("DROP")]
    assert ["torch_nccl_allreduce", "busbw_gbps.all_reduce.8589934592"] in drops
    assert run(tmp_path, as_json=True) == history.EXIT_DROP
    as_json = json.loads(capsys.readouterr().out)
    assert as_json["latest"] == busy and as_json["flagged"] == len(drops)


def test_the_tolerance_decides_what_is_a_drop(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Bandwidth halved (-55%) passes a 60% tolerance; step and collective times doubled (-105% and worse)
    do not."""
    add_earlier(tmp_path, "h100x4-healthy")
    add_run(tmp_path, "h100x4-gpu-busy")
    assert run(tmp_path, tolerance=0.6) == history.EXIT_DROP
    drops = [line.split()[2] for line in capsys.readouterr().out.splitlines() if line.startswith("DROP")]
    assert drops and not any(metric.startswith("busbw_gbps") for metric in drops)
    assert all(metric.startswith("time_us.") or metric == "step_time_s_median" for metric in drops)


def test_one_run_has_nothing_to_compare_with(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    only = add_run(tmp_path, "h100x4-healthy")
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "results.json").write_text("{not json")
    assert run(tmp_path) == history.EXIT_OK
    captured = capsys.readouterr()
    key = f"{ENV}:localhost:4xNVIDIA H100 80GB HBM3"  # what the run tested (reporting/history_key.py)
    assert captured.out == f"{key}: one run ({only}) under {tmp_path}; nothing to compare with yet\n"
    assert f"warning: skipped {tmp_path / 'broken' / 'results.json'}: not readable JSON" in captured.err


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"last": 0}, "error: --last must be at least 3"),
        ({"tolerance": 1.5}, "error: --tolerance is a fraction between 0 and 1, e.g. 0.05 for 5%"),
        ({"env": "nebius-eu"}, "error: no runs of env nebius-eu under "),
    ],
)
def test_bad_input_is_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kwargs: dict[str, object], error: str
) -> None:
    add_run(tmp_path, "h100x4-healthy")
    assert run(tmp_path, **kwargs) == 2  # type: ignore[arg-type]
    assert capsys.readouterr().err.startswith(error)


def test_a_results_root_that_is_not_a_folder_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(tmp_path / "nowhere") == 2
    assert f"results root {tmp_path / 'nowhere'} is not a folder" in capsys.readouterr().err
