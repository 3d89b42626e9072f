"""Render the manifests: payload ConfigMap, and a job per test: under Kubeflow Trainer v2 a TrainJob on the
tool's own ClusterTrainingRuntimes (rendered here too), under the v1 operators a PyTorchJob per torch test
and an MPIJob per nccl-tests test."""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import jinja2
import yaml

from pav import catalog, paths
from pav.catalog import TestSpec
from pav.errors import PavError
from pav.k8s import job_api
from pav.k8s_policy import check_manifest
from pav.k8s_settings import TEMPLATES, K8sSettings

PAYLOAD_CONFIGMAP = "pav-payload"
RESULTS = "/tmp/pav-results"
# Every file the pod leaves in RESULTS is printed to its log between these lines; collect writes it back.
FILE_MARK, END_MARK = "=== pav-file ", "=== pav-end"


@dataclass
class Job:
    """One test as a job: the values the templates see."""

    test: str
    kind: str  # TrainJob, PyTorchJob, MPIJob
    name: str
    namespace: str
    labels: dict[str, str]
    image: str
    workers: int
    gpus_per_worker: int
    procs_per_worker: int  # torchrun processes (ranks) per pod: the test's own count, else one per GPU
    cpu: int
    memory_request: str
    memory_limit: str
    env: dict[str, str]
    script: str
    timeout_s: int
    privileged: bool
    rdma_resource: str
    shm_size: str
    node_selector: dict[str, str] = field(default_factory=dict)
    ttl_seconds_after_finished: int = 600
    clean_pod_policy: str = "None"
    payload_configmap: str = PAYLOAD_CONFIGMAP
    worker_script: str = ""  # MPIJob workers: ready sshd and run it
    # host: every pod tests its own node alone (results per node); cluster: one world across every node
    scope: str = "cluster"
    gates_of: str = ""  # the catalog's: judge by another test's gates
    # --recheck: the nodes the job may run on (a required node affinity on their names) and the taints it
    # tolerates there (the tool's own and a cordon's); empty on any other run.
    node_names: list[str] = field(default_factory=list)
    tolerations: list[dict[str, str]] = field(default_factory=list)
    flavor: str = "torch"  # torch (torchrun) or mpi (nccl-tests through mpirun): catalog.k8s_job_kind
    runtime: str = ""  # TrainJob: the ClusterTrainingRuntime it references


@dataclass
class Manifest:
    name: str  # file name in the run dir
    kind: str
    text: str
    test: str = ""

    @property
    def body(self) -> dict[str, Any]:
        return yaml.safe_load(self.text)


def job_name(run_id: str, test: str) -> str:
    """A DNS-1035 label unique to the run: jobs of two runs in one namespace never collide."""
    stamp = re.sub(r"[^a-z0-9]", "", run_id.lower())[:15]
    name = f"pav-{test.replace('_', '-')}-{stamp}"
    return name[:52].rstrip("-")  # the operators add suffixes (-worker-NN, -launcher) to a 63-char limit


def run_label(run_id: str) -> str:
    """The run id as a label value (63 characters of [A-Za-z0-9._-])."""
    return re.sub(r"[^A-Za-z0-9._-]", "", run_id)[:63].strip("._-")


def job_labels(run_id: str, test: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/managed-by": "provision-and-validate",
        "pav-test": test,
        "pav-run-id": run_label(run_id),
    }


