"""Report: judge every result against the profile, then write results.json, summary.txt and junit.xml."""

from __future__ import annotations

from pav.commands.check_nccl import load_gates
from pav.context import RunContext
from pav.derive import add_scaling, split_gates
from pav.evaluate import evaluate_launch
from pav.reporting import junit, summary
from pav.results import utc_now, verdict_of
from pav.thresholds import Gate, auto_profile, load_profile


def judge(ctx: RunContext) -> None:
    profile = ctx.settings.threshold_profile
    if profile == "auto":
        profile = auto_profile([h.facts for h in ctx.results.hosts.values()])
    ctx.results.threshold_profile = profile
    gates, nccl_gates = load_profile(profile), load_gates(profile)
    derived: dict[str, list[Gate]] = {}
    for launch in ctx.launches:
        measured, derived[launch.test] = split_gates(gates.get(launch.test, []))
        ctx.results.tests.extend(evaluate_launch(launch, ctx.run_dir, measured, nccl_gates))
    add_scaling(ctx.results.tests, derived)
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
    ctx.results.write(ctx.run_dir / "results.json")
    (ctx.run_dir / "summary.txt").write_text(summary.render(ctx.results))
    (ctx.run_dir / "junit.xml").write_text(junit.render(ctx.results))


def write_partial(ctx: RunContext) -> None:
    """After every stage: results.json on disk reflects the run so far."""
    ctx.results.write(ctx.run_dir / "results.json")


def run(ctx: RunContext) -> str:
    judge(ctx)
    write(ctx)
    return f"verdict {ctx.results.verdict}"
