"""training-operator v1.8.1's PyTorchJob controller, the parts a job's pods depend on: its defaults, one pod
and one Service per replica, the environment of pkg/controller.v1/pytorch/envvar.go (setPodEnv) and
master.go, status conditions, cleanPodPolicy and ttlSecondsAfterFinished."""

from __future__ import annotations

import copy
from typing import Any

from tests.k8s.apiserver.controller import Controller, owner_reference
from tests.k8s.apiserver.pods import POD, SERVICE

DEFAULT_PORT = ("pytorchjob-port", 23456)  # PyTorchJobDefaultPortName, PyTorchJobDefaultPort
CONTAINER = "pytorch"  # PyTorchJobDefaultContainerName
PREFIX = "training.kubeflow.org/"


def defaults(job: dict[str, Any]) -> dict[str, Any]:
    """SetDefaults_PyTorchJob: cleanPodPolicy None, replicas 1, the default port on the pytorch container,
    nprocPerNode "auto", elasticPolicy min/max from the Worker replicas."""
    job = copy.deepcopy(job)
    spec = job["spec"]
    spec.setdefault("runPolicy", {}).setdefault("cleanPodPolicy", "None")
    for replica in spec["pytorchReplicaSpecs"].values():
        replica.setdefault("replicas", 1)
        replica.setdefault("restartPolicy", "OnFailure")
        for c in replica["template"]["spec"]["containers"]:
            ports = c.setdefault("ports", []) if c["name"] == CONTAINER else []
            if c["name"] == CONTAINER and not any(p.get("name") == DEFAULT_PORT[0] for p in ports):
                ports.append({"name": DEFAULT_PORT[0], "containerPort": DEFAULT_PORT[1]})
    elastic = spec.get("elasticPolicy")
    if elastic is not None:
        workers = spec["pytorchReplicaSpecs"].get("Worker", {}).get("replicas")
        elastic.setdefault("maxReplicas", elastic.get("minReplicas", workers))
        elastic.setdefault("minReplicas", elastic["maxReplicas"])
    if elastic is None or "nProcPerNode" not in elastic:
        spec.setdefault("nprocPerNode", "auto")
    return job


def pod_env(job: dict[str, Any], rtype: str, index: int) -> list[dict[str, str]]:
    """setPodEnv for one container: what the operator appends to the template's env, in its order."""
    spec = job["spec"]
    replicas = spec["pytorchReplicaSpecs"]
    total = sum(r["replicas"] for r in replicas.values())
    nproc = spec.get("nprocPerNode")
    per_node = int(nproc) if nproc and nproc.isdigit() else 1
    env = [("PYTHONUNBUFFERED", "1")]
    if "Master" in replicas:
        port = next(
            p["containerPort"]
            for c in replicas["Master"]["template"]["spec"]["containers"]
            if c["name"] == CONTAINER
            for p in c.get("ports", [])
            if p.get("name") == DEFAULT_PORT[0]
        )
        master = f"{job['metadata']['name']}-master-0"
        env += [
            ("MASTER_PORT", str(port)),
            ("PET_MASTER_PORT", str(port)),
            ("MASTER_ADDR", master),
            ("PET_MASTER_ADDR", master),
        ]
        rank = index + 1 if rtype == "Worker" else index
        env += [("WORLD_SIZE", str(total * per_node)), ("RANK", str(rank)), ("PET_NODE_RANK", str(rank))]
    if nproc is not None:
        env.append(("PET_NPROC_PER_NODE", nproc))
    elastic = spec.get("elasticPolicy")
    if elastic is not None:
        env += _elastic_env(job, elastic)
    else:
        env.append(("PET_NNODES", str(total)))
    return [{"name": k, "value": v} for k, v in env]


def _elastic_env(job: dict[str, Any], elastic: dict[str, Any]) -> list[tuple[str, str]]:
    """elastic.go: rendezvous on the first Worker's Service (c10d by default) and nnodes as MIN:MAX."""
    backend = elastic.get("rdzvBackend", "c10d")
    host = elastic.get("rdzvHost") or f"{job['metadata']['name']}-worker-0"
    port = elastic.get("rdzvPort", DEFAULT_PORT[1])
    env = [
        ("PET_RDZV_ENDPOINT", f"{host}:{port}"),
        ("PET_RDZV_BACKEND", backend),
        ("PET_NNODES", f"{elastic['minReplicas']}:{elastic['maxReplicas']}"),
    ]
    if elastic.get("rdzvId"):
        env.append(("PET_RDZV_ID", elastic["rdzvId"]))
    return env


class PyTorchJobController(Controller):
    kind = "PyTorchJob"

    def pods_of(self, job: dict[str, Any]) -> None:
        job = defaults(job)
        name, ns = job["metadata"]["name"], job["metadata"]["namespace"]
        for rtype, replica in job["spec"]["pytorchReplicaSpecs"].items():
            for i in range(replica["replicas"]):
                pod_name = f"{name}-{rtype.lower()}-{i}"
                if self.store.find(POD, ns, pod_name) is not None or (ns, pod_name) in self.created:
                    continue
                labels = {
                    **(replica["template"].get("metadata", {}).get("labels") or {}),
                    PREFIX + "job-name": name,
                    PREFIX + "operator-name": "pytorchjob-controller",
                    PREFIX + "replica-type": rtype.lower(),
                    PREFIX + "replica-index": str(i),
                }
                if rtype == "Master":
                    labels[PREFIX + "job-role"] = "master"
                spec = copy.deepcopy(replica["template"]["spec"])
                spec["restartPolicy"] = replica["restartPolicy"]
                for c in spec["containers"]:
                    c["env"] = [*(c.get("env") or []), *pod_env(job, rtype, i)]
                meta = {
                    "name": pod_name,
                    "namespace": ns,
                    "labels": labels,
                    "ownerReferences": [owner_reference(job)],
                }
                ports = [p for c in spec["containers"] for p in c.get("ports", [])]
                service = {
                    "apiVersion": "v1",
                    "kind": "Service",
                    "metadata": {**meta},
                    "spec": {
                        "clusterIP": "None",
                        "selector": labels,
                        "ports": [{"name": p["name"], "port": p["containerPort"]} for p in ports],
                    },
                }
                self.store.put(SERVICE, service)
                self.create_pod(meta, spec)

    def succeeded(self, job: dict[str, Any], pods: list[dict[str, Any]]) -> bool:
        """A job with a Master succeeds when the Master does; without one, when every Worker has."""
        masters = [p for p in pods if p["metadata"]["labels"].get(PREFIX + "replica-type") == "master"]
        judged = masters or pods
        expected = sum(r.get("replicas", 1) for r in job["spec"]["pytorchReplicaSpecs"].values())
        return (
            bool(judged)
            and len(pods) >= (1 if masters else expected)
            and all(_phase(p) == "Succeeded" for p in judged)
        )


def _phase(pod: dict[str, Any]) -> str:
    return (pod.get("status") or {}).get("phase", "Pending")