def plan_jobs(
    specs: Sequence[TestSpec],
    config: K8sSettings,
    env: dict[str, str],
    workers: int,
    run_id: str,
    timeout_for: Callable[[str], int],
    api: str = job_api.V1,
) -> list[Job]:
    """specs: the run's tests (RunInputs.tests); timeout_for: a test's seconds (RunInputs.timeouts:
    --test-timeout, else pav_test_timeouts_s over pav_test_timeout_s); api: job_api.TRAINER or V1."""
    shape = config.node_shape()
    _require_rdma_devices(config, env)
    jobs = []
    for spec in specs:
        flavor = catalog.k8s_job_kind(spec)
        kind = job_api.kind(api, flavor)
        image = config.pytorch_image if flavor == "torch" else config.nccl_tests_image
        if flavor == "torch":
            script = _torch_script(spec)
        else:
            script = _mpi_script(spec, config, {**env, **spec.env}, workers, shape.gpus)
        jobs.append(
            Job(
                test=spec.name,
                kind=kind,
                name=job_name(run_id, spec.name),
                namespace=config.namespace,
                labels=job_labels(run_id, spec.name),
                image=image,
                workers=workers,
                gpus_per_worker=shape.gpus,
                procs_per_worker=min(spec.procs or shape.gpus, shape.gpus),
                cpu=shape.cpu,
                memory_request=shape.memory_request,
                memory_limit=shape.memory_limit,
                env={**env, **spec.env},
                script=script,
                timeout_s=timeout_for(spec.name),
                privileged=config.privileged,
                rdma_resource=config.rdma_resource,
                shm_size=config.shm_size,
                node_selector={k: str(v) for k, v in config.node_selector.items()},
                ttl_seconds_after_finished=config.ttl_seconds_after_finished,
                clean_pod_policy=config.clean_pod_policy,
                worker_script=SSHD_SCRIPT if flavor == "mpi" else "",
                scope=spec.scope,
                gates_of=spec.gates_of,
                flavor=flavor,
            )
        )
    return jobs


def _require_rdma_devices(config: K8sSettings, env: dict[str, str]) -> None:
    """An RDMA fabric with pods that cannot open /dev/infiniband: NCCL would quietly fall back to TCP sockets
    and the bandwidth gates would blame the fabric."""
    if env.get("NCCL_IB_DISABLE") == "0" and not config.privileged and not config.rdma_resource:
        raise PavError(
            "the fabric is RDMA (nccl_env_fabric) but the pods would get no /dev/infiniband: set "
            "k8s_privileged: true, or k8s_rdma_resource to your RDMA device plugin's resource "
            "(e.g. rdma/rdma_shared_device_a)"
        )


def _wrap(command: str, spec: TestSpec) -> str:
    """Run the command, record rc and times like roles/run_tests does, print the result files to the log."""
    return "\n".join(
        [
            f'out={RESULTS}; mkdir -p "$out"',
            "echo \"pav: memlock=$(ulimit -l) shm=$(df -k /dev/shm | awk 'NR==2{print $2}')k\"",
            "start=$(date +%s.%N)",
            command,
            "rc=$?",
            'echo "$rc" > "$out/launcher.rc"; echo "$start $(date +%s.%N)" > "$out/launcher.time"',
            # POD/NAME: a file of another pod's node (nccl-tests run per node from the launcher)
            f'for f in $(cd "$out" && find . -type f | sort); do echo "{FILE_MARK}${{f#./}}"; cat "$out/$f"; '
            f'echo; echo "{END_MARK}"',
            "done",
            'exit "$rc"',
        ]
    )


def _torch_script(spec: TestSpec) -> str:
    # torchrun takes --nnodes, --node_rank, --master_addr, ... from the PET_* variables the operator sets. A
    # host-scope test measures each node alone: every pod its own standalone world, whatever those say.
    alone = ["--standalone", "--nnodes", "1", "--node-rank", "0"] if spec.scope == "host" else []
    argv = ["torchrun", *alone, "-m", "pav_payload", *spec.args, "--out", '"$out"', "--test-id", spec.name]
    return _wrap(" ".join(a if a == '"$out"' else shlex.quote(a) for a in argv), spec)


