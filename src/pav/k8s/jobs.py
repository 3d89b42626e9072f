"""Submit a rendered job, follow its pods with progress, collect logs and result files, delete it."""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pav import interrupts
from pav.errors import PavError
from pav.k8s import job_api
from pav.k8s.job_api import RESOURCE
from pav.k8s.kubectl import Kubectl
from pav.k8s.render import END_MARK, FILE_MARK, Job, Manifest
from pav.launch import Launch
from pav.results import HostRecord

CONTAINER = {"PyTorchJob": {"master": "pytorch", "worker": "pytorch"},
             "MPIJob": {"launcher": "launcher", "worker": "worker"},
             "TrainJob": {"node": "node", "launcher": "node"}}  # fmt: skip
# Pods that print result files: every torchrun node, the mpirun launcher of an MPI job.
RESULT_ROLES = {"torch": ("master", "worker", "node"), "mpi": ("launcher",)}
# The operators label each pod with its role: training-operator the replica type (master, worker),
# mpi-operator the job role (launcher, worker), JobSet (under a TrainJob) the replicated Job (node, launcher).
ROLE_LABELS = (
    "training.kubeflow.org/job-role",
    "training.kubeflow.org/replica-type",
    "jobset.sigs.k8s.io/replicatedjob-name",
)
# A TrainJob's pods carry its JobSet's name (the TrainJob's), not the TrainJob's labels.
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
# Kubeflow Trainer's TrainJob reports Complete where the v1 operators report Succeeded.
STATES = {"Complete": "Succeeded"}
POLL_S = 10.0
# Past the job's activeDeadlineSeconds the operator fails it; this is how long the driver waits beyond that.
GRACE_S = 120.0
# A job is Succeeded once its Master is; a Worker may still be writing its results. How long to wait for
# every pod to end before taking the logs anyway.
SETTLE_S = 60.0


@dataclass(frozen=True)
class PodState:
    name: str
    role: str  # master | worker (PyTorchJob), launcher | worker (MPIJob), node | launcher (TrainJob)
    phase: str  # Pending | Running | Succeeded | Failed | Unknown | Deleted (gone while it ran)
    reason: str = ""  # why it waits or failed (ImagePullBackOff, OOMKilled, Unschedulable, ...)
    node: str = ""  # the Kubernetes node it was scheduled on
    host: str = ""  # its hostname (spec.hostname, else its name): what an MPI hostfile names it by


def job_state(job: dict[str, Any]) -> str:
    """Created, Running, Succeeded, Failed, ... from the operators' common status.conditions."""
    conditions = [c for c in (job.get("status") or {}).get("conditions") or [] if c.get("status") == "True"]
    state = conditions[-1]["type"] if conditions else "Created"
    return STATES.get(state, state)


def job_message(job: dict[str, Any]) -> str:
    conditions = (job.get("status") or {}).get("conditions") or []
    return conditions[-1].get("message", "") if conditions else ""


def pod_states(pods: dict[str, Any]) -> list[PodState]:
    states = []
    for pod in pods.get("items") or []:
        name = pod["metadata"]["name"]
        labels = pod["metadata"].get("labels") or {}
        role = next((labels[k] for k in ROLE_LABELS if k in labels), "worker")
        status = pod.get("status") or {}
        spec = pod.get("spec") or {}
        node, host = spec.get("nodeName", ""), spec.get("hostname") or name
        states.append(PodState(name, role, status.get("phase", "Unknown"), _reason(status), node, host))
    return sorted(states, key=lambda p: (p.role not in ("launcher", "master"), p.name))


def _reason(status: dict[str, Any]) -> str:
    for c in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]:
        state = c.get("state") or {}
        for key in ("waiting", "terminated"):
            reason = (state.get(key) or {}).get("reason", "")
            if reason and reason not in ("Completed", "PodInitializing", "ContainerCreating"):
                return reason
    for c in status.get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "False":
            return c.get("reason", "Unschedulable")
    return ""


def progress_line(job: Job, state: str, pods: list[PodState]) -> str:
    shown = ", ".join(
        f"{p.name.removeprefix(job.name + '-')} {p.phase}" + (f" ({p.reason})" if p.reason else "")
        for p in pods
    )
    return f"  {job.test}: {state} [{shown or 'no pods yet'}]"


def split_log(log: str) -> tuple[str, dict[str, str]]:
    """The pod's own output, and the result files it printed between FILE_MARK and END_MARK lines."""
    text: list[str] = []
    files: dict[str, list[str]] = {}
    current: str | None = None
    for line in log.splitlines():
        if line.startswith(FILE_MARK):
            current = line[len(FILE_MARK) :].strip()
            files[current] = []
        elif line == END_MARK and current is not None:
            current = None
        elif current is not None:
            files[current].append(line)
        else:
            text.append(line)
    bodies = {name: "\n".join(lines).rstrip("\n") + "\n" for name, lines in files.items()}
    return "\n".join(text) + "\n", bodies


