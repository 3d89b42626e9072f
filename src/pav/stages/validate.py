"""Validate: launch every planned test on its hosts through the existing launchers."""

from __future__ import annotations

from pav import catalog, suites
from pav.context import RunContext
from pav.launches import HostView, Launch, plan_launches
from pav.results import TestResult
from pav.slurm.plan import plan_slurm
from pav.stages.playbook import play, raise_for_hosts, record_hosts


def host_views(ctx: RunContext) -> list[HostView]:
    return [
        HostView(h.name, str(h.vars.get("pav_private_ip", h.address)), ctx.results.hosts[h.name].facts)
        for h in ctx.hosts
    ]


def plan(ctx: RunContext) -> None:
    views = host_views(ctx)
    specs = catalog.select(ctx.settings.tests)
    if ctx.settings.launcher == "slurm":
        ctx.launches, skipped = plan_slurm(specs, views, ctx.settings, ctx.results.run_id, ctx.run_dir)
    else:
        ctx.launches, skipped = plan_launches(specs, views, ctx.settings, ctx.results.run_id)
    ctx.results.tests.extend(skipped)
    # Hosts the run went on without (--allow-missing): every test they would have taken part in is error.
    ctx.results.tests.extend(
        TestResult(spec.name, [host], "error", f"not validated: host {host} {why}")
        for host, why in ctx.missing.items()
        for spec in specs
    )


def run(ctx: RunContext) -> str:
    plan(ctx)
    if not ctx.launches:
        return "nothing to launch: every planned test was skipped"
    folding = ctx.settings.fold_launches and ctx.settings.launcher == "direct"
    runs = suites.fold(ctx.launches) if folding else ctx.launches
    launch_tests(ctx, runs)
    detail = f"{len(ctx.launches)} test(s) launched"
    if len(runs) < len(ctx.launches):
        detail += f" in {len(runs)} launches (a host's torch tests in suites: a process group per world)"
    return detail


def launch_tests(ctx: RunContext, launches: list[Launch], stage: str = "validate") -> None:
    outcome = play(ctx, stage, "validate.yml", {"pav_launches": [launch.to_var() for launch in launches]})
    record_hosts(ctx, outcome, stage)
    raise_for_hosts(ctx, outcome, stage)