# mpi-operator v2 starts workers as `sshd -De` and mpirun reaches them over SSH with the operator's key
# (the job's Secret: id_rsa, id_rsa.pub and authorized_keys at /root/.ssh). Images rarely ship ready for
# that: no /run/sshd, and sshd's StrictModes refuses the Secret's file modes. The job's own key is also
# each worker's host key, so the launcher checks host keys against it (pinned) instead of turning checking
# off as the operator's base image does. A session started over SSH gets a bare PATH and LD_LIBRARY_PATH,
# so /etc/environment (read by pam_env) carries the image's.
SSH_DIR = "/root/.ssh"
SSHD_SCRIPT = "\n".join(
    [
        "set -e",
        "mkdir -p /run/sshd",
        'printf "PATH=%s\\nLD_LIBRARY_PATH=%s\\n" "$PATH" "${LD_LIBRARY_PATH:-}" >> /etc/environment',
        "exec /usr/sbin/sshd -De -o StrictModes=no -o PermitRootLogin=prohibit-password "
        f"-o HostKey={SSH_DIR}/id_rsa",
    ]
)
KNOWN_HOSTS = "/tmp/pav-known-hosts"
# The launcher's ssh: the operator's ConnectionAttempts, and the workers' host key pinned to the job's key.
RSH_ARGS = f"-o ConnectionAttempts=10 -o StrictHostKeyChecking=yes -o UserKnownHostsFile={KNOWN_HOSTS}"
PIN_HOST_KEY = f'echo "* $(cat {SSH_DIR}/id_rsa.pub)" > {KNOWN_HOSTS}'


def _mpi_script(spec: TestSpec, config: K8sSettings, env: dict[str, str], workers: int, gpus: int) -> str:
    binary = f"{config.nccl_tests_dir.rstrip('/')}/{spec.args[0]}"
    # PATH and LD_LIBRARY_PATH: the ranks on the workers find the image's CUDA, NCCL and MPI libraries.
    exports = " ".join(f"-x {name}" for name in ["PATH", "LD_LIBRARY_PATH", *sorted(env)])
    # mpirun by its absolute path: OpenMPI then starts orted on the workers from the same prefix.
    mpirun = ['"$(command -v mpirun)"', "--allow-run-as-root", "-bind-to", "none"]
    mpirun += ["--mca", "plm_rsh_args", shlex.quote(RSH_ARGS)]
    test = " ".join([exports, shlex.quote(binary), *map(shlex.quote, spec.args[1:]), "-g", "1"])
    if spec.scope == "cluster":
        command = " ".join([*mpirun, "-np", str(workers * gpus), test])
        return _wrap(
            f'{PIN_HOST_KEY}\n{command} 2>&1 | tee "$out/launcher.log"; test "${{PIPESTATUS[0]}}" -eq 0', spec
        )
    # Host scope: each node alone, one after the other, its log and rc under the worker pod's name.
    one = " ".join([*mpirun, "-np", str(gpus), "-H", f'"$host:{gpus}"', test])
    loop = [
        PIN_HOST_KEY,
        "status=0",
        "while read -r host _; do",
        '  pod=${host%%.*}; mkdir -p "$out/$pod"; t0=$(date +%s.%N)',
        f'  {one} < /dev/null > "$out/$pod/launcher.log" 2>&1; r=$?',
        '  echo "$r" > "$out/$pod/launcher.rc"; echo "$t0 $(date +%s.%N)" > "$out/$pod/launcher.time"',
        '  [ "$r" -eq 0 ] || status=$r',
        "done < /etc/mpi/hostfile",
        'test "$status" -eq 0',
    ]
    return _wrap("\n".join(loop), spec)


def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,  # YAML, not HTML: values go through tojson
    )


PAYLOAD_PACKAGE = paths.PAYLOAD / "pav_payload"


def payload_modules() -> dict[str, Path]:
    """pav_payload's modules by ConfigMap key. A key cannot hold "/", so a subpackage's module is
    "gpu_facts__nvml.py"; the pod's volume items map each key back to its path in the mounted folder."""
    return {
        "__".join(p.relative_to(PAYLOAD_PACKAGE).parts): p.relative_to(PAYLOAD_PACKAGE)
        for p in sorted(PAYLOAD_PACKAGE.rglob("*.py"))
    }


