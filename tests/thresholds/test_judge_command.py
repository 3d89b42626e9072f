"""`provision-and-validate judge RUN_DIR|results.json`: a recorded run judged again by this release's gates.

The runs here are made by the report stage itself from raw host results written as collect leaves them
(rank JSONs, launcher.rc, an nccl-tests log), so judging them again must give the verdict they recorded;
a test its gates did not decide (a rank's failure, a timeout, wrong elements) keeps its recorded outcome.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from pav.catalog import CATALOG
from pav.commands.judge import rejudge
from pav.judging import explained_by_gates
from pav.launch import Launch
from pav.reporting import metrics, metrics_export
from pav.reporting.exposition import render
from pav.results import HostRecord, RunResults, TestResult
from pav.stages import report
from pav.workload import declared
from tests.conftest import assert_one_line_error, run_cli, run_cli_here
from tests.driver.contexts import context
from tests.thresholds.test_derive import H100, NDR, SIZE, hgx, probe_metrics

NCCL_LOGS = Path(__file__).parents[1] / "nccl_tests" / "fixtures"
HOSTS = ("h0", "h1")


def host_facts() -> dict[str, Any]:
    """8x H100 SXM on NVSwitch, 8 NDR ports: auto picks h100-sxm-8gpu (GPUs named as preflight does)."""
    facts = hgx(8, ports=NDR)
    facts["gpu"] = {"count": "8", "devices": [[str(i), H100] for i in range(8)]}
    return facts


def write(run_dir: Path, test: str, host: str, rc: int, ranks: list[dict[str, Any]], log: str = "") -> None:
    folder = run_dir / "hosts" / host / "results" / test
    folder.mkdir(parents=True)
    (folder / "launcher.rc").write_text(f"{rc}\n")
    (folder / "launcher.log").write_text(log)
    spec = CATALOG[test]
    for r in ranks:
        # As the payload records them: what the catalog ran it with (its workload, pav.workload).
        r = r | {"params": declared(spec.args, spec.launcher)}
        (folder / f"{test}.rank{r['rank']}.json").write_text(json.dumps(r))


def rank(r: int, host: str, kind: str, metrics: dict[str, Any], world: int = 1, **outcome: str) -> Any:
    status, reason = outcome.get("status", "pass"), outcome.get("reason", "")
    return {"rank": r, "world_size": world, "hostname": host, "kind": kind, "status": status,
            "reason": reason, "metrics": metrics}  # fmt: skip


def collective(busbw: float, size: int = SIZE) -> dict[str, Any]:
    return {"results": [{"op": "all_reduce", "size_bytes": size, "busbw_gbps": busbw, "wrong": 0}]}


def launch(test: str, launcher: str, scope: str, ranks: dict[str, int]) -> Launch:
    argv = {h: ["all_reduce_perf"] if launcher == "nccl_tests" else ["x"] for h in ranks}
    return Launch(test, launcher, scope, 60, argv, dict(ranks), members=list(ranks))


def make_run(tmp_path: Path, degraded: bool = True) -> Path:
    """A 2-host run judged by the report stage. Degraded: h1's GPU 2 is slow (a derived gate), the
    inter-node all_reduce is under the profile's gate, and three tests fail before any gate: a rank's
    wrong result, a timeout, nccl-tests' wrong elements."""
    run_dir = tmp_path / "run"
    ctx = context(hosts=2, threshold_profile="auto")
    ctx.run_dir, ctx.options.results_root = run_dir, tmp_path / "no-earlier-runs"
    ctx.results.hosts = {h: HostRecord(h, facts=host_facts()) for h in HOSTS}
    ctx.results.stage("validate").status = "ok"
    slow = [760.0, 757.0, 0.42 * 760.0, *[759.0] * 5] if degraded else [760.0] * 8
    write(run_dir, "gpu_probe", "h0", 0, [rank(0, "h0", "probe", probe_metrics([760.0] * 8))])
    write(run_dir, "gpu_probe", "h1", 0, [rank(0, "h1", "probe", probe_metrics(slow))])
    gloo = {"results": [{"op": "all_reduce", "size_bytes": 1024, "busbw_gbps": 0.1, "wrong": 0}]}
    bad = {"status": "fail", "reason": "all_reduce 1024: 3 wrong elements"} if degraded else {}
    write(run_dir, "torch_gloo_allreduce", "h0", 1 if degraded else 0,
          [rank(0, "h0", "collectives", gloo, 2, **bad), rank(1, "h0", "collectives", gloo, 2)])  # fmt: skip
    write(run_dir, "torch_gloo_allreduce", "h1", 0,
          [rank(0, "h1", "collectives", gloo, 2), rank(1, "h1", "collectives", gloo, 2)])  # fmt: skip
    busbw = 100.0 if degraded else 380.0
    for k, host in enumerate(HOSTS):
        ranks = [rank(k * 8 + i, host, "collectives", collective(busbw), 16) for i in range(8)]
        write(run_dir, "torch_nccl_allreduce_multi", host, 0, ranks)
    good = (NCCL_LOGS / "oci_h100_2node_all_reduce_perf.txt").read_text()
    wrong = (NCCL_LOGS / "olivia_gh200_wrong_all_reduce_perf.txt").read_text()
    write(run_dir, "nccl_tests_all_reduce", "h0", 0, [], good)
    write(run_dir, "nccl_tests_all_reduce", "h1", 0, [], wrong if degraded else good)
    ctx.launches = [
        launch("gpu_probe", "torchrun", "host", {"h0": 1, "h1": 1}),
        launch("torch_gloo_allreduce", "torchrun", "host", {"h0": 2, "h1": 2}),
        launch("torch_nccl_allreduce_multi", "torchrun", "cluster", {"h0": 8, "h1": 8}),
        launch("nccl_tests_all_reduce", "nccl_tests", "host", {"h0": 8, "h1": 8}),
    ]
    if degraded:
        write(run_dir, "train_gpu_single", "h0", 124, [])
        ctx.launches.append(launch("train_gpu_single", "torchrun", "host", {"h0": 1}))
    report.judge(ctx)
    # As the CLI stamps every run at its end: a record without one is exported with the time of the export.
    ctx.results.ended = "2026-11-27T02:00:00Z"
    ctx.results.write(run_dir / "results.json")
    return run_dir


