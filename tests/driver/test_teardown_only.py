"""A teardown-only run (`--stages teardown`, issue 48) ran no test and contacted its hosts only to remove a
run's work: its summary (summary.txt, and what the run prints) is its stages and what it tore down, with no
host rows ("unknown", "not configured"), no test table and no history comparison, which would mean
nothing; its results.json compares nothing with earlier runs."""

from __future__ import annotations

import json
from pathlib import Path

from pav import pipeline, platform
from pav.context import Options
from pav.reporting import summary
from pav.results import HostRecord, RunResults, StageRecord
from tests.driver.test_platforms import static_env

KEPT = {"run_id": "20261127T170440.268Z-local", "run_dir": "/srv/runs/20261127T170440.268Z-local"}
# What a run that tests prints and a teardown-only run must not: the host and test tables, the history and
# test counts.
MEANINGLESS = ("host  ", "test  ", "history:", "tests: ", "not configured", "unknown")


def teardown_run(**fields: object) -> RunResults:
    """As `--stages teardown --run-dir KEPT_RUN_DIR` on the local env records itself."""
    run = RunResults(
        "20261127T170619.964Z-local", "local", "inventories/local/hosts.yml", "/srv/runs/x", "cpu"
    )
    run.stages = [
        StageRecord("report", "ok", detail="verdict NONE"),
        StageRecord("teardown", "ok", detail=f"removed /var/lib/pav/runs/{KEPT['run_id']} on 1 of 1 host(s)"),
    ]
    run.hosts = {"localhost": HostRecord("localhost", "localhost")}
    run.kept_run = dict(KEPT)
    run.verdict = "NONE"
    run.timing = {"run_s": 10.0, "tests_s": 0.0, "orchestration_s": 10.0}
    run.history = {"key": "local:localhost:GPUs unknown", "env": "local", "compared_runs": [], "metrics": []}
    for name, value in fields.items():
        setattr(run, name, value)
    return run


def test_the_summary_says_what_was_torn_down_and_nothing_else() -> None:
    text = summary.render(teardown_run())
    assert text.splitlines() == [
        "verdict NONE  run 20261127T170619.964Z-local  env local",
        "",
        "stage     status  detail",
        "report    ok      verdict NONE",
        f"teardown  ok      removed /var/lib/pav/runs/{KEPT['run_id']} on 1 of 1 host(s)",
        "",
        f"teardown of kept run {KEPT['run_id']} ({KEPT['run_dir']}): ok",
        "  hosts: localhost",
        "",
        "time: run 10s",
        "VERDICT: NONE",
    ]


def test_an_env_that_provisions_lists_what_it_destroyed() -> None:
    run = teardown_run(
        kept_run={}, env="sim", hosts={}, destroyed=["null_resource.host[0]", "null_resource.net"]
    )
    run.stages[1].detail = "destroyed 2 resource(s)"
    lines = summary.render(run).splitlines()
    at = lines.index("teardown of env sim: ok")
    assert lines[at + 1 : at + 3] == ["  destroyed null_resource.host[0]", "  destroyed null_resource.net"]
    assert not [ln for ln in lines if ln.startswith(MEANINGLESS)]


def test_a_run_that_tested_keeps_its_tables() -> None:
    run = teardown_run()
    run.stages.insert(0, StageRecord("validate", "ok", detail="1 test(s) launched"))
    text = summary.render(run)
    assert "hosts      status   gpus  tuning" in text and "test  hosts  status  reason" in text
    assert not summary.teardown_only(run)


def test_a_teardown_only_pipeline_run_compares_nothing_and_prints_no_host_rows(tmp_path: Path) -> None:
    """In process: the env's results root holds an earlier run with a measured test, which a run that tests
    would be compared with; the teardown-only run's record has no history, its summary none of the above."""
    root = tmp_path / "runs"
    earlier = root / "20000101T000000Z-t"
    earlier.mkdir(parents=True)
    test = {"name": "torch_gloo_allreduce", "hosts": ["node-1"], "status": "pass",
            "metrics": {"busbw_gbps": {"all_reduce": {"1048576": 1.0}}}}  # fmt: skip
    (earlier / "results.json").write_text(json.dumps({"run_id": earlier.name, "env": "t", "tests": [test],
        "started": "2000-01-01T00:00:00Z", "hosts": {"node-1": {"name": "node-1"}}}))  # fmt: skip
    # --keep: the teardown contacts no host here (its hosts are the inventory's, not this machine).
    ctx = static_env(tmp_path, Options(stages=("teardown",), keep=True, results_root=root))
    assert pipeline.execute(ctx, platform.hosts_platform()) == 0
    assert [s.name for s in ctx.results.stages] == ["report", "teardown"]
    assert json.loads((ctx.run_dir / "results.json").read_text())["history"] == {}
    text = (ctx.run_dir / "summary.txt").read_text()
    assert "teardown of env t: ok" in text and text.rstrip().endswith("VERDICT: NONE")
    assert not [ln for ln in text.splitlines() if ln.startswith(MEANINGLESS)], text
