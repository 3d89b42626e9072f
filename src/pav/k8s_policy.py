"""What every GPU pod of a rendered job must have, checked before submit (and by the tests on each template).

A pod that lacks one of these still starts, and then runs slow or dies in ways that look like a broken
fabric: NCCL on a 64 MiB /dev/shm, RDMA registration under the default memlock limit (no IPC_LOCK), a
worker that sees fewer GPUs than the node has.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pav.errors import PavError

REPLICA_SPECS = {"PyTorchJob": "pytorchReplicaSpecs", "MPIJob": "mpiReplicaSpecs"}
# Kubeflow Trainer v2: a TrainJob has no pod template of its own; its runtime's replicated Jobs hold them.
RUNTIMES = ("ClusterTrainingRuntime", "TrainingRuntime")


def problems(manifest: dict[str, Any]) -> list[str]:
    """Every rule a job breaks, as 'ROLE: what is missing'; empty for a kind that is not a job."""
    found: list[str] = []
    for role, pod in _gpu_pods(manifest):
        found += [f"{role}: {p}" for p in _pod_problems(pod)]
    jobs = manifest.get("kind") in REPLICA_SPECS or manifest.get("kind") in RUNTIMES
    if jobs and not any(True for _ in _gpu_pods(manifest)):
        found.append("no replica requests nvidia.com/gpu")
    return found


def check_manifest(manifest: dict[str, Any], where: str) -> None:
    found = problems(manifest)
    if found:
        raise PavError(f"{where}: {'; '.join(found)}; fix the template (templates/k8s/) before submitting")


def _gpu_pods(manifest: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every pod template but a launcher's without GPUs (mpirun's pod), by its role."""
    for role, pod in _pods(manifest):
        if role.lower() != "launcher" or _gpus(pod):
            yield role, pod


def _pods(manifest: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    spec = manifest.get("spec") or {}
    if manifest.get("kind") in RUNTIMES:
        for rjob in ((spec.get("template") or {}).get("spec") or {}).get("replicatedJobs") or []:
            job = (rjob.get("template") or {}).get("spec") or {}
            yield rjob.get("name", ""), (job.get("template") or {}).get("spec") or {}
        return
    key = REPLICA_SPECS.get(manifest.get("kind", ""))
    for role, replica in (spec.get(key) or {}).items() if key else []:
        yield role, (replica.get("template") or {}).get("spec") or {}


def _gpus(pod: dict[str, Any]) -> int:
    total = 0
    for c in pod.get("containers") or []:
        limits = (c.get("resources") or {}).get("limits") or {}
        total += int(limits.get("nvidia.com/gpu", 0) or 0)
    return total


def _pod_problems(pod: dict[str, Any]) -> list[str]:
    found = []
    containers = pod.get("containers") or []
    for c in containers:
        res = c.get("resources") or {}
        req = (res.get("requests") or {}).get("nvidia.com/gpu")
        lim = (res.get("limits") or {}).get("nvidia.com/gpu")
        if not req or not lim or str(req) != str(lim):
            found.append(f"container {c.get('name')} must request and limit the same nvidia.com/gpu count")
    volumes = pod.get("volumes") or []
    shm = {v.get("name") for v in volumes if (v.get("emptyDir") or {}).get("medium") == "Memory"}
    for c in containers:
        mounts = {m.get("name") for m in c.get("volumeMounts") or [] if m.get("mountPath") == "/dev/shm"}
        if not mounts & shm:
            found.append(f"container {c.get('name')} has no /dev/shm from a memory emptyDir")
    for c in containers:
        if not _may_lock_memory(c):
            found.append(f"container {c.get('name')} can lock no memory (neither privileged nor IPC_LOCK)")
    return found


def _may_lock_memory(container: dict[str, Any]) -> bool:
    """RDMA registration and pinned buffers need it in the GPU container itself: a limit raised in an
    init container does not carry over to the next container."""
    security = container.get("securityContext") or {}
    added = (security.get("capabilities") or {}).get("add") or []
    return bool(security.get("privileged")) or "IPC_LOCK" in added