def statuses(found: Any) -> dict[tuple[str, str], tuple[str, str]]:
    return {(r.test.name, ",".join(r.test.hosts)): (r.test.status, r.test.reason) for r in found.tests}


def recorded_statuses(run_dir: Path) -> dict[tuple[str, str], tuple[str, str]]:
    tests = json.loads((run_dir / "results.json").read_text())["tests"]
    return {(t["name"], ",".join(t["hosts"])): (t["status"], t["reason"]) for t in tests}


def test_a_run_judged_by_this_release_gets_its_own_verdict_again(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path)
    recorded = json.loads((run_dir / "results.json").read_text())
    assert recorded["verdict"] == "FAIL" and recorded["threshold_profile"] == "h100-sxm-8gpu"
    found = rejudge(run_dir)
    assert (found.verdict, found.profile) == ("FAIL", "h100-sxm-8gpu")
    assert statuses(found) == recorded_statuses(run_dir)
    how = {(r.test.name, ",".join(r.test.hosts)): r.how for r in found.tests}
    # Decided by gates: judged again (from the raw results). Decided before them: kept as recorded.
    assert how[("gpu_probe", "h1")] == how[("torch_nccl_allreduce_multi", "h0,h1")] == "gates"
    assert how[("nccl_tests_all_reduce", "h0")] == how[("gpu_probe", "h0")] == "gates"
    assert how[("torch_gloo_allreduce", "h0")] == how[("train_gpu_single", "h0")] == "recorded"
    assert how[("nccl_tests_all_reduce", "h1")] == "recorded"
    assert how[("gpu_health", "h0")] == "facts"
    assert found.gates == recorded["gates"]


def test_the_profile_as_chosen_is_read_from_the_record_not_from_its_gates(tmp_path: Path) -> None:
    """results.json records the profile as chosen (threshold_profile_chosen) and as resolved, once each
    (issue 51): gpu-correctness chosen turns the derived gates off whatever the recorded gates say."""
    run_dir = make_run(tmp_path)
    data = json.loads((run_dir / "results.json").read_text())
    assert (data["threshold_profile_chosen"], data["threshold_profile"]) == ("auto", "h100-sxm-8gpu")
    assert statuses(rejudge(run_dir))[("gpu_probe", "h1")][0] == "fail"  # h1's GPU 2: a derived gate
    data["threshold_profile_chosen"] = data["threshold_profile"] = "gpu-correctness"
    data["gates"] = {}  # nothing in them says the derived gates were off: only the record does
    (run_dir / "results.json").write_text(json.dumps(data))
    found = rejudge(run_dir)
    assert found.profile == "gpu-correctness"
    assert statuses(found)[("gpu_probe", "h1")][0] == "pass"


