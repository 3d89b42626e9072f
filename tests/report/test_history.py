"""history --env NAME: run dirs made from one real run's results.json, copied with numbers edited."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from pav import paths, rundir
from pav.reporting import html, summary
from pav.reporting.history import MIN_RUNS, Run, compare, record
from pav.reporting.history_key import key_of
from pav.results import RunResults
from tests.conftest import EARLIER_ID, LocalRun, assert_one_line_error, run_cli, run_cli_here

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
    # Faster bandwidth is no drop; a 10% longer step time is one, unless the tolerance allows it. (Three
    # earlier runs: fewer flag nothing.)
    write_runs(tmp_path, local_run.results, [(1.0, 1.0), (1.0, 1.0), (1.0, 1.0), (1.5, 1.1)])
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
    # The first in a process of its own, as the user meets it: its exit status, one line, no traceback.
    assert_one_line_error(
        run_cli("history", "--env", "nebius-eu", "--results-root", str(tmp_path)), "no runs of env nebius-eu"
    )
    assert_one_line_error(
        run_cli_here("history", "--env", "local", "--results-root", str(tmp_path / "nope")), "--results-root"
    )
    assert_one_line_error(
        run_cli_here("history", "--env", "local", "--results-root", str(tmp_path), "--tolerance", "5"),
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
    # Two runs are too few to tell a drop from noise (docs/nightly.md): 14% slower is not flagged, nor 30%.
    [early] = compare(run_with(0.114), earlier[:2])
    assert not early.flagged and early.allowed == 0.05
    assert not compare(run_with(0.130), earlier[:2])[0].flagged


def test_a_slower_small_message_latency_is_flagged() -> None:
    # The real 2x H200 run's latency sweep, then the same run with the 8-byte all_reduce 20% slower.
    base = json.loads((Path(__file__).parent / "fixtures" / "h200-2gpu-results.json").read_text())
    slower = copy.deepcopy(base)
    test = next(t for t in slower["tests"] if t["name"] == "torch_nccl_latency")
    test["metrics"]["time_us"]["all_reduce"]["8"] *= 1.2
    changes = {(c.test, c.metric): c for c in compare(slower, [base, base, base])}
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


# --- issue 38: history keyed by what was tested; no DROP from fewer than MIN_RUNS earlier runs ------------

CALIBRATION = Path(__file__).parents[1] / "thresholds" / "fixtures"
H100 = "NVIDIA H100 80GB HBM3"
NCCL = "torch_nccl_allreduce"
NCCL_8G = "busbw_gbps.all_reduce.8589934592"


def calibration(fixture: str) -> dict[str, Any]:
    """A real run's results.json (tests/thresholds/fixtures/README.md)."""
    return json.loads((CALIBRATION / fixture / "results.json").read_text())


def test_the_key_names_the_hosts_and_their_gpus() -> None:
    assert key_of(calibration("h100x2b-inventory")) == f"custom:gpu-host:2x{H100}"
    assert key_of(calibration("h100x4-inventory")) == f"custom:gpu-host:4x{H100}"
    assert key_of(calibration("h100x4-split-nvlink")) == f"custom:node-a,node-b:2x{H100}"
    assert key_of(calibration("h100x2b-healthy")) == f"local:localhost:2x{H100}"
    # A provisioning env names its hosts anew each run: they are counted, so its runs still compare.
    sim = {
        "env": "sim",
        "state_dir": "/s",
        "hosts": {f"sim-{i}": {"facts": {"gpu": {"count": 0}}} for i in "ab"},
    }
    renamed = sim | {"hosts": {f"sim-x{i}": h for i, h in enumerate(sim["hosts"].values())}}
    assert key_of(sim) == key_of(renamed) == "sim:2 hosts:no GPU"
    # Many named hosts: their count and a digest of the names, stable and telling inventories apart.
    many = {"env": "custom", "hosts": {f"n{i}": {} for i in range(6)}}
    other = {"env": "custom", "hosts": {f"m{i}": {} for i in range(6)}}
    assert key_of(many).startswith("custom:6 hosts #") and key_of(many).endswith(":GPUs unknown")
    assert key_of(many) == key_of(json.loads(json.dumps(many))) != key_of(other)


def copies(root: Path, fixture: str, factors: list[float], first_day: int = 1) -> list[str]:
    """The fixture's run, once per busbw factor, a day apart from first_day on; their run ids."""
    ids = []
    for day, factor in enumerate(factors, start=first_day):
        data = calibration(fixture)
        data["run_id"], data["started"] = f"{fixture}-{day}", f"2026-12-{day:02d}T00:00:00Z"
        test = next(t for t in data["tests"] if t["name"] == NCCL)
        sizes = test["metrics"]["busbw_gbps"]["all_reduce"]
        for size in sizes:
            sizes[size] *= factor
        (root / data["run_id"]).mkdir()
        (root / data["run_id"] / "results.json").write_text(json.dumps(data))
        ids.append(data["run_id"])
    return ids


def custom_history(root: Path, *args: str) -> tuple[int, dict[str, Any], str]:
    run = run_cli_here("history", "--env", "custom", "--results-root", str(root), "--json", *args)
    assert run.rc in (0, 1), run.stderr
    return run.rc, json.loads(run.stdout), run.stderr


