"""Validate: launch every planned test on its hosts through the existing launchers."""

from __future__ import annotations

import sys
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

from pav import suites
from pav.context import RunContext
from pav.hostlist import compress
from pav.launch import Launch
from pav.launches import HostView, only_where, plan_launches
from pav.payload_installer import installer
from pav.results import TestResult
from pav.slurm.plan import plan_slurm
from pav.stages.playbook import FETCHED, play, raise_for_hosts, record_hosts, torn_down
from pav.thresholds import counters, leftovers


def host_views(ctx: RunContext) -> list[HostView]:
    return [
        HostView(h.name, str(h.vars.get("pav_private_ip", h.address)), ctx.results.hosts[h.name].facts)
        for h in ctx.hosts
    ]


def plan(ctx: RunContext) -> None:
    views = host_views(ctx)
    specs, timeout_for = list(ctx.inputs.tests), ctx.inputs.timeouts.for_test
    if ctx.inputs.launcher == "slurm":
        ctx.launches, ctx.playbook_launches, skipped = plan_slurm(
            specs, views, ctx.settings, ctx.results.run_id, ctx.run_dir, timeout_for
        )
    else:
        # A recheck (pav.marking): each test only on the hosts that failed it.
        planner = only_where(ctx.inputs.rechecked) if ctx.inputs.rechecked else plan_launches
        ctx.launches, skipped = planner(specs, views, ctx.settings, ctx.results.run_id, timeout_for)
        ctx.playbook_launches = suites.fold(ctx.launches) if ctx.settings.fold_launches else ctx.launches
    ctx.results.tests.extend(skipped)
    # Hosts the run went on without (--allow-missing): every test they would have taken part in is error.
    ctx.results.tests.extend(
        TestResult(spec.name, [host], "error", f"not validated: host {host} {why}")
        for host, why in ctx.missing.items()
        for spec in specs
    )


def held_gpus(ctx: RunContext) -> str:
    """GPUs other processes hold (facts.gpus, read at configure): a gpu_leftovers result per GPU host and a
    line per GPU held; under pav_gpu_leftovers: stop (the default), its detail when no test may run."""
    found = leftovers.find(
        {h.name: ctx.results.hosts[h.name] for h in ctx.hosts if h.name in ctx.results.hosts}
    )
    policy = ctx.settings.gpu_leftovers
    ctx.results.tests.extend(leftovers.results(found, policy))
    held = [x for xs in found.values() for x in xs]
    for leftover in held:
        print(f"{'warning' if policy == 'warn' else 'stop'}: {leftover.line()}", file=sys.stderr)
    if not held or policy == "warn":
        return ""
    # A GPU two processes hold counts once, as gpus_held does.
    gpus = len({(x.host, x.gpu) for x in held if x.gpu != leftovers.HOST_MEMORY})
    hosts = sorted({x.host for x in held if x.gpu == leftovers.HOST_MEMORY})
    memory = f", the memory of {compress(hosts)}" if hosts else ""
    return f"stopped before the tests: {gpus} GPU(s){memory} held by other processes ({leftovers.NAME})"


def run(ctx: RunContext) -> str:
    stopped = held_gpus(ctx)
    if stopped:
        return stopped
    plan(ctx)
    if not ctx.hosts:
        return "nothing to launch: no host is left in the run (--allow-missing)"
    if not ctx.launches:
        return "nothing to launch: every planned test was skipped"
    with _job_scripts(ctx) as jobs:
        extravars = folded(ctx) | ({"slurm_jobs_installer": str(jobs)} if jobs else {})
        launch_tests(ctx, ctx.playbook_launches, extravars=extravars)
    detail = f"{len(ctx.launches)} test(s) launched"
    ran = len(ctx.playbook_launches)
    if ran < len(ctx.launches):
        detail += f" in {ran} launches (a host's torch tests in suites: a process group per world)"
    return detail


def _job_scripts(ctx: RunContext) -> AbstractContextManager[Path | None]:
    """The run's rendered Slurm job scripts (RUN/slurm/) as one self-unpacking script for the slurm_jobs
    role: one transfer a host instead of a stat and a copy module run per file. None: nothing to stage."""
    folder = ctx.run_dir / "slurm"
    if ctx.inputs.launcher != "slurm" or not folder.is_dir():
        return nullcontext()
    # Inside the run's folder: a run cancelled mid-transfer leaves no controller temp file behind.
    return installer((ctx.run_dir / "ansible" / "slurm-jobs.sh").resolve(), folder, whole=False)


def launch_tests(
    ctx: RunContext, launches: list[Launch], stage: str = "validate", extravars: dict[str, Any] | None = None
) -> None:
    launched = {
        "pav_launches": [launch.to_var() for launch in launches],
        "pav_counter_hosts": counter_hosts(ctx),
    }
    outcome = play(ctx, stage, "validate.yml", launched | (extravars or {}))
    # Before any error is raised: the stages after this one must know what the playbook did for them.
    ctx.collected = outcome.ok.get(FETCHED, set())
    ctx.torn_down = torn_down(outcome)
    record_hosts(ctx, outcome, stage)
    raise_for_hosts(ctx, outcome, stage)


def counter_hosts(ctx: RunContext) -> list[str]:
    """Hosts whose configure read found error counters (GPUs through NVML, RDMA ports): they read them again
    after the tests (roles/run_tests), for error_counters; a host without any pays no second read."""
    return [
        h.name
        for h in ctx.hosts
        if h.name in ctx.results.hosts and counters.has_counters(ctx.results.hosts[h.name].facts.get("gpus"))
    ]


def folded(ctx: RunContext) -> dict[str, Any]:
    """Whether validate's playbook also collects and tears down (one ansible-playbook start each less).
    Collect: whenever the run collects. Teardown: of static hosts only (a provisioned env is destroyed, not
    cleaned), and only when no isolation re-run can need the hosts after validate (RunInputs decides that
    for the isolate stage too)."""
    rerun = ctx.inputs.isolation_possible(len(ctx.hosts))
    tears_down = ctx.wants("teardown") and not ctx.options.keep and not ctx.env.provisions and not rerun
    return {
        "pav_validate_collects": ctx.wants("collect"),
        "pav_validate_tears_down": tears_down,
        "collect_unpack": False,  # the collect stage unpacks in the driver's process
    }