def test_its_results_json_alone_gets_the_same_verdict(tmp_path: Path) -> None:
    """Without the raw host results the recorded metrics are judged; the outcome is the same."""
    run_dir = make_run(tmp_path)
    bare = tmp_path / "copied.json"
    shutil.copy(run_dir / "results.json", bare)
    found = rejudge(bare)
    assert found.verdict == "FAIL" and statuses(found) == recorded_statuses(run_dir)
    [gloo] = [r for r in found.tests if r.test.name == "torch_gloo_allreduce" and r.test.hosts == ["h0"]]
    assert gloo.how == "recorded"


def test_a_healthy_run_passes_again_and_the_command_prints_it(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path, degraded=False)
    assert json.loads((run_dir / "results.json").read_text())["verdict"] == "PASS"
    run = run_cli_here("judge", str(run_dir))
    assert run.rc == 0, run.stdout + run.stderr
    assert f"== {run_dir / 'results.json'}" in run.stdout
    assert "profile h100-sxm-8gpu: PASS (recorded PASS)" in run.stdout
    assert "FAIL" not in run.stdout


def test_the_command_names_each_failing_reason_and_its_json(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path)
    run = run_cli_here("judge", str(run_dir / "results.json"))
    assert run.rc == 1, run.stdout + run.stderr
    assert "profile h100-sxm-8gpu: FAIL (recorded FAIL)" in run.stdout
    out = run.stdout
    assert "FAIL gpu_probe on h1: GPU 2 (00000000:38:00.0, GPU-0002-uuid): gemm_bf16_tflops.2 319.2" in out
    assert "FAIL torch_nccl_allreduce_multi on h[0-1]: busbw_gbps.all_reduce.8589934592=100 below" in out
    assert "FAIL train_gpu_single on h0 (as recorded: not decided by gates): timeout after 60s" in out
    as_json = json.loads(run_cli_here("judge", str(run_dir), "--json").stdout)
    assert set(as_json) == {
        "file", "run_id", "profile", "recorded_profile", "verdict", "recorded_verdict", "error",
        "nothing_run", "summary", "tests",
    }  # fmt: skip
    assert (as_json["verdict"], as_json["recorded_verdict"]) == ("FAIL", "FAIL")
    assert as_json["profile"] == as_json["recorded_profile"] == "h100-sxm-8gpu"
    gloo = next(t for t in as_json["tests"] if t["name"] == "torch_gloo_allreduce" and t["hosts"] == ["h0"])
    assert gloo == {
        "name": "torch_gloo_allreduce", "hosts": ["h0"], "status": "fail",
        "reason": "rank 0: all_reduce 1024: 3 wrong elements", "recorded_status": "fail",
        "judged": "recorded",
    }  # fmt: skip
    assert as_json["summary"] == {"pass": 5, "fail": 5, "skipped": 0, "error": 0, "interrupted": 0}


def nothing_run_record(run_dir: Path) -> Path:
    """A run on a machine without a GPU whose every test was skipped: NOTHING RUN, exit 2."""
    tests = [TestResult(name, ["box"], "skipped", "no GPU") for name in ("sdc_check", "gpu_burn")]
    results = RunResults("r1", "local", "hosts.yml", str(run_dir), "cpu", "auto", tests=tests)
    results.hosts = {"box": HostRecord("box", facts={})}
    results.stage("validate").status, results.verdict = "ok", "NOTHING RUN"
    run_dir.mkdir()
    results.write(run_dir / "results.json")
    return run_dir


def test_a_nothing_run_record_exits_as_the_run_did_and_says_why(tmp_path: Path) -> None:
    """Issue 64: the run exited 2 (NOTHING RUN) and `judge` of its record exited 1 without saying why."""
    run_dir = nothing_run_record(tmp_path / "run")
    run = run_cli_here("judge", str(run_dir))
    assert run.rc == 2, run.stdout + run.stderr
    assert ": NOTHING RUN (recorded NOTHING RUN)" in run.stdout
    why = "every planned test was skipped: no GPU (sdc_check, gpu_burn on box)"
    assert f"nothing was run: {why}" in run.stdout
    as_json = run_cli_here("judge", str(run_dir), "--json")
    assert as_json.rc == 2 and json.loads(as_json.stdout)["nothing_run"] == why