def submit(kubectl: Kubectl, manifest: Manifest) -> None:
    kubectl.run("apply", "--server-side", "--force-conflicts", "-f", "-", stdin=manifest.text)


def follow(
    kubectl: Kubectl, job: Job, echo: Callable[[str], None] = print, poll_s: float = POLL_S
) -> tuple[str, list[PodState]]:
    """Poll until the job ends or outlives its deadline; a line whenever its state or a pod's changes."""
    deadline = time.monotonic() + job.timeout_s + GRACE_S
    last = ""
    ended_at: float | None = None
    seen: dict[str, PodState] = {}
    while True:
        interrupts.raise_if_requested()
        state = job_state(kubectl.json("get", RESOURCE[job.kind], job.name))
        pods = remember(seen, pod_states(kubectl.json("get", "pods", "-l", pod_selector(job))))
        line = progress_line(job, state, pods)
        if line != last:
            echo(line)
            last = line
        if job.flavor == "mpi" and _worker_failed_before_launch(pods):
            return "Failed", pods  # WaitForWorkersReady / dependsOn Ready: no launcher will ever start
        if state in ("Succeeded", "Failed"):
            ended_at = ended_at or time.monotonic()
            settled = all(p.phase not in ("Running", "Pending") for p in pods)
            if settled or time.monotonic() - ended_at > SETTLE_S:
                return state, pods
        if time.monotonic() > deadline:
            return "Timeout", pods
        time.sleep(poll_s)


def remember(seen: dict[str, PodState], now: list[PodState]) -> list[PodState]:
    """Every pod the job had, as last seen: a controller deletes some before the job is collected (JobSet
    deletes a finished JobSet's active Jobs: the MPI nodes' sshd pods; a failed Job's running pods go), yet
    they ran on their nodes, and a launcher's per-node files are named by their hostnames."""
    current = {p.name for p in now}
    for pod in now:
        seen[pod.name] = pod
    for name, pod in seen.items():
        if name not in current and pod.phase in ("Running", "Pending"):
            seen[name] = dataclasses.replace(pod, phase=DELETED)
    return sorted(seen.values(), key=lambda p: (p.role not in ("launcher", "master"), p.name))


def pod_selector(job: Job) -> str:
    if job.kind == "TrainJob":
        return f"{JOBSET_NAME}={job.name}"
    return f"pav-test={job.test},pav-run-id={job.labels['pav-run-id']}"


def _worker_failed_before_launch(pods: list[PodState]) -> bool:
    roles = {p.role for p in pods}
    return "launcher" not in roles and any(p.role != "launcher" and p.phase == "Failed" for p in pods)


def collect(kubectl: Kubectl, job: Job, pods: list[PodState], run_dir: Path) -> Launch:
    """Pod logs under k8s/JOB/; result files under hosts/NODE/results/TEST/: a test's results are the
    node's, whichever pod of whichever job ran there, so a node's runs of two tests meet (a DDP run's
    scaling against the same node's 1-GPU run) and a bad node is named as such."""
    launcher = "torchrun" if job.flavor == "torch" else "nccl_tests"
    launch = Launch(job.test, launcher, job.scope, job.timeout_s, gates_of=job.gates_of)
    where = nodes_of(pods)
    for pod in pods:
        container = CONTAINER[job.kind].get(pod.role, "")
        log = kubectl.run("logs", pod.name, "-c", container, check=False) if container else ""
        save_log(launch, job, pod, log, run_dir, where)
    launch.members = [where[p.name] for p in pods if p.role != "launcher"]
    return launch


def nodes_of(pods: list[PodState]) -> dict[str, str]:
    """Pod (by name and by hostname) -> the node it ran on (its own name while it was never scheduled)."""
    return {key: p.node or p.name for p in pods for key in (p.host or p.name, p.name)}


# A pod its controller deleted while it ran (a finished JobSet's sshd nodes, a failed Job's other pods) does
# not fail its node: the pod that failed stays and does.
DELETED = "Deleted"
POD_STATUS = {"Succeeded": "ok", "Failed": "failed", DELETED: "ok"}


def add_host_records(hosts: dict[str, HostRecord], job: Job, pods: list[PodState]) -> None:
    """results.json's hosts on k8s: one per node, with every pod that ran there (job, role, phase, reason);
    a node is failed once any of its pods failed."""
    for pod in pods:
        if pod.role == "launcher":
            continue  # mpirun's pod: no GPU, placed anywhere
        node = pod.node or pod.name
        record = hosts.setdefault(
            node, HostRecord(node, pod.node, "ok", facts={"k8s": {"node": pod.node, "pods": []}})
        )
        record.facts["k8s"]["pods"].append(
            {"pod": pod.name, "job": job.name, "kind": job.kind, "role": pod.role, "phase": pod.phase,
             "reason": pod.reason}
        )  # fmt: skip
        status = POD_STATUS.get(pod.phase, "unknown")
        if status != "ok" and record.status == "ok":
            record.status = status


