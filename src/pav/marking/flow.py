"""--on-fail and --recheck, the same steps on every scheduler: the pipeline calls select after provision and
after_report after the report, and nothing else decides when marking happens.

select (only with --recheck): the tool's marked nodes and the tests each failed become the run's inputs, or
the run stops there, naming the nodes it looked at, before configure touches one. after_report: with
--recheck, return each node whose tests all passed again (a recheck never marks); else, with --on-fail,
mark each node the FAIL's bad parts name. A bug in either is an `actions` entry and driver-error.txt, never
an exception: the verdict and the exit code stay the run's, and the teardown after it runs.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from dataclasses import replace

from pav import run_inputs
from pav.context import RunContext
from pav.errors import PavError
from pav.marking import decide
from pav.marking.scheduler import Found, Scheduler
from pav.results import Action
from pav.run_inputs import RunInputs


def scheduler_for(ctx: RunContext) -> Scheduler:
    """The run's platform's scheduler (each loaded only for its runs, as the platforms are)."""
    if ctx.inputs.platform == "k8s":
        from pav.marking.k8s import K8s

        return K8s()
    from pav.marking.slurm import Slurm

    return Slurm()


def select(ctx: RunContext) -> None:
    if not ctx.options.recheck:
        return
    sched = scheduler_for(ctx)
    found = sched.find(ctx)
    if found is None:
        return
    ctx.results.actions += found.listed + found.rechecking
    if not found.rechecking:
        sched.stop(ctx)
        raise PavError(decide.nothing_to_recheck(sched.mark_text, found.looked, sched.flag))
    ctx.inputs = narrowed(ctx, sched, found)


def narrowed(ctx: RunContext, sched: Scheduler, found: Found) -> RunInputs:
    """The recheck's inputs: the tests the marks name (decide.to_launch), each launched only on the hosts
    that failed it (RunInputs.rechecked)."""
    inputs = run_inputs.resolve(ctx.env, sched.narrow(ctx, found), ctx.settings)
    each = {host: decide.to_launch({host: tests}) for host, tests in found.tests.items()}
    return replace(inputs, rechecked=each)


def after_report(ctx: RunContext) -> None:
    step = ctx.options.after_report
    if step == "recheck":
        sched = scheduler_for(ctx)
        guard(ctx, sched.recheck_action, lambda: _return_passed(ctx, sched), sched.left_returning)
    elif step is not None:
        sched = scheduler_for(ctx)
        if step == sched.flag:
            guard(ctx, sched.action, lambda: _mark(ctx, sched), sched.left_marking)


def _mark(ctx: RunContext, sched: Scheduler) -> None:
    decided = decide.decide(ctx.results.to_dict())  # the same hosts on every scheduler: one decision
    for left in decided.unmarked:  # said as the run goes, and in the summary
        print(f"{sched.action}: {left.line(sched.verb)}", flush=True)
        ctx.results.actions.append(left.entry(sched.action, sched.verb))
    if decided.marks:
        ctx.results.actions += sched.mark(ctx, decided.marks)


def _return_passed(ctx: RunContext, sched: Scheduler) -> None:
    mine = [a for a in ctx.results.actions if a.action == sched.recheck_action and a.tests and a.ok is None]
    results = ctx.results.to_dict()
    passed = []
    for act in mine:
        ok, why = decide.passed(act.host, act.tests, results)
        if ok:
            passed.append((act, why))
        else:
            act.detail = f"{sched.kept}: {why}"
    if passed:
        sched.unmark(ctx, passed)


def guard(ctx: RunContext, action: str, step: Callable[[], None], left: str) -> None:
    """Run a marking step after the report; a bug in it is an `actions` entry and driver-error.txt, never an
    exception (it must not cost the teardown after it). left: what the failed step did not change."""
    try:
        step()
    except Exception as exc:
        with (ctx.run_dir / "driver-error.txt").open("a") as out:
            out.write(f"{action}:\n" + traceback.format_exc() + "\n")
        note = f"internal error: {exc!r}; see driver-error.txt ({left})"
        ctx.results.actions.append(Action(action, "", ok=False, detail=note))
