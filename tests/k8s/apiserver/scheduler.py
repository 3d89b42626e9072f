"""What the real control plane does with a node's taints and cordon, played by the double: the node lifecycle
controller's taint for a cordoned node (TaintNodesByCondition: spec.unschedulable true adds
node.kubernetes.io/unschedulable:NoSchedule, false removes it), and kube-scheduler's filters a pod must pass
to land on a node (NodeUnschedulable, TaintToleration, NodeAffinity with nodeSelector). A pod no node takes
stays Pending with PodScheduled False (Unschedulable), as the real one reports it; unlike the real
scheduler, the double does not retry it later. A pod that names its nodeName skips the scheduler."""

from __future__ import annotations

from typing import Any

from tests.k8s.apiserver.resources import BUILTIN, Resource
from tests.k8s.apiserver.store import Store

NODE = next(r for r in BUILTIN if r.kind == "Node")
UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
BLOCKING = ("NoSchedule", "NoExecute")


def install(store: Store) -> None:
    def react(resource: Resource, obj: dict[str, Any]) -> None:
        if resource.kind == "Node":
            _cordon_taint(store, obj)

    store.hooks.append(react)


def _cordon_taint(store: Store, node: dict[str, Any]) -> None:
    spec = node.get("spec") or {}
    taints = list(spec.get("taints") or [])
    has = any(t.get("key") == UNSCHEDULABLE for t in taints)
    if bool(spec.get("unschedulable")) == has:
        return
    if has:
        taints = [t for t in taints if t.get("key") != UNSCHEDULABLE]
    else:
        taints.append({"key": UNSCHEDULABLE, "effect": "NoSchedule", "timeAdded": node["metadata"].get(
            "creationTimestamp", "")})  # fmt: skip
    node["spec"] = {**spec, "taints": taints} if taints else {k: v for k, v in spec.items() if k != "taints"}
    store.put(NODE, node)


def feasible(store: Store, pod: dict[str, Any], names: list[str]) -> tuple[list[str], str]:
    """The nodes of `names` the pod may land on, and why the others may not (the scheduler's message)."""
    fits, why = [], {}
    for name in names:
        node = store.find(NODE, "", name)
        problem = "not found" if node is None else refusal(pod, node)
        if problem:
            why[name] = problem
        else:
            fits.append(name)
    message = f"0/{len(names)} nodes are available: " + ", ".join(f"{n}: {w}" for n, w in why.items())
    return fits, "" if fits else message


def refusal(pod: dict[str, Any], node: dict[str, Any]) -> str:
    """Why the scheduler's filters keep the pod off the node; "" where it may land there."""
    spec, tolerations = node.get("spec") or {}, pod.get("tolerations") or []
    cordon = {"key": UNSCHEDULABLE, "effect": "NoSchedule"}
    if spec.get("unschedulable") and not tolerates(tolerations, cordon):
        return "node(s) were unschedulable"
    for taint in spec.get("taints") or []:
        if taint.get("effect") in BLOCKING and not tolerates(tolerations, taint):
            return f"node(s) had untolerated taint {{{taint['key']}: {taint.get('value', '')}}}"
    labels = node["metadata"].get("labels") or {}
    if any(labels.get(k) != v for k, v in (pod.get("nodeSelector") or {}).items()):
        return "node(s) didn't match Pod's node affinity/selector"
    if not _affinity(pod, node, labels):
        return "node(s) didn't match Pod's node affinity/selector"
    return ""


def tolerates(tolerations: list[dict[str, Any]], taint: dict[str, Any]) -> bool:
    """core/v1 Toleration.ToleratesTaint: an empty key with Exists tolerates every taint; an empty effect
    every effect."""
    for t in tolerations:
        if t.get("effect") and t["effect"] != taint.get("effect"):
            continue
        if t.get("key") and t["key"] != taint.get("key"):
            continue
        if not t.get("key") and t.get("operator") != "Exists":
            continue
        if t.get("operator") == "Exists" or t.get("value", "") == taint.get("value", ""):
            return True
    return False


def _affinity(pod: dict[str, Any], node: dict[str, Any], labels: dict[str, str]) -> bool:
    """requiredDuringSchedulingIgnoredDuringExecution: any term whose every expression and field holds
    (operators In and NotIn; fields: metadata.name, as DaemonSets pin their pods)."""
    required = ((pod.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if not required:
        return True
    fields = {"metadata.name": node["metadata"]["name"]}
    for term in required.get("nodeSelectorTerms") or []:
        checks = [(labels, e) for e in term.get("matchExpressions") or []]
        checks += [(fields, e) for e in term.get("matchFields") or []]
        if checks and all(_holds(values, e) for values, e in checks):
            return True
    return False


def _holds(values: dict[str, str], expression: dict[str, Any]) -> bool:
    present, value = expression["key"] in values, values.get(expression["key"])
    if expression["operator"] == "In":
        return present and value in expression.get("values", [])
    if expression["operator"] == "NotIn":
        return not present or value not in expression.get("values", [])
    if expression["operator"] == "Exists":
        return present
    return not present  # DoesNotExist
