"""Report: judge every result against the profile, compare with the env's earlier runs, then write
results.json, summary.txt, junit.xml and report.html."""

from __future__ import annotations

import traceback
from dataclasses import asdict
from datetime import datetime
from typing import Any

from pav import interrupts
from pav.context import RunContext
from pav.judging import FROM_FACTS_ANEW, Judge
from pav.printable import printable
from pav.reporting import history, html, junit, metrics_export, summary
from pav.reporting.compare import cross_check
from pav.results import RunResults, TestResult, utc_now, verdict_of
from pav.stages import scrub


def judge(ctx: RunContext) -> None:
    judge_launches(ctx)
    judging = run_judge(ctx)
    if ctx.wants("validate") and not any(t.name in FROM_FACTS_ANEW for t in ctx.results.tests):
        ctx.results.tests.extend(judging.health())
    judging.scaling(ctx.results.tests, ctx.derived_gates)
    ctx.derived_gates = {}  # applied once, even if report runs again after an interrupt
    tests = [asdict(t) for t in ctx.results.tests]
    ctx.results.cross_check = cross_check(tests, list(ctx.results.hosts))
    ctx.results.history = compare_history(ctx) if ctx.wants("validate") or ctx.results.tests else {}
    if ctx.results.error:
        ctx.results.verdict = "ERROR"
    elif not ctx.wants("validate") and not ctx.results.tests:
        ctx.results.verdict = "NONE"
    else:
        ctx.results.verdict = verdict_of(ctx.results.tests)


def run_judge(ctx: RunContext) -> Judge:
    """The run's one Judge, made at its first judging (isolate's or the report's): the profile is resolved
    (auto: by the hosts' GPUs) and read once, the hosts' facts derived once."""
    if ctx.judge is None:
        policy = ctx.inputs.node_policy
        ctx.judge = Judge.make(
            ctx.inputs.profile, ctx.results.hosts, platform=ctx.inputs.platform, policy=policy
        )
        ctx.results.threshold_profile = ctx.judge.profile.name
        ctx.results.node_policy = policy.record()
    return ctx.judge


def judge_launches(ctx: RunContext) -> None:
    """Turn the collected launches into test results; each launch is judged once, also when the
    isolate stage judged it before the report."""
    judging = run_judge(ctx)
    # Launches the signal cut short left no launcher.rc to collect: they are `interrupted`.
    stop = interrupts.interruption()
    cut = str(stop) if stop is not None else ""
    lost = {host: f"host {host} {why}" for host, why in ctx.missing.items()}
    if "validate" in ctx.options.stages and "collect" not in ctx.options.stages and not cut:
        # Results stay on the hosts until collect fetches them: the verdict must say which stage it lacks.
        left_out = "collect was not among --stages (add it: results stay on the hosts until collect fetches)"
        lost = {h: lost.get(h, left_out) for launch in ctx.launches for h in launch.hosts}
    judged: list[TestResult] = []
    for launch in ctx.launches:
        ctx.derived_gates[launch.test] = judging.gates(launch.test, launch.gates_of)[1]
        judged += judging.launch(launch, ctx.run_dir, lost, cut)
    ctx.results.tests.extend(judged)
    ctx.results.gates = judging.gates_record(ctx.results.tests)
    ctx.launches = []


def write(ctx: RunContext) -> None:
    """Always safe to call: it is also how partial results reach disk after a failure."""
    ctx.results.ended = utc_now()
    ctx.results.timing = timing(ctx.results)
    ctx.results.write(ctx.run_dir / "results.json")
    (ctx.run_dir / "summary.txt").write_text(printable(summary.render(ctx.results), keep="\n"))
    (ctx.run_dir / "junit.xml").write_text(junit.render(ctx.results))
    write_html(ctx)


def write_html(ctx: RunContext) -> None:
    """Last, and never raising: a rendering bug must not cost the teardown and scrub that follow a write."""
    try:
        page = html.render(ctx.results.to_dict(), ctx.run_dir, scrub.run_secrets(ctx))
    except Exception as exc:
        with (ctx.run_dir / "driver-error.txt").open("a") as out:
            out.write("report.html:\n" + traceback.format_exc() + "\n")
        page = html.fallback(f"report.html could not be rendered ({exc!r}); results.json holds the results")
    (ctx.run_dir / "report.html").write_text(page)


def export_metrics(ctx: RunContext) -> None:
    """--metrics-textfile and --pushgateway, once the run's files are final: each outcome joins results.json
    (`exports`) and summary.txt; a failure is reported there, never raised, and the verdict stays."""
    textfile, url = ctx.options.metrics_textfile, ctx.options.pushgateway
    if textfile is None and url is None:
        return
    try:
        exports = metrics_export.export(ctx.results.to_dict(), textfile, url, ctx.options.pushgateway_auth)
        ctx.results.exports = [e.to_dict() for e in exports]
        ctx.results.write(ctx.run_dir / "results.json")
        (ctx.run_dir / "summary.txt").write_text(printable(summary.render(ctx.results), keep="\n"))
    except Exception:  # a bug here must not cost the scrub after it
        with (ctx.run_dir / "driver-error.txt").open("a") as out:
            out.write("metrics export:\n" + traceback.format_exc() + "\n")


def compare_history(ctx: RunContext) -> dict[str, Any]:
    """This run against the env's earlier runs under the results root; empty when there are none. A run
    that tests nothing (`--stages teardown`, a configure alone) has no metric to compare: judge leaves it
    out."""
    root = ctx.options.results_root
    if not root.is_dir():
        return {}
    found = history.find_runs(root, ctx.results.env)
    here, now = ctx.run_dir.resolve(), ctx.results.started

    def before(runs: list[history.Run]) -> list[history.Run]:
        runs = [r for r in runs if r.path.parent.resolve() != here and r.run_id != ctx.results.run_id]
        return [r for r in runs if r.started <= now]  # not a later run, when an old one is re-reported

    earlier = before(found.runs)
    if not earlier:
        return {}
    return history.record(
        ctx.results.to_dict(),
        earlier,
        root,
        history.DEFAULT_TOLERANCE,
        history.DEFAULT_LAST,
        before(found.left_out),
    )


def timing(results: RunResults) -> dict[str, float]:
    """Wall time of the run, of the tests (launches run one after another; a launch lasts as long as its
    slowest host), and the rest: orchestration (provisioning, Ansible, collection)."""
    run_s = (_parse(results.ended) - _parse(results.started)).total_seconds()
    per_test: dict[str, float] = {}
    for test in results.tests:
        wall = test.metrics.get("wall_s")
        if isinstance(wall, int | float):
            per_test[test.name] = max(per_test.get(test.name, 0.0), float(wall))
    tests_s = sum(per_test.values())
    return {"run_s": run_s, "tests_s": round(tests_s, 1), "orchestration_s": round(run_s - tests_s, 1)}


def _parse(stamp: str | None) -> datetime:
    return datetime.fromisoformat((stamp or utc_now()).replace("Z", "+00:00"))


def write_partial(ctx: RunContext) -> None:
    """After every stage: results.json on disk reflects the run so far."""
    ctx.results.write(ctx.run_dir / "results.json")


def run(ctx: RunContext) -> str:
    judge(ctx)
    write(ctx)
    return f"verdict {ctx.results.verdict}"
