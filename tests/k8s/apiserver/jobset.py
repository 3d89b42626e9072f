"""JobSet v0.12.0's controller (kubernetes-sigs/jobset, pkg/controllers/jobset_controller.go) and the batch
Job controller's Indexed mode beneath it, the parts a TrainJob's pods depend on: the headless Service named
for the JobSet (its subdomain), one Job per replica of each replicated Job, started in dependsOn order (a
dependency Ready: every pod of its Jobs running; Complete: every Job done), Indexed pods with the completion
index as label and annotation and `JOB-INDEX` as hostname, the JobSet's labels on Jobs and pods, its
Completed / Failed conditions (successPolicy, the default failure policy: any failed Job fails the JobSet),
replicatedJobsStatus, the active Jobs deleted once it has finished (a failed Job's active pods too: their
logs go with them), and ttlSecondsAfterFinished. Only Jobs a JobSet owns are played here (mpijob.py runs
its launcher Job itself)."""

from __future__ import annotations

import copy
import time
import uuid
from typing import Any

from tests.k8s.apiserver.controller import owner_reference
from tests.k8s.apiserver.pods import POD, SERVICE
from tests.k8s.apiserver.resources import BUILTIN, Resource
from tests.k8s.apiserver.store import Store

JOB = next(r for r in BUILTIN if r.kind == "Job")
PREFIX = "jobset.sigs.k8s.io/"
JOBSET_NAME, RJOB_NAME, JOB_INDEX = (
    PREFIX + "jobset-name",
    PREFIX + "replicatedjob-name",
    PREFIX + "job-index",
)
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"


def _phase(pod: dict[str, Any]) -> str:
    return (pod.get("status") or {}).get("phase", "Pending")


def _finished(job: dict[str, Any]) -> bool:
    conditions = (job.get("status") or {}).get("conditions") or []
    return any(c["status"] == "True" and c["type"] in ("Complete", "Failed") for c in conditions)


def _condition(kind: str, reason: str, message: str) -> dict[str, Any]:
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return {"type": kind, "status": "True", "reason": reason, "message": message, "lastTransitionTime": now}


