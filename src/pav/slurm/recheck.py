"""--recheck: the nodes this tool drained (reason "pav RUN_ID: ... [tests]", pav.slurm.drain), the tests
each failed, and which of them a recheck run may return to service.

A node drained by anyone else (a reason without the prefix) is never touched: it is listed. A node returns
only when every test it failed ran on it again and passed, and no bad part of the recheck names it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pav.reporting.marks import is_ours, passed

__all__ = ["Node", "Plan", "looked_at", "parse_nodes", "passed", "plan", "tests_of"]

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


@dataclass
class Plan:
    tests: dict[str, tuple[str, ...]] = field(default_factory=dict)  # inventory host -> tests it failed
    reasons: dict[str, str] = field(default_factory=dict)  # inventory host -> the tool's drain reason
    others: list[Node] = field(default_factory=list)  # drained by someone else: left alone
    outside: list[Node] = field(default_factory=list)  # the tool's drains of nodes not in the inventory


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


def plan(nodes: list[Node], host_of: dict[str, str]) -> Plan:
    """host_of: Slurm NodeName -> inventory host. Only drained nodes count."""
    out = Plan()
    for node in nodes:
        if "DRAIN" not in node.state:
            continue
        host = host_of.get(node.name)
        if not is_ours(node.reason) or not tests_of(node.reason):
            out.others.append(node)
        elif host is None:
            out.outside.append(node)
        else:
            out.tests[host], out.reasons[host] = tests_of(node.reason), node.reason
    return out
