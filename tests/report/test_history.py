"""history --env NAME: run dirs made from one real run's results.json, copied with numbers edited."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from pav import paths, rundir
from pav.reporting.history import compare
from tests.conftest import EARLIER_ID, LocalRun, assert_one_line_error, run_cli

BUSBW = "busbw_gbps.all_reduce.1048576"


def write_runs(
    root: Path, base: dict[str, Any], factors: list[tuple[float, float]], env: str = "local"
) -> None:
    """One run per (busbw factor, step time factor), a day apart, oldest first; dir names do not say env."""
    for day, (bw, step) in enumerate(factors, start=1):
        data = copy.deepcopy(base)
        data["env"], data["run_id"] = env, f"run-{day}"
        data["started"] = f"2026-01-{day:02d}T00:00:00Z"
        for test in data["tests"]:
            metrics = test["metrics"]
            for sizes in (metrics.get("busbw_gbps") or {}).values():
                for size in sizes:
                    sizes[size] *= bw
            if "step_time_s_median" in metrics:
                metrics["step_time_s_median"] *= step
        (root / f"nightly-{day}").mkdir(parents=True)
        (root / f"nightly-{day}" / "results.json").write_text(json.dumps(data))


def history(root: Path, *args: str) -> tuple[int, dict[str, Any]]:
    run = run_cli("history", "--env", "local", "--results-root", str(root), "--json", *args)
    assert run.rc in (0, 1), run.stderr
    return run.rc, json.loads(run.stdout)


def metric(hist: dict[str, Any], test: str, name: str) -> dict[str, Any]:
    return next(m for m in hist["metrics"] if m["test"] == test and m["metric"] == name)


def test_a_bandwidth_drop_is_flagged(local_run: LocalRun, tmp_path: Path) -> None:
    write_runs(tmp_path, local_run.results, [(1.0, 1.0), (1.02, 1.0), (0.98, 1.0), (0.80, 1.0)])
    rc, hist = history(tmp_path, "--last", "3")
    assert rc == 1
    assert hist["latest"] == "run-4" and hist["previous"] == "run-3"
    assert hist["compared_runs"] == ["run-1", "run-2", "run-3"]
    bw = metric(hist, "torch_gloo_allreduce", BUSBW)
    assert bw["flagged"] and bw["better"] == "higher"
    assert abs(bw["vs_previous"] - (0.80 / 0.98 - 1)) < 1e-9
    assert abs(bw["vs_median"] - (0.80 - 1)) < 1e-9  # median of 1.0, 1.02, 0.98
    assert not metric(hist, "ddp_cpu_train", "step_time_s_median")["flagged"]
    table = run_cli("history", "--env", "local", "--results-root", str(tmp_path))
    assert table.rc == 1
    assert any(line.startswith("DROP") and BUSBW in line for line in table.stdout.splitlines()), table.stdout


def test_direction_matters_and_tolerance_applies(local_run: LocalRun, tmp_path: Path) -> None:
    # Faster bandwidth is no drop; a 10% longer step time is one, unless the tolerance allows it.
    write_runs(tmp_path, local_run.results, [(1.0, 1.0), (1.5, 1.1)])
    rc, hist = history(tmp_path)
    step = metric(hist, "ddp_cpu_train", "step_time_s_median")
    assert rc == 1 and step["better"] == "lower" and step["flagged"]
    assert not metric(hist, "torch_gloo_allreduce", BUSBW)["flagged"]
    rc, hist = history(tmp_path, "--tolerance", "0.2")
    assert rc == 0 and hist["flagged"] == 0


def test_runs_are_matched_by_recorded_env(local_run: LocalRun, tmp_path: Path) -> None:
    write_runs(tmp_path / "a", local_run.results, [(1.0, 1.0), (0.5, 1.0)], env="other")
    write_runs(tmp_path / "b", local_run.results, [(1.0, 1.0)])
    for src in (tmp_path / "a").iterdir():
        src.rename(tmp_path / f"other-{src.name}")
    for src in (tmp_path / "b").iterdir():
        src.rename(tmp_path / f"local-{src.name}")
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "results.json").write_text("{cut off")
    run = run_cli("history", "--env", "local", "--results-root", str(tmp_path))
    assert run.rc == 0, run.stdout + run.stderr
    assert "one run (run-1)" in run.stdout and "nothing to compare" in run.stdout
    assert "skipped" in run.stderr and "broken" in run.stderr


def test_no_runs_is_one_line_error(tmp_path: Path) -> None:
    assert_one_line_error(
        run_cli("history", "--env", "nebius-eu", "--results-root", str(tmp_path)), "no runs of env nebius-eu"
    )
    assert_one_line_error(
        run_cli("history", "--env", "local", "--results-root", str(tmp_path / "nope")), "--results-root"
    )
    assert_one_line_error(
        run_cli("history", "--env", "local", "--results-root", str(tmp_path), "--tolerance", "5"),
        "--tolerance",
    )


def test_report_stage_compares_with_earlier_runs(local_run: LocalRun) -> None:
    """The real run found the earlier run under PAV_RESULTS_ROOT and wrote the comparison."""
    assert local_run.run_dir.parent == local_run.root  # the default run dir lives under the root
    hist = local_run.results["history"]
    assert hist["previous"] == EARLIER_ID and hist["flagged"] >= 1
    assert metric(hist, "torch_gloo_allreduce", BUSBW)["flagged"]
    assert "DROP" in (local_run.run_dir / "report.html").read_text()
    # The terminal summary names the drop too, not only report.html.
    assert "history: " in local_run.output and f"DROP torch_gloo_allreduce {BUSBW}" in local_run.output


def run_with(step_time: float) -> dict[str, Any]:
    test = {
        "name": "ddp_cpu_train",
        "hosts": ["h0"],
        "status": "pass",
        "metrics": {"step_time_s_median": step_time},
    }
    return {"env": "local", "tests": [test]}


def test_a_change_within_the_kept_runs_own_spread_is_no_drop() -> None:
    # Back-to-back CPU runs: step time moves 15% either way on its own.
    earlier = [run_with(t) for t in (0.100, 0.115, 0.085)]
    [noise] = compare(run_with(0.114), earlier)  # 14% slower than the median: within the spread
    assert not noise.flagged and abs(noise.allowed - 0.15) < 1e-9
    [drop] = compare(run_with(0.130), earlier)  # 30% slower: beyond it
    assert drop.flagged
    [early] = compare(run_with(0.114), earlier[:2])  # two runs show no spread yet: the 5% tolerance rules
    assert early.flagged and early.allowed == 0.05


def test_a_slower_small_message_latency_is_flagged() -> None:
    # The real 2x H200 run's latency sweep, then the same run with the 8-byte all_reduce 20% slower.
    base = json.loads((Path(__file__).parent / "fixtures" / "h200-2gpu-results.json").read_text())
    slower = copy.deepcopy(base)
    test = next(t for t in slower["tests"] if t["name"] == "torch_nccl_latency")
    test["metrics"]["time_us"]["all_reduce"]["8"] *= 1.2
    changes = {(c.test, c.metric): c for c in compare(slower, [base])}
    latency = changes[("torch_nccl_latency", "time_us.all_reduce.8")]
    assert latency.better == "lower" and latency.flagged
    assert not changes[("torch_nccl_latency", "time_us.all_reduce.4096")].flagged


def test_the_default_results_root_is_the_checkouts_runs_wherever_it_is_called_from(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("PAV_RESULTS_ROOT", raising=False)
    monkeypatch.delenv("PAV_RUNS", raising=False)
    monkeypatch.chdir(tmp_path)
    assert rundir.results_root() == paths.ROOT / "runs"
    assert rundir.default_run_dir("r1") == paths.ROOT / "runs" / "r1"
