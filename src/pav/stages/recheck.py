"""--recheck: before configure, find the Slurm nodes this tool drained (playbooks/slurm_drained.yml) and
narrow the run to their hosts and the tests they failed, or, where none is the tool's, stop the run there
(exit 2, naming the nodes looked at) before any host is configured; after the report, return (RESUME) each
node whose tests all passed again, keep the others drained. A node drained by anyone else is listed, never
touched. Each node's outcome is an entry of results.json `actions` and a summary line."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from pav import run_inputs
from pav.catalog import TestSpec
from pav.context import RunContext
from pav.errors import PavError
from pav.launch import Launch
from pav.launches import HostView, plan_launches
from pav.reporting import marks
from pav.results import TestResult
from pav.slurm import recheck
from pav.stages.playbook import play

ACTION = "slurm recheck"
PlanLaunches = Callable[..., tuple[list[Launch], list[TestResult]]]
MARK = f'drain (a Slurm reason "{marks.PREFIX}RUN_ID: ... [TESTS]")'


def select(ctx: RunContext) -> None:
    """Narrow the run to the tool's drained nodes (provision.resolve calls it once the hosts are known)."""
    if not ctx.options.recheck or not ctx.hosts:
        return
    outcome = play(ctx, "recheck", "slurm_drained.yml")
    facts = {h: f["slurm_nodes_info"] for h, f in outcome.facts.items() if "slurm_nodes_info" in f}
    if not facts:
        why = "; ".join(m for msgs in outcome.failures.values() for m in msgs) or str(outcome.unreachable)
        raise PavError(f"--recheck: could not read the Slurm nodes ({why}); check that scontrol works there")
    shown = str(next(iter(facts.values()))["shown"])
    nodes = recheck.parse_nodes(shown)
    found = recheck.plan(nodes, {str(f["node"]): h for h, f in facts.items()})
    for node in found.others:
        ctx.results.actions.append(
            _left(node.name, f"drained by someone else ({node.reason or 'no reason'})")
        )
    for node in found.outside:
        ctx.results.actions.append(
            _left(node.name, f"drained by pav but not a host of the inventory ({node.reason})")
        )
    for host, tests in found.tests.items():
        ctx.results.actions.append(_entry(host, tests, found.reasons[host]))
    if not found.tests:
        # Nothing to recheck: the run stops before configure touches a host (none to tear down either).
        ctx.hosts = []
        raise PavError(marks.nothing_to_recheck(MARK, recheck.looked_at(nodes), "drain"))
    _narrow(ctx, found.tests)


def _narrow(ctx: RunContext, tests: dict[str, tuple[str, ...]]) -> None:
    ctx.hosts = [h for h in ctx.hosts if h.name in tests]
    ctx.results.hosts = {n: r for n, r in ctx.results.hosts.items() if n in tests}
    names = marks.to_launch(tests)
    # Direct launches: Slurm runs no job on a drained node, and its checks would fail on the drain itself.
    chosen = replace(ctx.options, tests=names, launcher="direct")
    ctx.inputs = run_inputs.resolve(ctx.env, chosen, ctx.settings)


def planner(ctx: RunContext) -> PlanLaunches:
    """Launches of each test on the rechecked hosts that failed it, and on no other (a test across hosts
    spans only those)."""
    wanted = {a["host"]: a["tests"] for a in ctx.results.actions if a["action"] == ACTION and a["tests"]}

    def plan(
        specs: list[TestSpec], views: list[HostView], *args: Any
    ) -> tuple[list[Launch], list[TestResult]]:
        launches: list[Launch] = []
        skipped: list[TestResult] = []
        for spec in specs:
            mine = [v for v in views if spec.name in wanted.get(v.name, ())]
            got, skip = plan_launches([spec], mine, *args)
            launches, skipped = launches + got, skipped + skip
        return launches, skipped

    return plan


def resume(ctx: RunContext) -> None:
    """After the report: RESUME each rechecked node that passed; never raises."""
    if not ctx.options.recheck:
        return
    marks.guarded(ctx.run_dir, ctx.results.actions, ACTION, lambda: _resume(ctx), "no node was resumed by it")


def _resume(ctx: RunContext) -> None:
    mine = [a for a in ctx.results.actions if a["action"] == ACTION and a.get("tests") and a["ok"] is None]
    results = ctx.results.to_dict()
    good = []
    for act in mine:
        ok, why = recheck.passed(act["host"], tuple(act["tests"]), results)
        act["detail"] = why if ok else f"kept drained: {why}"
        good += [act] if ok else []
    if not good:
        return
    extra = {"pav_slurm_state": "RESUME", "pav_slurm_drains": {}}
    try:
        outcome = play(ctx, "resume", "slurm_drain.yml", extra, [a["host"] for a in good])
        failed = {h: "; ".join(m) for h, m in outcome.failures.items()} | outcome.unreachable
    except PavError as exc:
        failed = {a["host"]: str(exc) for a in good}
    for act in good:
        if act["host"] in failed:
            act["ok"], act["detail"] = False, f"{act['detail']}, but RESUME failed: {failed[act['host']]}"
        else:
            act["ok"], act["detail"] = True, f"resumed: {act['detail']}"


def _entry(host: str, tests: tuple[str, ...], reason: str) -> dict[str, Any]:
    return {"action": ACTION, "host": host, "reason": reason, "tests": list(tests), "ok": None,
            "detail": f"rechecking {', '.join(tests)}"}  # fmt: skip


def _left(node: str, why: str) -> dict[str, Any]:
    return {
        "action": ACTION,
        "host": node,
        "reason": "",
        "tests": [],
        "ok": None,
        "detail": f"left alone: {why}",
    }
