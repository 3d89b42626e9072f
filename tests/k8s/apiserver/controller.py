"""What the two operators share: a reconcile loop over their jobs, pods scheduled onto the double's nodes,
status conditions (Created, Running, Succeeded/Failed), activeDeadlineSeconds, cleanPodPolicy when a job
ends, and ttlSecondsAfterFinished."""

from __future__ import annotations

import time
from typing import Any

from tests.k8s.apiserver.pods import POD
from tests.k8s.apiserver.resources import Resource
from tests.k8s.apiserver.scheduler import feasible
from tests.k8s.apiserver.store import Store


def owner_reference(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj["metadata"]
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


class Controller:
    kind = ""

    def __init__(self, store: Store, nodes: list[str]) -> None:
        self.store, self.nodes = store, nodes
        self.created: set[tuple[str, str]] = set()  # (namespace, pod): a pod cleaned up is not made again
        self.started: dict[str, float] = {}
        self.ended: dict[str, float] = {}

    # -- what each operator fills in ----------------------------------------------------------------
    def pods_of(self, job: dict[str, Any]) -> None:
        raise NotImplementedError

    def succeeded(self, job: dict[str, Any], pods: list[dict[str, Any]]) -> bool:
        raise NotImplementedError

    def ttl_target(self, job: dict[str, Any]) -> tuple[Resource, str] | None:
        """What ttlSecondsAfterFinished deletes: the job itself (training-operator)."""
        return self.resource(job), job["metadata"]["name"]

    # -- the loop -----------------------------------------------------------------------------------
    def resource(self, job: dict[str, Any]) -> Resource:
        return self.store.resource_of(job)

    def reconcile_all(self) -> None:
        for r in [r for r in self.store.resources() if r.kind == self.kind]:
            for job in self.store.list(r, ""):
                self.reconcile(r, job)

    def reconcile(self, resource: Resource, job: dict[str, Any]) -> None:
        meta, run = job["metadata"], job["spec"].get("runPolicy") or {}
        if meta["uid"] in self.ended:
            self._expire(job, run)
            return
        self.pods_of(job)
        pods = self.store.list(POD, meta["namespace"], f"training.kubeflow.org/job-name={meta['name']}")
        phases = [(p.get("status") or {}).get("phase", "Pending") for p in pods]
        started = self.started.setdefault(meta["uid"], time.monotonic())
        state, message = "", ""
        if "Failed" in phases:
            state, message = "Failed", f"{self.kind} {meta['name']} is failed because a pod failed."
        elif self.succeeded(job, pods):
            state, message = "Succeeded", f"{self.kind} {meta['name']} is successfully completed."
        elif run.get("activeDeadlineSeconds") and time.monotonic() - started > run["activeDeadlineSeconds"]:
            state, message = "Failed", f"{self.kind} {meta['name']} has failed: DeadlineExceeded"
        running = "Running" in phases and not state
        conditions = [
            {"type": "Created", "status": "True", "reason": f"{self.kind}Created"},
            {"type": "Running", "status": str(running), "reason": f"{self.kind}Running"},
        ]
        if state:
            conditions.append(
                {"type": state, "status": "True", "reason": f"{self.kind}{state}", "message": message}
            )
            self.ended[meta["uid"]] = time.monotonic()
            self._clean_pods(run.get("cleanPodPolicy", "None"), pods)
        self.store.update_status(resource, meta["namespace"], meta["name"], {"conditions": conditions})

    def _expire(self, job: dict[str, Any], run: dict[str, Any]) -> None:
        ttl = run.get("ttlSecondsAfterFinished")
        if ttl is None or time.monotonic() - self.ended[job["metadata"]["uid"]] < ttl:
            return
        target = self.ttl_target(job)
        ns = job["metadata"]["namespace"]
        if target and self.store.find(target[0], ns, target[1]) is not None:
            self.store.delete(target[0], ns, target[1])

    def _clean_pods(self, policy: str, pods: list[dict[str, Any]]) -> None:
        for pod in pods:
            phase = (pod.get("status") or {}).get("phase", "Pending")
            if policy == "All" or (policy == "Running" and phase in ("Running", "Pending")):
                self.store.delete(POD, pod["metadata"]["namespace"], pod["metadata"]["name"])

    def create_pod(self, meta: dict[str, Any], spec: dict[str, Any]) -> None:
        """The scheduler's part: pods go round-robin onto the nodes that take them (scheduler.feasible);
        a pod none takes stays Pending, Unschedulable."""
        pod: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
        if "nodeName" not in spec:
            fits, why = feasible(self.store, spec, self.nodes)
            if fits:  # round-robin over the pods made in the namespace
                made = sum(1 for ns, _ in self.created if ns == meta["namespace"])
                spec["nodeName"] = fits[made % len(fits)]
            else:
                unscheduled = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
                pod["status"] = {"phase": "Pending", "conditions": [{**unscheduled, "message": why}]}
        self.created.add((meta["namespace"], meta["name"]))
        self.store.put(POD, pod)
