"""mpi-operator v0.6.0's MPIJob (kubeflow.org/v2beta1) controller, the parts its pods depend on
(pkg/controller/mpi_job_controller.go): the hostfile ConfigMap, the SSH Secret, the workers' Service, worker
pods (sshd -De when the template gives no command), the launcher Job once workers run
(WaitForWorkersReady) with its environment, and ttlSecondsAfterFinished reaching only the launcher Job."""

from __future__ import annotations

import base64
import copy
from typing import Any

from tests.k8s.apiserver.controller import Controller, owner_reference
from tests.k8s.apiserver.pods import CONFIGMAP, POD, SECRET, SERVICE
from tests.k8s.apiserver.resources import BUILTIN, Resource

JOB = next(r for r in BUILTIN if r.kind == "Job")
PREFIX = "training.kubeflow.org/"
OMPI_ENV = {
    "OMPI_MCA_orte_keep_fqdn_hostnames": "true",
    "OMPI_MCA_orte_default_hostfile": "/etc/mpi/hostfile",
    "OMPI_MCA_plm_rsh_args": "-o ConnectionAttempts=10",
}


def labels(job: str, role: str) -> dict[str, str]:
    return {PREFIX + "operator-name": "mpi-operator", PREFIX + "job-name": job, PREFIX + "job-role": role}


class MPIJobController(Controller):
    kind = "MPIJob"

    def pods_of(self, job: dict[str, Any]) -> None:
        meta, spec = job["metadata"], job["spec"]
        name, ns = meta["name"], meta["namespace"]
        slots = spec.get("slotsPerWorker", 1)
        workers = spec["mpiReplicaSpecs"].get("Worker", {}).get("replicas", 0)
        owned = {"namespace": ns, "ownerReferences": [owner_reference(job)]}
        if self.store.find(CONFIGMAP, ns, f"{name}-config") is None:
            hosts = "".join(f"{name}-worker-{i}.{name}.{ns}.svc slots={slots}\n" for i in range(workers))
            self.store.put(
                CONFIGMAP,
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": f"{name}-config", **owned},
                    "data": {"hostfile": hosts},
                },
            )
            key = base64.b64encode(b"-----BEGIN EC PRIVATE KEY-----\n(double)\n").decode()
            self.store.put(
                SECRET,
                {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "type": "kubernetes.io/ssh-auth",
                    "metadata": {"name": f"{name}-ssh", **owned},
                    "data": {"ssh-privatekey": key, "ssh-publickey": key},
                },
            )
            self.store.put(
                SERVICE,
                {
                    "apiVersion": "v1",
                    "kind": "Service",
                    "metadata": {"name": name, **owned},
                    "spec": {"clusterIP": "None", "selector": labels(name, "worker")},
                },
            )
        for i in range(workers):
            self._worker(job, i, owned)
        pods = self.store.list(POD, ns, f"{PREFIX}job-name={name},{PREFIX}job-role=worker")
        ready = len(pods) == workers and all((p.get("status") or {}).get("phase") == "Running" for p in pods)
        policy = spec.get("launcherCreationPolicy", "AtStartup")
        if (policy == "AtStartup" or ready) and self.store.find(JOB, ns, f"{name}-launcher") is None:
            self._launcher(job, owned, slots)

    def _worker(self, job: dict[str, Any], index: int, owned: dict[str, Any]) -> None:
        name = job["metadata"]["name"]
        pod_name = f"{name}-worker-{index}"
        if (job["metadata"]["namespace"], pod_name) in self.created:
            return
        template = copy.deepcopy(job["spec"]["mpiReplicaSpecs"]["Worker"]["template"])
        spec = template["spec"]
        spec.update(hostname=pod_name, subdomain=name, restartPolicy="Never")
        main = spec["containers"][0]
        if not main.get("command") and not main.get("args"):
            main["command"] = ["/usr/sbin/sshd", "-De"]
        main["env"] = [*(main.get("env") or []), {"name": "K_MPI_JOB_ROLE", "value": "worker"}]
        self._ssh(job, spec)
        pod_labels = {
            **(template.get("metadata", {}).get("labels") or {}),
            **labels(name, "worker"),
            PREFIX + "replica-index": str(index),
        }
        self.create_pod({"name": pod_name, "labels": pod_labels, **owned}, spec)

    def _launcher(self, job: dict[str, Any], owned: dict[str, Any], slots: int) -> None:
        name = job["metadata"]["name"]
        run = job["spec"].get("runPolicy") or {}
        launcher_job = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": f"{name}-launcher", **owned},
            "spec": {"ttlSecondsAfterFinished": run.get("ttlSecondsAfterFinished"), "backoffLimit": 0},
        }
        stored = self.store.put(JOB, launcher_job)
        template = copy.deepcopy(job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"])
        spec = template["spec"]
        spec.update(hostname=f"{name}-launcher", subdomain=name, restartPolicy="Never")
        main = spec["containers"][0]
        env = {
            "K_MPI_JOB_ROLE": "launcher",
            **OMPI_ENV,
            "OMPI_MCA_orte_set_default_slots": str(slots),
            "NVIDIA_VISIBLE_DEVICES": "",
            "NVIDIA_DRIVER_CAPABILITIES": "",
        }
        main["env"] = [*(main.get("env") or []), *({"name": k, "value": v} for k, v in env.items())]
        spec.setdefault("volumes", []).append(
            {"name": "mpi-job-config", "configMap": {"name": f"{name}-config"}}
        )
        main.setdefault("volumeMounts", []).append({"name": "mpi-job-config", "mountPath": "/etc/mpi"})
        self._ssh(job, spec)
        pod_labels = {**(template.get("metadata", {}).get("labels") or {}), **labels(name, "launcher")}
        ref = {"namespace": owned["namespace"], "ownerReferences": [owner_reference(stored)]}
        self.create_pod({"name": f"{name}-launcher-x7k2p", "labels": pod_labels, **ref}, spec)

    def _ssh(self, job: dict[str, Any], spec: dict[str, Any]) -> None:
        path = job["spec"].get("sshAuthMountPath", "/root/.ssh")
        secret = {"secretName": f"{job['metadata']['name']}-ssh", "defaultMode": 0o600}
        spec.setdefault("volumes", []).append({"name": "ssh-auth", "secret": secret})
        spec["containers"][0].setdefault("volumeMounts", []).append({"name": "ssh-auth", "mountPath": path})

    def succeeded(self, job: dict[str, Any], pods: list[dict[str, Any]]) -> bool:
        launchers = [p for p in pods if p["metadata"]["labels"].get(PREFIX + "job-role") == "launcher"]
        return bool(launchers) and all((p.get("status") or {}).get("phase") == "Succeeded" for p in launchers)

    def ttl_target(self, job: dict[str, Any]) -> tuple[Resource, str] | None:
        """v0.6.0 hands ttlSecondsAfterFinished to the launcher Job only: the MPIJob object stays."""
        return JOB, f"{job['metadata']['name']}-launcher"