def save_log(
    launch: Launch,
    job: Job,
    pod: PodState,
    log: str,
    run_dir: Path,
    where: dict[str, str] | None = None,
    echo: Callable[[str], None] = print,
) -> None:
    """The raw log, and for a result-bearing pod (torchrun pods, the mpirun launcher) its files laid out
    as roles/collect lays out a host's (under the node's name: `where`), so evaluate and report judge them
    the same way. A file printed as POD/NAME belongs to that pod's node (host-scope nccl-tests, which the
    launcher runs node by node). Whatever runs in the pod writes its log, so a marker naming anything but
    a plain file of one of the job's own pods is skipped, saying so through `echo`."""
    where = where or nodes_of([pod])
    raw = run_dir / "k8s" / job.name
    raw.mkdir(parents=True, exist_ok=True)
    (raw / f"{pod.name}.log").write_text(log)
    if pod.role not in RESULT_ROLES[job.flavor]:
        return
    own, files = split_log(log)
    by_host: dict[str, dict[str, str]] = {}
    per_node = job.flavor == "mpi" and job.scope == "host"
    for name, text in files.items():
        owner, _, rest = name.rpartition("/")
        if per_node and not owner:
            continue  # the launcher's own rc and time: its raw log keeps them
        owner = owner or pod.name
        if not (_ours(owner, job, where) and _plain_file_name(rest)):
            echo(
                f"  {job.test}: skipped {name!r} in {pod.name}'s log: not NAME or POD/NAME of the job's pods"
            )
            continue
        by_host.setdefault(where.get(owner, owner), {})[rest] = text
    if not per_node:
        by_host.setdefault(where.get(pod.name, pod.name), {}).setdefault("launcher.log", own)
    for host, host_files in by_host.items():
        out = run_dir / "hosts" / host / "results" / job.test
        if not _inside(out, run_dir):
            echo(f"  {job.test}: skipped {pod.name}'s files for {host!r}: their folder is outside {run_dir}")
            continue
        out.mkdir(parents=True, exist_ok=True)
        for name, text in host_files.items():
            if not _inside(out / name, run_dir):  # a link planted in the run dir
                echo(f"  {job.test}: skipped {out / name}: it leads outside {run_dir}")
                continue
            (out / name).write_text(text)
        launch.argv_by_host[host] = _argv(job)
        launch.ranks_by_host[host] = job.procs_per_worker if job.flavor == "torch" else 0


PLAIN_NAME = re.compile(r"[A-Za-z0-9._-]+")


def _ours(owner: str, job: Job, where: dict[str, str]) -> bool:
    """A pod of this job: one seen (by name or hostname), or one of the names its controller gives the job's
    node pods (JobSet deletes a finished job's node pods, sometimes before they are seen: the launcher still
    names them). Any other JOB-... name is no pod of the job: it would add a host no run had (issue 62)."""
    return _plain_file_name(owner) and (owner in where or owner in _node_pod_names(job))


def _node_pod_names(job: Job) -> set[str]:
    """The hostnames of the job's node pods: Trainer v2's JobSet JOB-node-0-K, the v1 kinds' JOB-worker-K,
    K below its worker count."""
    return {f"{job.name}-{group}-{k}" for group in ("node-0", "worker") for k in range(job.workers)}


def _plain_file_name(name: str) -> bool:
    return bool(PLAIN_NAME.fullmatch(name)) and name not in (".", "..")


def _inside(path: Path, run_dir: Path) -> bool:
    return path.resolve().is_relative_to(run_dir.resolve())


def _argv(job: Job) -> list[str]:
    """What evaluate reads of a launch's argv: nccl-tests' binary name (first word after mpirun's options)."""
    if job.flavor == "torch":
        return ["torchrun"]
    words = job.script.split()
    binary = next((w for w in words if w.endswith("_perf")), "nccl_tests")
    return [binary.rsplit("/", 1)[-1]]


def delete(kubectl: Kubectl, selector: str) -> str:
    """The jobs (their pods go with them: a TrainJob's JobSet, Jobs, hostfile and SSH Secret too) and the
    payload ConfigMap, by label. Idempotent. Only the job types the server has: kubectl refuses a whole
    delete that names a type it does not know (no MPI operator installed, or an install that failed), and
    teardown must still reach what comes after."""
    kinds = [*RESOURCE.values(), "configmaps"]
    try:
        kinds = [*job_api.served_job_types(kubectl), "configmaps"]
        out = kubectl.run("delete", ",".join(kinds), "-l", selector, "--ignore-not-found", "--wait=true",
                          timeout_s=300)  # fmt: skip
    except PavError as exc:
        how = f"kubectl delete {','.join(kinds)} -n {kubectl.namespace} -l {selector}"
        raise PavError(f"{exc}; delete them with: {how}") from None
    deleted = len([ln for ln in out.splitlines() if "deleted" in ln])
    return f"deleted {deleted} object(s) labelled {selector}"