def test_an_inventory_is_never_compared_with_other_hosts_or_gpus(tmp_path: Path) -> None:
    """Three nights of a 4-GPU inventory, then a 2-GPU one at half their bandwidth: both record env
    `custom`, yet the 2-GPU run has nothing to be compared with."""
    copies(tmp_path, "h100x4-inventory", [1.0, 1.0, 1.0])
    [latest] = copies(tmp_path, "h100x2b-inventory", [0.5], first_day=4)
    rc, hist, note = custom_history(tmp_path)
    assert (rc, hist["key"], hist["latest"]) == (0, f"custom:gpu-host:2x{H100}", latest)
    assert hist["compared_runs"] == [] and hist["flagged"] == 0 and hist["metrics"] == []
    assert f"custom:gpu-host:4x{H100}" in note  # the other key is named, with how to pick it
    table = run_cli_here("history", "--env", "custom", "--results-root", str(tmp_path))
    assert (
        f"custom:gpu-host:2x{H100}: one run ({latest})" in table.stdout
        and "nothing to compare" in table.stdout
    )
    # --key picks the 4-GPU runs: compared among themselves.
    rc, four, _ = custom_history(tmp_path, "--key", f"custom:gpu-host:4x{H100}")
    assert four["latest"] == "h100x4-inventory-3" and four["compared_runs"] == [
        "h100x4-inventory-1",
        "h100x4-inventory-2",
    ]
    assert_one_line_error(
        run_cli_here("history", "--env", "custom", "--results-root", str(tmp_path), "--key", "custom:nope"),
        "no runs of key custom:nope", f"custom:gpu-host:2x{H100}",
    )  # fmt: skip


@pytest.mark.parametrize("kept", [1, 2, 3])
def test_no_drop_is_flagged_from_fewer_than_min_runs_earlier_runs(tmp_path: Path, kept: int) -> None:
    """Half the bandwidth: a DROP against 3 earlier runs of the key, none against 1 or 2 (too few to tell
    a drop from noise), which the table says."""
    copies(tmp_path, "h100x2b-inventory", [1.0] * kept)
    copies(tmp_path, "h100x2b-inventory", [0.5], first_day=kept + 1)
    rc, hist, _ = custom_history(tmp_path)
    bw = metric(hist, NCCL, NCCL_8G)
    assert abs(bw["vs_previous"] + 0.5) < 1e-9 and abs(bw["vs_median"] + 0.5) < 1e-9
    assert hist["min_runs"] == MIN_RUNS == 3 and len(hist["compared_runs"]) == kept
    assert (rc, bw["flagged"]) == ((1, True) if kept >= MIN_RUNS else (0, False))
    table = run_cli_here("history", "--env", "custom", "--results-root", str(tmp_path)).stdout
    few = (
        f"none can be flagged yet: {kept} earlier run(s) of custom:gpu-host:2x{H100}; a drop is flagged once"
    )
    assert (few in table) == (kept < MIN_RUNS), table


def test_last_below_min_runs_is_refused(tmp_path: Path) -> None:
    assert_one_line_error(
        run_cli_here("history", "--env", "custom", "--results-root", str(tmp_path), "--last", "2"),
        f"--last must be at least {MIN_RUNS}",
    )


def test_docs_state_the_drop_rule_the_code_keeps() -> None:
    nightly = " ".join((paths.ROOT / "docs" / "nightly.md").read_text().split())
    assert f"No metric is flagged before {MIN_RUNS} earlier runs of the same key have it" in nightly
    assert "runs of `--inventory FILE` record `custom`" not in nightly  # history no longer lumps them


def test_the_summary_and_report_say_why_nothing_is_flagged_yet(tmp_path: Path) -> None:
    """One earlier run at twice the bandwidth: no DROP, and both renderings say why."""
    earlier = calibration("h100x2b-inventory")
    latest = copy.deepcopy(earlier) | {"run_id": "later", "started": "2027-01-01T00:00:00Z"}
    sizes = next(t for t in latest["tests"] if t["name"] == NCCL)["metrics"]["busbw_gbps"]["all_reduce"]
    sizes |= {size: value / 2 for size, value in sizes.items()}
    hist = record(latest, [Run(earlier["run_id"], earlier["started"], tmp_path, earlier)], tmp_path, 0.05, 5)
    assert hist["flagged"] == 0 and metric(hist, NCCL, NCCL_8G)["vs_previous"] == -0.5
    why = f"1 earlier run(s) of custom:gpu-host:2x{H100}; a drop is flagged once 3 are kept"
    results = RunResults("later", "custom", "hosts.yml", str(tmp_path), history=hist)
    assert f"history: {why}" in summary.render(results).splitlines()
    assert f"{why}." in html.render(results.to_dict(), tmp_path)


def test_a_series_restarts_where_the_workload_changed() -> None:
    """Issue 64: a nightly whose batch changed is another series, never a drop: the earlier runs of another
    workload are left out of the comparison, and the history says the series restarted."""

    def run(value: float, fingerprint: str) -> dict[str, Any]:
        test = {"name": "train_gpu_resnet50_ddp", "hosts": ["gpu-host"], "status": "pass",
                "metrics": {"samples_per_s_per_rank_min": value},
                "workload": {"fingerprint": fingerprint}}  # fmt: skip
        return {"tests": [test]}

    before = [run(2150.0, "batch64"), run(2148.0, "batch64"), run(2152.0, "batch64")]
    [change] = compare(run(1716.0, "batch256"), before)
    assert not change.flagged and change.median is None and change.restarted == 3
    [change] = compare(run(1716.0, "batch256"), [run(2150.0, "batch256")] * 3)
    assert change.flagged and change.restarted == 0  # the same workload: a drop
    [change] = compare(run(1716.0, "batch256"), [run(2150.0, "")] * 3)
    assert change.flagged and change.restarted == 0  # recorded before 1.4: cannot tell, so compared
