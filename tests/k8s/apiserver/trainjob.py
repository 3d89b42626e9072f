"""Kubeflow Trainer v2.3.0's TrainJob controller (kubeflow/trainer, pkg/runtime/core and the framework
plugins), the parts a TrainJob's pods depend on: the runtime named by runtimeRef (ClusterTrainingRuntime or
TrainingRuntime), one JobSet built from its template (jobset/jobset.go: replicas 1, parallelism and
completions from the pod set's count; builder.go: the TrainJob's image, command, args, env and resources on
the "node" container of the trainer step), the torch plugin (torch/torch.go: PET_NNODES, PET_NPROC_PER_NODE,
PET_NODE_RANK from the completion index, PET_MASTER_ADDR `NAME-node-0-0.NAME`, PET_MASTER_PORT 29500), the
MPI plugin (mpi/mpi.go: the SSH key Secret NAME-mpi-ssh-auth, the hostfile ConfigMap NAME-mpi-hostfile of
every node pod's DNS name with its slots, their volumes and the OpenMPI variables on the launcher), the
status (the JobSet's Completed / Failed as Complete / Failed; past activeDeadlineSeconds Failed with
DeadlineExceeded and the JobSet deleted: pkg/controller/trainjob_controller.go's reconcileDeadline)."""

from __future__ import annotations

import base64
import copy
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.k8s.apiserver.controller import owner_reference
from tests.k8s.apiserver.pods import CONFIGMAP, SECRET
from tests.k8s.apiserver.resources import Resource
from tests.k8s.apiserver.store import Store

GROUP = "trainer.kubeflow.org"
ANCESTOR = GROUP + "/trainjob-ancestor-step"
NODE, LAUNCHER = "node", "launcher"  # constants.Node (Job and container name), constants.Launcher
TRAINER_PORT = 29500  # constants.ContainerTrainerPort
COMPLETION_INDEX_PATH = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
MPI_HOSTFILE_DIR = "/etc/mpi"


def _upsert(
    items: list[dict[str, Any]], new: list[dict[str, Any]], key: str = "name"
) -> list[dict[str, Any]]:
    """apply.UpsertEnvVars / UpsertVolumes / UpsertVolumeMounts: replace by name, else append."""
    out = list(items)
    for item in new:
        out = [o for o in out if o.get(key) != item.get(key)] + [item]
    return out


def _env(pairs: dict[str, str]) -> list[dict[str, Any]]:
    return [{"name": k, "value": v} for k, v in pairs.items()]