def test_a_record_whose_driver_died_names_the_stage_it_died_in(tmp_path: Path) -> None:
    """Issue 64: a driver killed mid-run (SIGKILL, power loss: no reaper to record it) left a record of the
    stages it finished and nothing of the one it died in. Each stage is on disk as it starts."""
    run_dir = nothing_run_record(tmp_path / "run")
    data = json.loads((run_dir / "results.json").read_text())
    started = "2026-11-29T08:00:00Z"
    data |= {"verdict": "ERROR", "tests": [], "stage_in_progress": "validate"}
    data["stages"] = [{"name": "validate", "status": "running", "started": started}]
    (run_dir / "results.json").write_text(json.dumps(data))
    run = run_cli_here("judge", str(run_dir))
    assert run.rc == 1, run.stdout + run.stderr
    how = "its driver was killed, or it is still running"
    assert (
        f"the run could not finish: the run stopped in stage validate (started {started}): {how}"
        in run.stdout
    )
    data["stages"] = [{"name": "configure", "status": "running", "started": started}]
    data["stage_in_progress"] = "configure"
    (run_dir / "results.json").write_text(json.dumps(data))
    assert_one_line_error(
        run_cli_here("judge", str(run_dir)),
        "holds no test results to judge (the run did not validate: the run stopped in stage configure "
        f"(started {started}): {how})",
    )


def test_another_profile_judges_the_measurements_and_keeps_what_gates_did_not_decide(tmp_path: Path) -> None:
    """--profile gpu-correctness, chosen, sets no bandwidth gate and turns the derived gates off: the slow
    GPU and the slow fabric pass; the rank's wrong result, the timeout and the wrong elements still fail."""
    run_dir = make_run(tmp_path)
    found = rejudge(run_dir, "gpu-correctness")
    now = statuses(found)
    assert now[("gpu_probe", "h1")][0] == now[("torch_nccl_allreduce_multi", "h0,h1")][0] == "pass"
    failing = sorted(key for key, (status, _) in now.items() if status != "pass")
    assert failing == [
        ("nccl_tests_all_reduce", "h1"), ("torch_gloo_allreduce", "h0"), ("train_gpu_single", "h0")
    ]  # fmt: skip
    run = run_cli_here("judge", str(run_dir), "--profile", "gpu-correctness")
    assert "profile gpu-correctness (recorded: h100-sxm-8gpu): FAIL" in run.stdout
    assert "PASS gpu_probe on h1 (recorded fail)" in run.stdout


def test_a_copied_run_dir_with_a_results_folder_missing_keeps_the_recorded_outcome(tmp_path: Path) -> None:
    """Where the raw results cannot prove the measurement again (rank files gone), nothing is re-judged."""
    run_dir = make_run(tmp_path)
    for path in (run_dir / "hosts" / "h1" / "results" / "gpu_probe").glob("*.rank*.json"):
        path.unlink()
    found = rejudge(run_dir)
    [probe] = [r for r in found.tests if r.test.name == "gpu_probe" and r.test.hosts == ["h1"]]
    assert probe.how == "recorded" and probe.test.status == "fail"


# --- which recorded outcomes the gates decided ----------------------------------------------------------


def recorded(status: str, reason: str, metrics: dict[str, Any], threshold: dict[str, Any]) -> TestResult:
    return TestResult("t", ["h"], status, reason, metrics, threshold)  # type: ignore[arg-type]


LOW = {"metric": "x", "min": 10.0}
DERIVED = {
    "metric": "y.0", "basis": "absolute", "status": "fail", "reason": "GPU 0: y.0 1 GB/s, expected >= 5"
}  # fmt: skip


