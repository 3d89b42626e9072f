"""Report: judge every result against the profile, then write results.json, summary.txt and junit.xml."""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime

from pav import interrupts
from pav.commands.check_nccl import load_gates
from pav.context import RunContext
from pav.derive import add_scaling, split_gates
from pav.evaluate import evaluate_launch
from pav.reporting import junit, summary
from pav.reporting.compare import cross_check
from pav.results import RunResults, utc_now, verdict_of
from pav.slurm.record import attach_jobs
from pav.thresholds import Gate, auto_profile, load_profile


def judge(ctx: RunContext) -> None:
    profile = ctx.settings.threshold_profile
    if profile == "auto":
        profile = auto_profile([h.facts for h in ctx.results.hosts.values()])
    ctx.results.threshold_profile = profile
    gates, nccl_gates = load_profile(profile), load_gates(profile)
    derived: dict[str, list[Gate]] = {}
    lost: dict[str, str] = {}
    if interrupts.requested():  # launches cut short: nothing was collected
        lost = {h: f"the run was {ctx.results.error}" for launch in ctx.launches for h in launch.hosts}
    lost |= {host: f"host {host} {why}" for host, why in ctx.missing.items()}
    for launch in ctx.launches:
        measured, derived[launch.test] = split_gates(gates.get(launch.test, []))
        ctx.results.tests.extend(
            attach_jobs(evaluate_launch(launch, ctx.run_dir, measured, nccl_gates, lost), launch, ctx.run_dir)
        )
    add_scaling(ctx.results.tests, derived)
    tests = [asdict(t) for t in ctx.results.tests]
    ctx.results.cross_check = cross_check(tests, list(ctx.results.hosts))
    ctx.launches = []  # judged once, even if report runs again after an interrupt
    if ctx.results.error:
        ctx.results.verdict = "ERROR"
    elif not ctx.wants("validate") and not ctx.results.tests:
        ctx.results.verdict = "NONE"
    else:
        ctx.results.verdict = verdict_of(ctx.results.tests)


def write(ctx: RunContext) -> None:
    """Always safe to call: it is also how partial results reach disk after a failure."""
    ctx.results.ended = utc_now()
    ctx.results.timing = timing(ctx.results)
    ctx.results.write(ctx.run_dir / "results.json")
    (ctx.run_dir / "summary.txt").write_text(summary.render(ctx.results))
    (ctx.run_dir / "junit.xml").write_text(junit.render(ctx.results))


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