class TrainJobController:
    def __init__(self, store: Store, nodes: list[str]) -> None:
        self.store, self.nodes = store, nodes
        self.started: dict[str, float] = {}

    def reconcile_all(self) -> None:
        for r in [r for r in self.store.resources() if r.kind == "TrainJob"]:
            for job in self.store.list(r, ""):
                self.reconcile(r, job)

    def reconcile(self, resource: Resource, job: dict[str, Any]) -> None:
        meta = job["metadata"]
        if any(
            c.get("status") == "True" and c["type"] in ("Complete", "Failed") for c in self._conditions(job)
        ):
            return
        started = self.started.setdefault(meta["uid"], time.monotonic())
        jobset_type = self._type("JobSet")
        runtime = self._runtime(job)
        if jobset_type is None or runtime is None:
            return  # the real controller requeues until both exist
        jobset = self.store.find(jobset_type, meta["namespace"], meta["name"])
        if jobset is None:
            self.store.put(jobset_type, self._build(job, runtime))
            return
        conditions = [c for c in self._conditions(job) if c["type"] not in ("Complete", "Failed")]
        for c in (jobset.get("status") or {}).get("conditions") or []:
            if c.get("status") == "True" and c["type"] in ("Completed", "Failed"):
                conditions.append({**c, "type": "Complete" if c["type"] == "Completed" else "Failed"})
        deadline = job["spec"].get("activeDeadlineSeconds")
        if deadline and not conditions and time.monotonic() - started > deadline:
            # reconcileDeadline: Failed, and the JobSet deleted (its Jobs and pods with it)
            message = "TrainJob exceeded its active deadline"
            conditions.append(
                {"type": "Failed", "status": "True", "reason": "DeadlineExceeded", "message": message}
            )
            self.store.delete(jobset_type, meta["namespace"], meta["name"])
        jobs_status = [
            {k: s[k] for k in ("name", "ready", "succeeded", "failed", "active", "suspended")}
            for s in (jobset.get("status") or {}).get("replicatedJobsStatus") or []
        ]
        status = {"jobsStatus": jobs_status, **({"conditions": conditions} if conditions else {})}
        self.store.update_status(resource, meta["namespace"], meta["name"], status)

    @staticmethod
    def _conditions(job: dict[str, Any]) -> list[dict[str, Any]]:
        return list((job.get("status") or {}).get("conditions") or [])

    def _type(self, kind: str) -> Resource | None:
        return next((r for r in self.store.resources() if r.kind == kind), None)

    def _runtime(self, job: dict[str, Any]) -> dict[str, Any] | None:
        ref = job["spec"]["runtimeRef"]
        kind = ref.get("kind", "ClusterTrainingRuntime")
        resource = self._type(kind)
        namespace = job["metadata"]["namespace"] if kind == "TrainingRuntime" else ""
        return self.store.find(resource, namespace, ref["name"]) if resource else None

    # -- the JobSet ---------------------------------------------------------------------------------------
    def _build(self, job: dict[str, Any], runtime: dict[str, Any]) -> dict[str, Any]:
        name, ns = job["metadata"]["name"], job["metadata"]["namespace"]
        spec = copy.deepcopy(runtime["spec"]["template"]["spec"])
        policy = runtime["spec"].get("mlPolicy") or {}
        trainer = job["spec"].get("trainer") or {}
        nodes = trainer.get("numNodes", policy.get("numNodes", 1))
        for rjob in spec["replicatedJobs"]:
            rjob["replicas"] = 1  # builder.go: multiple replicas per replicated Job are not supported
            is_trainer = (rjob["template"].get("metadata") or {}).get("labels", {}).get(ANCESTOR) == "trainer"
            # The count of the pod set the ML policy sizes: torch's trainer step, MPI's "node" Job.
            sized = rjob["name"] == NODE if "mpi" in policy else is_trainer
            count = nodes if sized else 1
            rjob["template"]["spec"].update(parallelism=count, completions=count)
            if is_trainer:
                self._trainer(rjob, trainer)
        if "torch" in policy:
            self._torch(name, spec, trainer, nodes)
        if "mpi" in policy:
            self._mpi(job, spec, policy["mpi"], trainer, nodes)
        meta = {"name": name, "namespace": ns, "ownerReferences": [owner_reference(job)]}
        return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": meta, "spec": spec}

    @staticmethod
    def _containers(rjob: dict[str, Any]) -> list[dict[str, Any]]:
        return [c for c in rjob["template"]["spec"]["template"]["spec"]["containers"] if c["name"] == NODE]

    def _trainer(self, rjob: dict[str, Any], trainer: dict[str, Any]) -> None:
        """builder.go Trainer(): the TrainJob's own values on the trainer step's "node" container."""
        for c in self._containers(rjob):
            for key in ("image", "command", "args"):
                if key in trainer:
                    c[key] = trainer[key]
            c["env"] = _upsert(c.get("env") or [], trainer.get("env") or [])
            if "resourcesPerNode" in trainer:
                c["resources"] = trainer["resourcesPerNode"]

    def _torch(self, name: str, spec: dict[str, Any], trainer: dict[str, Any], nodes: int) -> None:
        nproc = str(trainer["numProcPerNode"]) if "numProcPerNode" in trainer else "auto"
        env = _env({"PET_NNODES": str(nodes), "PET_NPROC_PER_NODE": nproc})
        env.append({"name": "PET_NODE_RANK", "valueFrom": {"fieldRef": {"fieldPath": COMPLETION_INDEX_PATH}}})
        env += _env({"PET_MASTER_ADDR": f"{name}-{NODE}-0-0.{name}", "PET_MASTER_PORT": str(TRAINER_PORT)})
        for rjob in spec["replicatedJobs"]:
            if (rjob["template"].get("metadata") or {}).get("labels", {}).get(ANCESTOR) != "trainer":
                continue
            for c in self._containers(rjob):
                c["env"] = _upsert(c.get("env") or [], env)
                c["ports"] = _upsert(c.get("ports") or [], [{"containerPort": TRAINER_PORT}], "containerPort")

    def _mpi(
        self,
        job: dict[str, Any],
        spec: dict[str, Any],
        mpi: dict[str, Any],
        trainer: dict[str, Any],
        nodes: int,
    ) -> None:
        name, ns = job["metadata"]["name"], job["metadata"]["namespace"]
        slots = trainer.get("numProcPerNode") or mpi.get("numProcPerNode", 1)
        mount = mpi.get("sshAuthMountPath", "/root/.ssh")
        owned = {"namespace": ns, "ownerReferences": [owner_reference(job)]}
        secret = f"{name}-mpi-ssh-auth"
        if self.store.find(SECRET, ns, secret) is None:
            private, public = _ssh_key()
            data = {
                k: base64.b64encode(v).decode()
                for k, v in (("ssh-privatekey", private), ("ssh-publickey", public))
            }
            meta = {"name": secret, **owned}
            self.store.put(SECRET, {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/ssh-auth",
                                    "immutable": True, "metadata": meta, "data": data})  # fmt: skip
        hosts = "".join(f"{name}-{NODE}-0-{i}.{name} slots={slots}\n" for i in range(nodes))
        self.store.put(CONFIGMAP, {"apiVersion": "v1", "kind": "ConfigMap",
                                   "metadata": {"name": f"{name}-mpi-hostfile", **owned},
                                   "data": {"hostfile": hosts}})  # fmt: skip
        items = [
            {"key": "ssh-privatekey", "path": "id_rsa", "mode": 0o640},
            {"key": "ssh-publickey", "path": "id_rsa.pub", "mode": 0o644},
            {"key": "ssh-publickey", "path": "authorized_keys", "mode": 0o644},
        ]
        ssh_volume = {
            "name": "mpi-ssh-auth",
            "secret": {"secretName": secret, "defaultMode": 0o400, "items": items},
        }
        for rjob in spec["replicatedJobs"]:
            if rjob["name"] not in (NODE, LAUNCHER):
                continue
            pod = rjob["template"]["spec"]["template"]["spec"]
            volumes = [ssh_volume]
            if rjob["name"] == LAUNCHER:
                hostfile = {
                    "name": f"{name}-mpi-hostfile",
                    "items": [{"key": "hostfile", "path": "hostfile", "mode": 0o444}],
                }
                volumes.append({"name": "mpi-hostfile", "configMap": hostfile})
            pod["volumes"] = _upsert(pod.get("volumes") or [], volumes)
            for c in self._containers(rjob):
                mounts = [{"name": "mpi-ssh-auth", "mountPath": mount}]
                if rjob["name"] == LAUNCHER:
                    mounts.append({"name": "mpi-hostfile", "mountPath": MPI_HOSTFILE_DIR})
                    c["env"] = _upsert(c.get("env") or [], _env({
                        "OMPI_MCA_orte_default_hostfile": f"{MPI_HOSTFILE_DIR}/hostfile",
                        "OMPI_MCA_orte_keep_fqdn_hostnames": "true",
                        "OMPI_MCA_orte_set_default_slots": str(slots),
                        "OMPI_MCA_plm_rsh_args": "-o ConnectionAttempts=10",
                    }))  # fmt: skip
                c["volumeMounts"] = _upsert(c.get("volumeMounts") or [], mounts)


def _ssh_key() -> tuple[bytes, bytes]:
    """A key pair as the MPI plugin makes one (ECDSA P-521: EC PRIVATE KEY PEM, authorized_keys line)."""
    with tempfile.TemporaryDirectory() as folder:
        key = Path(folder) / "id"
        argv = ["ssh-keygen", "-q", "-t", "ecdsa", "-b", "521", "-m", "PEM", "-N", "", "-f", str(key)]
        subprocess.run(argv, check=True, capture_output=True)
        return key.read_bytes(), key.with_suffix(".pub").read_bytes()