JOB_TEMPLATES = {
    "PyTorchJob": "pytorchjob.yaml.j2",
    "MPIJob": "mpijob-nccl-tests.yaml.j2",
    "TrainJob": "trainjob.yaml.j2",
}
RUNTIME_TEMPLATES = {"torch": "runtime-torch.yaml.j2", "mpi": "runtime-mpi-nccl-tests.yaml.j2"}


def render(jobs: list[Job], namespace: str, labels: dict[str, str] | None = None) -> list[Manifest]:
    env = _environment()
    manifests: list[Manifest] = []
    modules = payload_modules()  # once: the ConfigMap's keys and every torch pod's volume items
    items = [{"key": key, "path": path.as_posix()} for key, path in modules.items()]
    if any(j.flavor == "torch" for j in jobs):
        files = {key: (PAYLOAD_PACKAGE / path).read_text() for key, path in modules.items()}
        text = env.get_template("payload-configmap.yaml.j2").render(
            name=PAYLOAD_CONFIGMAP, namespace=namespace, labels=labels or {}, files=files
        )
        manifests.append(Manifest("00-payload-configmap.yaml", "ConfigMap", text))
    manifests += _runtimes(env, jobs, items)
    for i, job in enumerate(jobs, start=1):
        text = env.get_template(JOB_TEMPLATES[job.kind]).render(job=asdict(job), payload_items=items)
        manifest = Manifest(f"{i:02d}-{job.kind.lower()}-{job.test}.yaml", job.kind, text, job.test)
        check_manifest(manifest.body, manifest.name)
        manifests.append(manifest)
    return manifests


def _runtimes(env: jinja2.Environment, jobs: list[Job], items: list[dict[str, str]]) -> list[Manifest]:
    """The tool's own ClusterTrainingRuntimes, one per flavor the TrainJobs use: the pod template the v1
    templates carry (GPUs, /dev/shm, memlock, RDMA, the GPU taint's toleration, placement), from the same
    macros. Named for their content: runs with other settings get runtimes of their own, and the same
    settings apply the same object again (no change). Each job is pointed at its flavor's runtime."""
    manifests = []
    for flavor, template in RUNTIME_TEMPLATES.items():
        groups = _by_placement([j for j in jobs if j.kind == "TrainJob" and j.flavor == flavor])
        for n, members in enumerate(groups):
            suffix = f"-{n + 1}" if len(groups) > 1 else ""
            manifests.append(_runtime(env, template, flavor, members, items, suffix))
    return manifests


def _by_placement(jobs: list[Job]) -> list[list[Job]]:
    """Jobs that may share a runtime: the pods' placement lives in the runtime, and a --recheck pins each
    test to the nodes that failed it (Job.node_names, Job.tolerations)."""
    groups: dict[str, list[Job]] = {}
    for job in jobs:
        key = json.dumps([job.node_names, job.tolerations], sort_keys=True)
        groups.setdefault(key, []).append(job)
    return list(groups.values())


def _runtime(
    env: jinja2.Environment,
    template: str,
    flavor: str,
    members: list[Job],
    items: list[dict[str, str]],
    suffix: str,
) -> Manifest:
    # The environment every job of the flavor shares goes into the runtime; each TrainJob adds its own.
    shared = dict(set.intersection(*(set(j.env.items()) for j in members)))
    values = {**asdict(members[0]), "env": shared, "name": "", "labels": {}}
    unnamed = env.get_template(template).render(job=values, payload_items=items)
    name = f"pav-{flavor}-{hashlib.sha256(unnamed.encode()).hexdigest()[:10]}"
    text = env.get_template(template).render(job={**values, "name": name}, payload_items=items)
    for job in members:
        job.runtime = name
    manifest = Manifest(f"00-clustertrainingruntime-{flavor}{suffix}.yaml", "ClusterTrainingRuntime", text)
    check_manifest(manifest.body, manifest.name)
    return manifest


def write(manifests: list[Manifest], folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for m in manifests:
        path = folder / m.name
        path.write_text(m.text)
        written.append(path)
    return written