class JobController:
    """kube-controller-manager's Job controller for Indexed Jobs a JobSet made: a pod per completion index,
    status counts, Complete when every index succeeded, Failed past backoffLimit (its active pods deleted),
    or with backoffLimitPerIndex once every index has ended and one failed (the others run to their end)."""

    def __init__(self, store: Store, nodes: list[str]) -> None:
        self.store, self.nodes = store, nodes
        self.created: set[tuple[str, int]] = set()  # (job uid, index): a pod cleaned up is not made again

    def reconcile_all(self) -> None:
        for job in self.store.list(JOB, ""):
            if JOBSET_NAME in (job["metadata"].get("labels") or {}):
                self.reconcile(job)

    def pods(self, job: dict[str, Any]) -> list[dict[str, Any]]:
        meta = job["metadata"]
        return self.store.list(POD, meta["namespace"], f"batch.kubernetes.io/controller-uid={meta['uid']}")

    def reconcile(self, job: dict[str, Any]) -> None:
        meta, spec = job["metadata"], job["spec"]
        completions = spec.get("completions") or 1
        if not any(c.get("status") == "True" for c in (job.get("status") or {}).get("conditions") or []):
            for index in range(completions):
                self._pod(job, index)
        phases = [_phase(p) for p in self.pods(job)]
        status: dict[str, Any] = {
            "active": sum(p in ("Pending", "Running") for p in phases),
            "ready": phases.count("Running"),
            "succeeded": phases.count("Succeeded"),
            "failed": phases.count("Failed"),
        }
        old = (job.get("status") or {}).get("conditions") or []
        per_index = spec.get("backoffLimitPerIndex") is not None
        if old:
            status["conditions"] = old
        elif per_index and status["failed"] and not status["active"]:
            # backoffLimitPerIndex 0, no maxFailedIndexes: the Job fails once every index has ended
            status["conditions"] = [_condition("Failed", "FailedIndexes", "Job has failed indexes")]
        elif not per_index and status["failed"] > spec.get("backoffLimit", 6):
            status["conditions"] = [
                _condition("Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit")
            ]
            for pod in self.pods(job):  # a failed Job's active pods are terminated (deleted)
                if _phase(pod) in ("Pending", "Running"):
                    self.store.delete(POD, meta["namespace"], pod["metadata"]["name"])
        elif status["succeeded"] >= completions:
            status["conditions"] = [
                _condition("Complete", "CompletionsReached", "Reached expected number of succeeded pods")
            ]
        self.store.update_status(JOB, meta["namespace"], meta["name"], status)

    def _pod(self, job: dict[str, Any], index: int) -> None:
        meta = job["metadata"]
        if (meta["uid"], index) in self.created:
            return
        self.created.add((meta["uid"], index))
        template = copy.deepcopy(job["spec"]["template"])
        labels = {
            **(template.get("metadata", {}).get("labels") or {}),
            COMPLETION_INDEX: str(index),
            "batch.kubernetes.io/controller-uid": meta["uid"],
            "batch.kubernetes.io/job-name": meta["name"],
            "job-name": meta["name"],
        }
        spec = template["spec"]
        spec["hostname"] = f"{meta['name']}-{index}"  # Indexed Jobs: the pod's DNS name under the subdomain
        gpus = any("nvidia.com/gpu" in str(c.get("resources") or {}) for c in spec["containers"])
        # The scheduler's part: a node's GPUs to one pod (index i on node i), CPU pods onto the first node.
        spec.setdefault("nodeName", self.nodes[index % len(self.nodes)] if gpus else self.nodes[0])
        pod_meta = {
            "name": f"{meta['name']}-{index}-{uuid.uuid4().hex[:5]}",
            "namespace": meta["namespace"],
            "labels": labels,
            "annotations": {
                **(template.get("metadata", {}).get("annotations") or {}),
                COMPLETION_INDEX: str(index),
            },
            "ownerReferences": [owner_reference(job)],
        }
        self.store.put(POD, {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": spec})


class JobSetController:
    def __init__(self, store: Store, nodes: list[str]) -> None:
        self.store, self.nodes = store, nodes
        self.ended: dict[str, float] = {}

    def reconcile_all(self) -> None:
        for r in [r for r in self.store.resources() if r.kind == "JobSet"]:
            for jobset in self.store.list(r, ""):
                self.reconcile(r, jobset)

    def reconcile(self, resource: Resource, jobset: dict[str, Any]) -> None:
        meta, spec = jobset["metadata"], jobset["spec"]
        if meta["uid"] in self.ended:
            self._expire(resource, jobset)
            return
        subdomain = (spec.get("network") or {}).get("subdomain") or meta["name"]
        self._service(jobset, subdomain)
        jobs = {}
        for rjob in spec["replicatedJobs"]:
            mine = self._jobs(jobset, rjob["name"])
            if not mine and self._dependencies_met(jobset, rjob):
                for index in range(rjob.get("replicas", 1)):
                    self._job(jobset, rjob, index, subdomain)
                mine = self._jobs(jobset, rjob["name"])
            jobs[rjob["name"]] = mine
        conditions = self._conditions(spec, jobs)
        statuses = [self._rjob_status(name, mine) for name, mine in jobs.items()]
        status = {"replicatedJobsStatus": statuses, **({"conditions": conditions} if conditions else {})}
        if conditions:
            self.ended[meta["uid"]] = time.monotonic()
            status["terminalState"] = conditions[0]["type"]
            for job in (j for mine in jobs.values() for j in mine if not _finished(j)):
                # jobSetFinished: the active child Jobs are deleted, their pods with them (MPI nodes' sshd)
                self.store.delete(JOB, meta["namespace"], job["metadata"]["name"])
        self.store.update_status(resource, meta["namespace"], meta["name"], status)

    def _jobs(self, jobset: dict[str, Any], rjob: str) -> list[dict[str, Any]]:
        selector = f"{JOBSET_NAME}={jobset['metadata']['name']},{RJOB_NAME}={rjob}"
        return self.store.list(JOB, jobset["metadata"]["namespace"], selector)

    def _dependencies_met(self, jobset: dict[str, Any], rjob: dict[str, Any]) -> bool:
        """dependsOn: Ready once every Job of the dependency has all its pods ready, Complete once done."""
        for dep in rjob.get("dependsOn") or []:
            for job in self._jobs(jobset, dep["name"]) or [None]:
                if job is None:
                    return False
                status, want = job.get("status") or {}, job["spec"].get("parallelism") or 1
                done = status.get("succeeded", 0) >= (job["spec"].get("completions") or 1)
                if not done and (dep["status"] == "Complete" or status.get("ready", 0) < want):
                    return False
        return True

    def _service(self, jobset: dict[str, Any], subdomain: str) -> None:
        ns = jobset["metadata"]["namespace"]
        if self.store.find(SERVICE, ns, subdomain) is not None:
            return
        network = jobset["spec"].get("network") or {}
        service_spec = {
            "clusterIP": "None",
            "selector": {JOBSET_NAME: jobset["metadata"]["name"]},
            "publishNotReadyAddresses": network.get("publishNotReadyAddresses", True),
        }
        meta = {"name": subdomain, "namespace": ns, "ownerReferences": [owner_reference(jobset)]}
        self.store.put(
            SERVICE, {"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": service_spec}
        )

    def _job(self, jobset: dict[str, Any], rjob: dict[str, Any], index: int, subdomain: str) -> None:
        meta = jobset["metadata"]
        template = copy.deepcopy(rjob["template"])
        labels = {
            **(template.get("metadata", {}).get("labels") or {}),
            JOBSET_NAME: meta["name"],
            PREFIX + "jobset-uid": meta["uid"],
            RJOB_NAME: rjob["name"],
            PREFIX + "replicatedjob-replicas": str(rjob.get("replicas", 1)),
            JOB_INDEX: str(index),
        }
        spec = template["spec"]
        spec.setdefault("completionMode", "Indexed")
        pod = spec["template"]
        pod_meta = pod.setdefault("metadata", {})
        pod_meta["labels"] = {**(pod_meta.get("labels") or {}), **labels}
        pod["spec"]["subdomain"] = subdomain
        job_meta = {
            "name": f"{meta['name']}-{rjob['name']}-{index}",
            "namespace": meta["namespace"],
            "labels": labels,
            "ownerReferences": [owner_reference(jobset)],
        }
        self.store.put(JOB, {"apiVersion": "batch/v1", "kind": "Job", "metadata": job_meta, "spec": spec})

    def _conditions(
        self, spec: dict[str, Any], jobs: dict[str, list[dict[str, Any]]]
    ) -> list[dict[str, Any]]:
        def state(job: dict[str, Any]) -> str:
            trues = [
                c["type"] for c in (job.get("status") or {}).get("conditions") or [] if c["status"] == "True"
            ]
            return trues[0] if trues else ""

        if any(state(j) == "Failed" for mine in jobs.values() for j in mine):
            return [_condition("Failed", "FailedJobs", "jobset failed due to one or more job failures")]
        policy = spec.get("successPolicy") or {}
        targets = policy.get("targetReplicatedJobs") or list(jobs)
        done = [bool(jobs.get(t)) and all(state(j) == "Complete" for j in jobs[t]) for t in targets]
        if (policy.get("operator", "All") == "All" and all(done)) or (
            policy.get("operator") == "Any" and any(done)
        ):
            return [_condition("Completed", "AllJobsCompleted", "jobset completed successfully")]
        return []

    @staticmethod
    def _rjob_status(name: str, jobs: list[dict[str, Any]]) -> dict[str, Any]:
        counts = {"name": name, "ready": 0, "succeeded": 0, "failed": 0, "active": 0, "suspended": 0}
        for job in jobs:
            trues = {
                c["type"] for c in (job.get("status") or {}).get("conditions") or [] if c["status"] == "True"
            }
            status = job.get("status") or {}
            if "Complete" in trues:
                counts["succeeded"] += 1
            elif "Failed" in trues:
                counts["failed"] += 1
            else:
                counts["active"] += 1
                counts["ready"] += status.get("ready", 0) >= (job["spec"].get("parallelism") or 1)
        return counts

    def _expire(self, resource: Resource, jobset: dict[str, Any]) -> None:
        ttl = jobset["spec"].get("ttlSecondsAfterFinished")
        meta = jobset["metadata"]
        expired = ttl is not None and time.monotonic() - self.ended[meta["uid"]] >= ttl
        if expired and self.store.find(resource, meta["namespace"], meta["name"]) is not None:
            self.store.delete(resource, meta["namespace"], meta["name"])
