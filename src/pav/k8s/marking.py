"""--on-fail taint and --recheck on a k8s run (pav.k8s.taint does the kubectl work).

After the report, --on-fail taint cordons, taints and annotates each node the FAIL's bad parts name (the
hosts Slurm would drain: pav.reporting.marks decides; the nodes of a test across nodes that named none of
them are one line, not tainted). With --recheck, after provision: the tool's tainted nodes and the tests each
failed narrow the run (each test's job runs only on the nodes that failed it, tolerating the tool's taint and
the cordon), and where no node is the tool's the run stops there, naming the nodes it looked at, before
configure installs anything; after the report, each node whose tests all passed again is untainted and
uncordoned, the others stay. Nodes marked by anyone
else are listed, never touched. Never raises past its step: each node's outcome is an entry of results.json
`actions` and a summary line; the verdict and the exit code stay the run's.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pav import run_inputs
from pav.context import RunContext
from pav.errors import PavError
from pav.k8s import provision, taint
from pav.k8s.kubectl import Kubectl
from pav.k8s.render import Job
from pav.reporting import marks

MARK = f"taint ({taint.KEY} with the {taint.RUN} annotation)"


def kubectl(ctx: RunContext) -> Kubectl:
    """Nodes are cluster-scoped: the namespace is the jobs' only so kubectl has one."""
    return Kubectl(provision.kubeconfig_path(ctx.env), ctx.settings.k8s.namespace)


def after_report(ctx: RunContext) -> None:
    """--on-fail taint, or --recheck's return of the nodes that passed; neither without its flag."""
    left = "no node was changed by it"
    if ctx.options.recheck:
        marks.guarded(ctx.run_dir, ctx.results.actions, taint.RECHECK, lambda: _untaint_passed(ctx), left)
    elif ctx.options.on_fail == "taint":
        marks.guarded(ctx.run_dir, ctx.results.actions, taint.ACTION, lambda: _taint(ctx), left)


def _taint(ctx: RunContext) -> None:
    decided = marks.decide(ctx.results.to_dict())  # the hosts Slurm would drain: one decision
    if decided.unnamed is not None:  # said as the run goes, and in the summary
        print(f"{taint.ACTION}: {decided.unnamed.line('tainting')}", flush=True)
        ctx.results.actions.append(decided.unnamed.entry(taint.ACTION, "tainting"))
    planned = taint.from_marks(decided.marks)
    if not planned:
        return
    kube = kubectl(ctx)
    ctx.results.actions += [taint.mark(kube, t, ctx.results.run_id).to_dict() for t in planned]


# -- --recheck -------------------------------------------------------------------------------------------
def select(ctx: RunContext) -> None:
    """After provision: the tool's tainted nodes become the run's, each with the tests it failed."""
    if not ctx.options.recheck:
        return
    try:
        found = taint.find(kubectl(ctx).json("get", "nodes"))
    except PavError as exc:
        raise PavError(f"--recheck: could not list the nodes ({exc}); check the kubeconfig") from None
    for node, how in found.others.items():
        ctx.results.actions.append(_entry(node, (), "", f"left alone: {how} by someone else"))
    for node, tests in found.tests.items():
        entry = _entry(node, tests, found.reasons[node], f"rechecking {', '.join(tests)}")
        ctx.results.actions.append({**entry, "cordoned_by_pav": found.cordoned[node]})
    if not found.tests:  # nothing to recheck: the run stops before configure installs anything
        looked = [f"{n} ({found.others[n]} by someone else)" if n in found.others else n for n in found.nodes]
        raise PavError(marks.nothing_to_recheck(MARK, looked, "taint"))
    _narrow(ctx, found.tests)


def _narrow(ctx: RunContext, tests: dict[str, tuple[str, ...]]) -> None:
    chosen = replace(ctx.options, tests=marks.to_launch(tests), hosts=len(tests))
    ctx.inputs = run_inputs.resolve(ctx.env, chosen, ctx.settings)


def pin(ctx: RunContext, jobs: list[Job]) -> list[Job]:
    """With --recheck: each test's job on the nodes that failed it alone, tolerating the tool's taint and
    the cordon (the scheduler keeps every other pod off them); a test no node failed is dropped."""
    if not ctx.options.recheck or ctx.options.dry_run:  # a dry run finds no nodes: it shows every job
        return jobs
    wanted = _rechecked(ctx)
    out = []
    for job in jobs:
        nodes = [n for n, tests in wanted.items() if job.test in tests]
        if nodes:
            tolerations = [dict(t) for t in taint.RECHECK_TOLERATIONS]
            out.append(replace(job, workers=len(nodes), node_names=nodes, tolerations=tolerations))
    return out


def _rechecked(ctx: RunContext) -> dict[str, list[str]]:
    return {a["host"]: a["tests"] for a in ctx.results.actions if a["action"] == taint.RECHECK and a["tests"]}


def _untaint_passed(ctx: RunContext) -> None:
    mine = [a for a in ctx.results.actions if a["action"] == taint.RECHECK and a["tests"] and a["ok"] is None]
    results = ctx.results.to_dict()
    for act in mine:
        ok, why = marks.passed(act["host"], tuple(act["tests"]), results)
        if not ok:
            act["detail"] = f"kept tainted: {why}"
            continue
        try:
            done = taint.unmark(kubectl(ctx), act["host"], bool(act.get("cordoned_by_pav")))
            act["ok"], act["detail"] = True, f"returned: {why}; {done}"
        except PavError as exc:
            act["ok"], act["detail"] = False, f"{why}, but returning it failed: {exc}; {taint.FIX}"


def _entry(node: str, tests: tuple[str, ...], reason: str, detail: str) -> dict[str, Any]:
    return {"action": taint.RECHECK, "host": node, "reason": reason, "tests": list(tests), "ok": None,
            "detail": detail}  # fmt: skip
