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


def nothing_run(root: Path, fixture: str, run_id: str, started: str, env: str = ENV) -> None:
    """A run of the same machine whose every test was skipped (NOTHING RUN): it measured nothing."""
    data = json.loads((FIXTURES / fixture / "results.json").read_text())
    data |= {"run_id": run_id, "started": started, "env": env, "verdict": "NOTHING RUN"}
    data["tests"] = [t | {"status": "skipped", "reason": "no GPU", "metrics": {}} for t in data["tests"]]
    (root / run_id).mkdir(parents=True)
    (root / run_id / "results.json").write_text(json.dumps(data))


def test_runs_that_measured_nothing_are_left_out_and_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 64: a NOTHING RUN was a "previous" run of the series (and one of the last N), with no figure."""
    healthy, busy = add_earlier(tmp_path, "h100x4-healthy"), add_run(tmp_path, "h100x4-gpu-busy")
    skipped = f"20261126T000000.000Z-{ENV}"
    nothing_run(tmp_path, "h100x4-healthy", skipped, "2026-11-26T00:00:00Z")  # between the two
    assert run(tmp_path) == history.EXIT_DROP
    out = capsys.readouterr().out
    assert f"run {busy} vs previous {healthy} and the median of 3 run(s)" in out.splitlines()[0]
    left_out = (
        "left out 1 run(s) that measured nothing (NOTHING RUN, or ERROR before any test passed or failed)"
    )
    assert f"{left_out}: {skipped} (NOTHING RUN)" in out
    assert run(tmp_path, as_json=True) == history.EXIT_DROP
    as_json = json.loads(capsys.readouterr().out)
    assert skipped not in as_json["compared_runs"] and as_json["left_out"] == [skipped]


def test_an_inventory_env_that_measured_nothing_hints_its_inventory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run given --inventory records env `custom`: the hint was `--env custom`, an env that does not exist;
    it is the recorded inventory, and the results root history was given."""
    inventory = tmp_path / "my hosts.yml"
    nothing_run(tmp_path / "runs", "h100x4-healthy", "20261126T000000.000Z-custom", "2026-11-26Z", "custom")
    record = tmp_path / "runs" / "20261126T000000.000Z-custom" / "results.json"
    record.write_text(json.dumps(json.loads(record.read_text()) | {"inventory": str(inventory)}))
    assert run(tmp_path / "runs", env="custom") == 2
    err = capsys.readouterr().err
    assert err.startswith(
        f"error: no run of env custom under {tmp_path / 'runs'} measured anything: left out 1"
    )
    assert err.rstrip().endswith(
        f"once its tests can run there: provision-and-validate --inventory '{inventory}' "
        f"--results-root {tmp_path / 'runs'}"
    )
    assert "--env custom" not in err
    (tmp_path / "empty").mkdir()
    assert run(tmp_path / "empty", env="custom") == 2
    err = capsys.readouterr().err
    assert "(a run given --inventory FILE records that env)" in err and "--env custom" not in err