@pytest.mark.parametrize(
    ("case", "status", "reason", "threshold", "decided"),
    [
        ("profile gate", "fail", "x=3 below the minimum 10", {"gates": [LOW]}, True),
        ("profile then derived", "fail", "x=3 below the minimum 10; GPU 0: y.0 1 GB/s, expected >= 5",
         {"gates": [LOW, DERIVED]}, True),
        ("derived alone", "fail", DERIVED["reason"], {"gates": [{"metric": "x", "max": 9.0}, DERIVED]}, True),
        ("no gate in the profile", "fail", "no threshold is set for this test in the profile",
         {"gates": []}, True),
        ("missing fact", "error", "no performance gate for y.0: GPU model 'Foo' has no entry (and 1 more)",
         {"gates": [], "missing": ["GPU model 'Foo' has no entry"]}, False),
        ("missing fact, profile gate held", "error",
         "no performance gate for y.0: GPU model 'Foo' has no entry (and 1 more)",
         {"gates": [{"metric": "x", "max": 9.0}], "missing": ["GPU model 'Foo' has no entry"]}, True),
        ("a rank's failure", "fail", "rank 1: wrong result", {"gates": [LOW]}, False),
        ("a rank's failure, gates failing too", "fail", "rank 1: wrong", {"gates": [LOW, DERIVED]}, False),
        ("timeout", "fail", "timeout after 60s on h; killed on the host", {"gates": [LOW]}, False),
        ("no result", "error", "no result came back from h (it did not run, or collect failed)", {}, False),
        ("a failed Slurm job", "fail", "slurm job 9 FAILED (exit code 1:0); x=3 below the minimum 10",
         {"gates": [LOW]}, False),
        ("skipped", "skipped", "no GPU", {}, False),
    ],
)  # fmt: skip
def test_a_failure_is_judged_again_only_where_its_gates_explain_all_of_it(
    case: str, status: str, reason: str, threshold: dict[str, Any], decided: bool
) -> None:
    test = recorded(status, reason, {"x": 3.0, "y": {"0": 1.0}}, threshold)
    assert explained_by_gates(test) is decided, case


def test_nccl_tests_gate_failures_are_told_from_correctness_failures() -> None:
    gate = {"size_bytes": SIZE, "min_busbw_gbps": 337.5, "why": ""}
    metrics = {"op": "all_reduce", "busbw_gbps": {str(SIZE): 120.0}, "wrong_total": 0}
    slow = "all_reduce 8G: busbw 120.00 GB/s below the required 337.50 GB/s"
    assert explained_by_gates(recorded("fail", slow, metrics, {"nccl_tests": [gate]}))
    wrong = f"wrong elements in 1 of 5 rows (first: 8G #wrong=4); {slow}"
    assert not explained_by_gates(recorded("fail", wrong, metrics, {"nccl_tests": [gate]}))
    assert not explained_by_gates(recorded("fail", "nccl-tests exited 1; see x", metrics, {"nccl_tests": []}))


# --- bad input ------------------------------------------------------------------------------------------


def test_bad_input_is_one_error_line(tmp_path: Path) -> None:
    # The first in a process of its own, as the user meets it: its exit status, one line, no traceback.
    assert_one_line_error(run_cli("judge", str(tmp_path / "nope.json")), "cannot read", "nope.json")
    assert_one_line_error(run_cli_here("judge", str(tmp_path)), f"{tmp_path} holds no results.json")
    broken = tmp_path / "results.json"
    broken.write_text("{not json")
    assert_one_line_error(
        run_cli_here("judge", str(broken)), "cannot read", "pass a run dir or its results.json"
    )
    broken.write_text(json.dumps({"tests": [{"name": "t", "status": "great"}], "hosts": {}}))
    assert_one_line_error(run_cli_here("judge", str(broken)), "status 'great'")
    broken.write_text(json.dumps({"tests": [], "hosts": {}, "threshold_profile": "gone-profile"}))
    assert_one_line_error(
        run_cli_here("judge", str(broken)), "threshold profile 'gone-profile'", "--profile NAME"
    )
    unknown = run_cli_here("judge", str(broken), "--profile", "nope")
    assert_one_line_error(unknown, "unknown threshold profile 'nope'", "fix --profile")


def test_a_recorded_run_is_exported_again_as_it_recorded_it(tmp_path: Path) -> None:
    """--metrics-textfile writes what the run itself would have (its recorded verdict and time); a push that
    fails is a FAILED line and the exit code stays the verdict's."""
    run_dir = make_run(tmp_path)
    recorded = json.loads((run_dir / "results.json").read_text())
    textfiles = tmp_path / "prom"
    textfiles.mkdir()
    dead = "http://127.0.0.1:9/"  # discard port: nothing listens
    run = run_cli_here("judge", str(run_dir), "--metrics-textfile", str(textfiles), "--pushgateway", dead)
    assert run.rc == 1, run.stdout + run.stderr
    written = textfiles / metrics_export.textfile_name(recorded["env"])
    assert written.read_text() == render(metrics.families(recorded))
    assert f"metrics: textfile {written}: " in run.stdout
    assert f"metrics: pushgateway {dead} FAILED: " in run.stdout
    as_json = json.loads(
        run_cli_here("judge", str(run_dir), "--json", "--metrics-textfile", str(textfiles)).stdout
    )
    assert [(e["to"], e["ok"]) for e in as_json["exports"]] == [("textfile", True)]
    assert sorted(p.name for p in textfiles.iterdir()) == [written.name]  # renamed into place, no temp left
    bad = run_cli_here("judge", str(run_dir), "--pushgateway", "gw:9091")
    assert_one_line_error(bad, "--pushgateway", "is not an http(s) URL")


