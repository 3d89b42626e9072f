"""Slurm's marks: a drain whose reason starts with decide.PREFIX and ends with the tests ("pav RUN_ID: <part>
<figure> < <gate> [tests]"), set and lifted through playbooks/slurm_drain.yml (scontrol update on the
controller); a recheck reads the nodes through playbooks/slurm_drained.yml (scontrol show node).

A node drained by anyone else (a reason without the prefix) is never touched: it is listed. A recheck
narrows the run to the hosts of the tool's drained nodes, with direct launches: Slurm runs no job on a
drained node, and its checks would fail on the drain itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from pav.context import RunContext
from pav.errors import PavError
from pav.marking import decide
from pav.marking.decide import Mark, is_ours
from pav.marking.scheduler import Found, rechecking
from pav.options import Options
from pav.results import Action
from pav.stages.playbook import play

ACTION, RECHECK = "slurm drain", "slurm recheck"
MARK = f'drain (a Slurm reason "{decide.PREFIX}RUN_ID: ... [TESTS]")'
FIX = (
    "fix: check that the Ansible user may run scontrol update on the controller (root or a Slurm operator) "
    "and that the host is a Slurm node named by its short hostname"
)
# scontrol show node --oneliner: Reason=TEXT [USER@TIME] where the node has a reason.
REASON = re.compile(r"\bReason=(.*?) \[[^\]@\s]+@[^\]\s]+\]")
FIELD = re.compile(r"\b(NodeName|State)=(\S+)")
TESTS = re.compile(r" \[([A-Za-z0-9_,]+)\]$")
REASON_SHOWN = 48  # of a reason, in a refused recheck's line


@dataclass(frozen=True)
class Node:
    name: str
    state: str  # IDLE+DRAIN, MIXED+DRAIN, ...
    reason: str


class Slurm:
    flag, action, recheck_action, mark_text = "drain", ACTION, RECHECK, MARK
    verb, kept = "draining", "kept drained"
    left_marking, left_returning = "no node was drained by it", "no node was resumed by it"

    def find(self, ctx: RunContext) -> Found | None:
        if not ctx.hosts:
            return None
        outcome = play(ctx, "recheck", "slurm_drained.yml")
        facts = {h: f["slurm_nodes_info"] for h, f in outcome.facts.items() if "slurm_nodes_info" in f}
        if not facts:
            why = "; ".join(m for msgs in outcome.failures.values() for m in msgs) or str(outcome.unreachable)
            raise PavError(
                f"--recheck: could not read the Slurm nodes ({why}); check that scontrol works there"
            )
        nodes = parse_nodes(str(next(iter(facts.values()))["shown"]))
        return drained(nodes, {str(f["node"]): h for h, f in facts.items()})

    def narrow(self, ctx: RunContext, found: Found) -> Options:
        ctx.hosts = [h for h in ctx.hosts if h.name in found.tests]
        ctx.results.hosts = {n: r for n, r in ctx.results.hosts.items() if n in found.tests}
        return replace(ctx.options, tests=decide.to_launch(found.tests), launcher="direct")

    def stop(self, ctx: RunContext) -> None:
        ctx.hosts = []  # nothing to recheck: the run configures no host, and has none to tear down

    def mark(self, ctx: RunContext, marks: list[Mark]) -> list[Action]:
        planned = [Action(ACTION, m.host, m.reason, m.tests) for m in marks]
        if ctx.inventory_file is None or ctx.inputs.platform != "hosts":
            why = "no inventory of Slurm nodes (drain needs --platform hosts)"
            return [replace(a, ok=False, detail=why) for a in planned]
        asked = {a.host: a.reason for a in planned}
        try:
            outcome = play(ctx, "drain", "slurm_drain.yml", {"pav_slurm_drains": asked}, list(asked))
        except PavError as exc:
            return [replace(a, ok=False, detail=f"{exc}; {FIX}") for a in planned]
        out = []
        for a in planned:
            failed = outcome.unreachable.get(a.host) or "; ".join(outcome.failures.get(a.host, []))
            if failed or a.host not in outcome.stats:
                out.append(replace(a, ok=False, detail=f"{failed or 'not run'}; {FIX}"))
            else:
                out.append(replace(a, ok=True, detail=f'reason "{a.reason}"'))
        return out

    def unmark(self, ctx: RunContext, passed: list[tuple[Action, str]]) -> None:
        extra = {"pav_slurm_state": "RESUME", "pav_slurm_drains": {}}
        hosts = [act.host for act, _ in passed]
        try:
            outcome = play(ctx, "resume", "slurm_drain.yml", extra, hosts)
            failed = {h: "; ".join(m) for h, m in outcome.failures.items()} | outcome.unreachable
        except PavError as exc:
            failed = {h: str(exc) for h in hosts}
        for act, why in passed:
            if act.host in failed:
                act.ok, act.detail = False, f"{why}, but RESUME failed: {failed[act.host]}"
            else:
                act.ok, act.detail = True, f"resumed: {why}"


def parse_nodes(shown: str) -> list[Node]:
    """The nodes of `scontrol show node --oneliner`."""
    nodes = []
    for line in shown.splitlines():
        fields = dict(FIELD.findall(line))
        if "NodeName" not in fields:
            continue
        reason = REASON.search(line)
        nodes.append(Node(fields["NodeName"], fields.get("State", ""), reason.group(1) if reason else ""))
    return nodes


def looked_at(nodes: list[Node]) -> list[str]:
    """Each node as a refused recheck names it: "n0 IDLE", "n2 IDLE+DRAIN (bad fan)"."""
    cut = lambda text: text if len(text) <= REASON_SHOWN else text[: REASON_SHOWN - 3] + "..."  # noqa: E731
    return [f"{n.name} {n.state}" + (f" ({cut(n.reason)})" if n.reason else "") for n in nodes]


def tests_of(reason: str) -> tuple[str, ...]:
    """The tests a drain reason names: its trailing "[a,b]"."""
    found = TESTS.search(reason)
    return tuple(t for t in found.group(1).split(",") if t) if found else ()


def drained(nodes: list[Node], host_of: dict[str, str]) -> Found:
    """host_of: Slurm NodeName -> inventory host. Only drained nodes count; the others' drains are listed."""
    out = Found(looked=looked_at(nodes))
    others, outside = [], []
    for node in nodes:
        if "DRAIN" not in node.state:
            continue
        host = host_of.get(node.name)
        if not is_ours(node.reason) or not tests_of(node.reason):
            others.append(_left(node.name, f"drained by someone else ({node.reason or 'no reason'})"))
        elif host is None:
            outside.append(
                _left(node.name, f"drained by pav but not a host of the inventory ({node.reason})")
            )
        else:
            out.rechecking.append(rechecking(RECHECK, host, node.reason, tests_of(node.reason)))
    out.listed = others + outside
    return out


def _left(node: str, why: str) -> Action:
    return Action(RECHECK, node, detail=f"left alone: {why}")
