"""Kubernetes' marks: the node cordoned, tainted pav.io/unhealthy=<test>:NoSchedule, and annotated with the
run, the part and the tests (the names are pav.k8s.taint's: the jobs' templates tolerate them too); a
recheck finds them with `kubectl get nodes`, and returns a node by untainting it, dropping the annotations
and uncordoning it where the tool cordoned it.

A node is the tool's only with both its taint and its run annotation: a node tainted or cordoned by anyone
else is listed, never touched. Every change goes through kubectl (the strategic-merge and merge patches it
sends), each step one call, so a failure names the step. A recheck narrows the run to the tool's nodes;
each test's job runs only on the nodes that failed it (pav.stages.k8s pins it, tolerating the mark).
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from pav.context import RunContext
from pav.errors import PavError
from pav.k8s import provision
from pav.k8s.kubectl import Kubectl
from pav.k8s.taint import ANNOTATIONS, CORDONED, KEY, REASON, RUN, TESTS, TOLERATED
from pav.marking import decide
from pav.marking.decide import Mark
from pav.marking.scheduler import Found, rechecking
from pav.options import Options
from pav.results import Action

ACTION, RECHECK = "k8s taint", "k8s recheck"
MARK = f"taint ({KEY} with the {RUN} annotation)"
FIX = (
    "fix: check that the kubeconfig's user may get and patch nodes (RBAC verbs get, patch on nodes) and "
    "that the node still exists"
)


def kubectl(ctx: RunContext) -> Kubectl:
    """Nodes are cluster-scoped: the namespace is the jobs' only so kubectl has one."""
    return Kubectl(provision.kubeconfig_path(ctx.env), ctx.settings.k8s.namespace)


class K8s:
    flag, action, recheck_action, mark_text = "taint", ACTION, RECHECK, MARK
    verb, kept = "tainting", "kept tainted"
    left_marking = left_returning = "no node was changed by it"

    def find(self, ctx: RunContext) -> Found | None:
        try:
            listed = kubectl(ctx).json("get", "nodes")
        except PavError as exc:
            raise PavError(f"--recheck: could not list the nodes ({exc}); check the kubeconfig") from None
        return find(listed)

    def narrow(self, ctx: RunContext, found: Found) -> Options:
        return replace(ctx.options, tests=decide.to_launch(found.tests), hosts=len(found.tests))

    def stop(self, ctx: RunContext) -> None:
        return None  # a k8s run holds no hosts of its own before configure

    def mark(self, ctx: RunContext, marks: list[Mark]) -> list[Action]:
        kube = kubectl(ctx)
        return [mark_node(kube, m, ctx.results.run_id) for m in marks]

    def unmark(self, ctx: RunContext, passed: list[tuple[Action, str]]) -> None:
        kube = kubectl(ctx)
        for act, why in passed:
            try:
                done = unmark_node(kube, act.host, bool(act.cordoned_by_pav))
                act.ok, act.detail = True, f"returned: {why}; {done}"
            except PavError as exc:
                act.ok, act.detail = False, f"{why}, but returning it failed: {exc}; {FIX}"


def value(tests: tuple[str, ...]) -> str:
    """The taint's value: the first (worst part's) test, as a label value (63 of [A-Za-z0-9._-])."""
    return re.sub(r"[^A-Za-z0-9._-]", "", tests[0] if tests else "failed")[:63].strip("._-") or "failed"


def mark_node(kube: Kubectl, mark: Mark, run_id: str) -> Action:
    """Cordon, taint and annotate one node; the outcome, never raised."""
    step = "get"
    planned = Action(ACTION, mark.host, mark.reason, mark.tests)
    try:
        node = kube.json("get", "node", mark.host)
        ann = {RUN: run_id, REASON: mark.reason, TESTS: ",".join(mark.tests)}
        if not (node.get("spec") or {}).get("unschedulable"):
            ann[CORDONED] = run_id  # cordoned by someone else first: theirs to uncordon
        step = "annotate"
        kube.run("annotate", "--overwrite", "node", mark.host, *(f"{k}={v}" for k, v in ann.items()))
        step = "cordon"
        kube.run("cordon", mark.host)
        step = "taint"
        kube.run("taint", "nodes", mark.host, f"{KEY}={value(mark.tests)}:NoSchedule", "--overwrite")
    except PavError as exc:
        return replace(planned, ok=False, detail=f"{step}: {exc}; {FIX}")
    detail = f"cordoned, tainted {KEY}={value(mark.tests)}:NoSchedule; reason {mark.reason}"
    return replace(planned, ok=True, detail=detail)


def unmark_node(kube: Kubectl, node: str, cordoned_by_us: bool) -> str:
    """Untaint, drop the annotations, and uncordon where the tool cordoned it; raises PavError."""
    kube.run("taint", "nodes", node, f"{KEY}-")
    kube.run("annotate", "node", node, *(f"{k}-" for k in ANNOTATIONS))
    if cordoned_by_us:
        kube.run("uncordon", node)
        return f"untainted {KEY}, uncordoned"
    return f"untainted {KEY} (left cordoned: someone else cordoned it first)"


def find(nodes: dict[str, Any]) -> Found:
    """From `kubectl get nodes -o json`: the tool's nodes (its taint and its run annotation) and the nodes
    someone else tainted or cordoned (listed, left alone)."""
    out = Found()
    others: dict[str, str] = {}
    for node in nodes.get("items") or []:
        name = node["metadata"]["name"]
        ann = node["metadata"].get("annotations") or {}
        spec = node.get("spec") or {}
        taints = [t for t in spec.get("taints") or [] if t.get("effect") in ("NoSchedule", "NoExecute")]
        ours = [t for t in taints if t.get("key") == KEY]
        if ours and RUN in ann and decide.is_ours(ann.get(REASON, decide.PREFIX)):
            tests = tuple(t for t in ann.get(TESTS, "").split(",") if t) or (str(ours[0].get("value")),)
            out.rechecking.append(rechecking(RECHECK, name, ann.get(REASON, ""), tests, CORDONED in ann))
            out.looked.append(name)
            continue
        how = [f"tainted {t['key']}={t.get('value', '')}:{t['effect']}" for t in taints
               if t.get("key") not in TOLERATED]  # fmt: skip
        if ours:
            how.insert(0, f"tainted {KEY} without the tool's {RUN} annotation")
        if spec.get("unschedulable"):
            how.append("cordoned")
        if how:
            others[name] = ", ".join(dict.fromkeys(how))
        out.looked.append(f"{name} ({others[name]} by someone else)" if name in others else name)
    out.listed = [
        Action(RECHECK, n, detail=f"left alone: {how} by someone else") for n, how in others.items()
    ]
    return out