def test_an_older_run_is_never_exported_over_a_newer_runs_textfile(tmp_path: Path) -> None:
    """Issue 48: `judge OLD --metrics-textfile DIR` replaced the newer run's metrics node_exporter serves as
    the env's latest (its verdict, the alerts' end time) with the older run's, without a word."""
    run_dir = make_run(tmp_path)
    recorded = json.loads((run_dir / "results.json").read_text())
    recorded |= {"run_id": "20261101T020000.000Z-t", "ended": "2026-11-01T02:30:00Z"}
    (run_dir / "results.json").write_text(json.dumps(recorded))
    textfiles = tmp_path / "prom"
    textfiles.mkdir()
    written = textfiles / metrics_export.textfile_name(recorded["env"])
    newest = "20261102T020000.512Z-t"
    newer_text = render(metrics.families(recorded | {"run_id": newest, "ended": "2026-11-02T02:30:00Z"}))
    written.write_text(newer_text)
    refused = run_cli_here("judge", str(run_dir), "--metrics-textfile", str(textfiles))
    assert_one_line_error(
        refused,
        f"--metrics-textfile: {written} holds the metrics of run {newest}, newer than run "
        f"{recorded['run_id']}: ",
        "pass --replace-newer to replace them anyway, or another --metrics-textfile DIR",
        documented=True,
    )
    assert refused.stdout == "" and written.read_text() == newer_text
    assert sorted(p.name for p in textfiles.iterdir()) == [written.name]
    # Asked for in so many words, it is written; and over an older run's, or its own, it always is.
    forced = run_cli_here("judge", str(run_dir), "--metrics-textfile", str(textfiles), "--replace-newer")
    assert forced.rc == 1 and f"metrics: textfile {written}: " in forced.stdout, forced.stdout + forced.stderr
    assert written.read_text() == render(metrics.families(recorded))
    again = run_cli_here("judge", str(run_dir), "--metrics-textfile", str(textfiles))
    assert again.rc == 1 and f"metrics: textfile {written}: " in again.stdout, again.stdout + again.stderr
    older = recorded | {"run_id": "20261031T020000Z-t", "ended": "2026-10-31T02:30:00Z"}
    written.write_text(render(metrics.families(older)))
    assert run_cli_here("judge", str(run_dir), "--metrics-textfile", str(textfiles)).rc == 1
    assert written.read_text() == render(metrics.families(recorded))


def test_which_run_a_textfile_holds_is_read_from_its_start_else_its_end(tmp_path: Path) -> None:
    """Run ids begin with their start (UTC); an id that does not (a hand-made record) is compared by end."""
    mine = {"env": "t", "run_id": "20261101T020000.100Z-t", "ended": "2026-11-01T03:00:00Z"}

    def holding(results: dict[str, Any]) -> metrics_export.Newer | None:
        (tmp_path / "pav-t.prom").write_text(render(metrics.families(results | {"tests": [], "hosts": {}})))
        return metrics_export.newer_in_textfile(tmp_path, mine)

    assert metrics_export.newer_in_textfile(tmp_path / "none", mine) is None
    later = holding({"env": "t", "run_id": "20261101T020000.2Z-t", "ended": "2026-11-01T02:10:00Z"})
    assert later == metrics_export.Newer(tmp_path / "pav-t.prom", "20261101T020000.2Z-t")
    assert holding({"env": "t", "run_id": "20261101T020000Z-t", "ended": "2026-11-02T00:00:00Z"}) is None
    assert holding(mine) is None
    assert holding({"env": "t", "run_id": "by-hand", "ended": "2026-11-01T03:00:01Z"}) is not None
    assert holding({"env": "t", "run_id": "by-hand", "ended": "2026-11-01T02:59:59Z"}) is None
    (tmp_path / "pav-t.prom").write_text("node_something 1\n")
    assert metrics_export.newer_in_textfile(tmp_path, mine) is None
