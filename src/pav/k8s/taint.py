"""--on-fail taint and --recheck on Kubernetes: the nodes a failed run names, cordoned and tainted
pav.io/unhealthy=<test>:NoSchedule, with annotations naming the run, the part and the tests; and, for a
recheck, which tainted nodes are the tool's and how each goes back.

The nodes are pav.reporting.marks' hosts (a k8s run's hosts are its nodes), so Slurm's drain and this taint
mark the same parts. A node is the tool's only with both its taint and its run annotation: a node tainted or
cordoned by anyone else is listed, never touched. Every change goes through kubectl (the strategic-merge and
merge patches it sends), each step one call, so a failure names the step.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from pav.errors import PavError
from pav.k8s.kubectl import Kubectl
from pav.reporting import marks

KEY = "pav.io/unhealthy"
RUN = "pav.io/unhealthy-run"  # the run that tainted it: the tool's mark, with the taint
REASON = "pav.io/unhealthy-reason"  # "pav RUN_ID: <part> <figure> < <gate> [tests]"
TESTS = "pav.io/unhealthy-tests"  # the tests it failed, comma-separated: what a recheck runs
CORDONED = "pav.io/cordoned-by"  # set only where the tool cordoned it: a recheck uncordons only those
ANNOTATIONS = (RUN, REASON, TESTS, CORDONED)
UNSCHEDULABLE = "node.kubernetes.io/unschedulable"  # the control plane's taint of a cordoned node
# Taints the run's jobs tolerate anyway (templates/k8s/_pod.j2): a GPU node's own, not anyone's mark.
TOLERATED = ("nvidia.com/gpu", UNSCHEDULABLE)
# What a recheck's jobs tolerate to run on the nodes they recheck (tainted and cordoned by the tool).
RECHECK_TOLERATIONS = (
    {"key": KEY, "operator": "Exists", "effect": "NoSchedule"},
    {"key": UNSCHEDULABLE, "operator": "Exists", "effect": "NoSchedule"},
)
ACTION, RECHECK = "k8s taint", "k8s recheck"
FIX = (
    "fix: check that the kubeconfig's user may get and patch nodes (RBAC verbs get, patch on nodes) and "
    "that the node still exists"
)


@dataclass(frozen=True)
class Taint:
    node: str
    reason: str
    tests: tuple[str, ...]
    ok: bool | None = None  # None: not tried yet
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        entry = asdict(self)
        return {"action": ACTION, "host": entry.pop("node"), **entry, "tests": list(self.tests)}


def plan(results: dict[str, Any]) -> list[Taint]:
    """One taint per node a bad part of a FAIL names (pav.reporting.marks.plan)."""
    return from_marks(marks.plan(results))


def from_marks(planned: list[marks.Mark]) -> list[Taint]:
    return [Taint(m.host, m.reason, m.tests) for m in planned]


def value(tests: tuple[str, ...]) -> str:
    """The taint's value: the first (worst part's) test, as a label value (63 of [A-Za-z0-9._-])."""
    return re.sub(r"[^A-Za-z0-9._-]", "", tests[0] if tests else "failed")[:63].strip("._-") or "failed"


def mark(kube: Kubectl, taint: Taint, run_id: str) -> Taint:
    """Cordon, taint and annotate one node; the outcome, never raised."""
    step = "get"
    try:
        node = kube.json("get", "node", taint.node)
        ann = {RUN: run_id, REASON: taint.reason, TESTS: ",".join(taint.tests)}
        if not (node.get("spec") or {}).get("unschedulable"):
            ann[CORDONED] = run_id  # cordoned by someone else first: theirs to uncordon
        step = "annotate"
        kube.run("annotate", "--overwrite", "node", taint.node, *(f"{k}={v}" for k, v in ann.items()))
        step = "cordon"
        kube.run("cordon", taint.node)
        step = "taint"
        kube.run("taint", "nodes", taint.node, f"{KEY}={value(taint.tests)}:NoSchedule", "--overwrite")
    except PavError as exc:
        return Taint(taint.node, taint.reason, taint.tests, False, f"{step}: {exc}; {FIX}")
    detail = f"cordoned, tainted {KEY}={value(taint.tests)}:NoSchedule; reason {taint.reason}"
    return Taint(taint.node, taint.reason, taint.tests, True, detail)


def unmark(kube: Kubectl, node: str, cordoned_by_us: bool) -> str:
    """Untaint, drop the annotations, and uncordon where the tool cordoned it; raises PavError."""
    kube.run("taint", "nodes", node, f"{KEY}-")
    kube.run("annotate", "node", node, *(f"{k}-" for k in ANNOTATIONS))
    if cordoned_by_us:
        kube.run("uncordon", node)
        return f"untainted {KEY}, uncordoned"
    return f"untainted {KEY} (left cordoned: someone else cordoned it first)"


@dataclass
class Found:
    """What a recheck finds on the cluster's nodes."""

    tests: dict[str, tuple[str, ...]] = field(default_factory=dict)  # the tool's nodes -> tests they failed
    reasons: dict[str, str] = field(default_factory=dict)
    cordoned: dict[str, bool] = field(default_factory=dict)  # whether the tool cordoned it
    others: dict[str, str] = field(default_factory=dict)  # marked by someone else -> how; left alone
    nodes: list[str] = field(default_factory=list)  # every node looked at


def find(nodes: dict[str, Any]) -> Found:
    """From `kubectl get nodes -o json`: the tool's nodes (its taint and its run annotation) and the nodes
    someone else tainted or cordoned."""
    out = Found()
    for node in nodes.get("items") or []:
        name = node["metadata"]["name"]
        out.nodes.append(name)
        ann = node["metadata"].get("annotations") or {}
        spec = node.get("spec") or {}
        taints = [t for t in spec.get("taints") or [] if t.get("effect") in ("NoSchedule", "NoExecute")]
        ours = [t for t in taints if t.get("key") == KEY]
        if ours and RUN in ann and marks.is_ours(ann.get(REASON, marks.PREFIX)):
            tests = tuple(t for t in ann.get(TESTS, "").split(",") if t) or (str(ours[0].get("value")),)
            out.tests[name], out.reasons[name] = tests, ann.get(REASON, "")
            out.cordoned[name] = CORDONED in ann
            continue
        how = [f"tainted {t['key']}={t.get('value', '')}:{t['effect']}" for t in taints
               if t.get("key") not in TOLERATED]  # fmt: skip
        if ours:
            how.insert(0, f"tainted {KEY} without the tool's {RUN} annotation")
        if spec.get("unschedulable"):
            how.append("cordoned")
        if how:
            out.others[name] = ", ".join(dict.fromkeys(how))
    return out
