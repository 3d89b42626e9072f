"""Kubeflow Trainer v2 through the real kubectl (v1.32) against the API-server double of tests/k8s/apiserver:
the pinned Trainer and JobSet manifests applied as the role applies them, the tool's ClusterTrainingRuntimes
and TrainJobs as the driver renders them, the TrainJob -> JobSet -> Jobs -> Pods chain with the torch and MPI
plugins' environment, and the pods' scripts run for real (CPU, gloo). Which API a cluster gets:
pav.k8s.job_api against what the double serves."""

from __future__ import annotations

import dataclasses
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from pav import catalog, paths
from pav.errors import PavError
from pav.evaluate import evaluate_launch
from pav.k8s import job_api, jobs, render
from pav.k8s.config import load_config
from pav.k8s.fabric import fabric_env
from pav.k8s.kubectl import Kubectl
from pav.settings import load_settings
from pav.thresholds.profiles import load_profile
from pav.thresholds.scaling import split_gates
from tests.k8s.apiserver import ApiServer

# Slow: torchrun in pods; on the worker of the other tests whose pods listen on loopback (torchrun's 29500).
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("k8s-pods")]

INVENTORY = paths.INVENTORIES / "nebius-eu-k8s"
FILES = paths.ROOT / "roles" / "training_operator" / "files"
TRAINER = [FILES / "jobset-v0.12.0" / "jobset.yaml", FILES / "kubeflow-trainer-v2.3.0"]
V1 = FILES / "training-operator-v1.8.1" / "training-operator.yaml"
NAMESPACES = ("jobset-system", "kubeflow-system", "kubeflow", "pav")


@pytest.fixture
def api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ApiServer]:
    with ApiServer(tmp_path / "api") as server:
        monkeypatch.setenv("KUBECACHEDIR", str(tmp_path / "api" / "kube-cache"))
        kube = Kubectl(server.kubeconfig, "pav")
        for name in NAMESPACES:
            kube.run(
                "apply",
                "--server-side",
                "-f",
                "-",
                stdin=f"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {name}\n",
            )
        yield server


def install(api: ApiServer, *manifests: Path) -> None:
    """As the role applies them: each object into the namespace it names."""
    for manifest in manifests:
        argv = ["kubectl", "--kubeconfig", str(api.kubeconfig), "apply", "--server-side", "-f", str(manifest)]
        proc = subprocess.run(argv, env=api.env(), capture_output=True, text=True, timeout=300, check=False)
        assert proc.returncode == 0, proc.stderr[-2000:]


def trainjob(test: str, workers: int) -> render.Job:
    """A TrainJob as plan_jobs makes it for the env; a torch test runs a CPU test's script (a rank a pod)."""
    flavor = catalog.k8s_job_kind(catalog.CATALOG[test]) if catalog.CATALOG[test].needs_gpu else "torch"
    base = "torch_nccl_allreduce" if flavor == "torch" else test
    (planned,) = render.plan_jobs(catalog.select([base]), load_config(INVENTORY),
                                  fabric_env(load_settings(INVENTORY)), workers, "r1", lambda _: 120,
                                  api=job_api.TRAINER)  # fmt: skip
    if flavor == "mpi":
        return planned
    spec = catalog.CATALOG[test]
    return dataclasses.replace(planned, test=spec.name, name=render.job_name("r1", spec.name),
                               labels=render.job_labels("r1", spec.name), procs_per_worker=1,
                               script=render._torch_script(spec), scope=spec.scope)  # fmt: skip


def submit(api: ApiServer, job: render.Job) -> Kubectl:
    kube = Kubectl(api.kubeconfig, "pav")
    for manifest in render.render([job], "pav", render.job_labels("r1", "payload")):
        jobs.submit(kube, manifest)
    return kube


def env_of(pod: dict[str, object]) -> dict[str, object]:
    container = pod["spec"]["containers"][0]  # type: ignore[index]
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def test_a_two_node_trainjob_meets_at_the_rendezvous_the_torch_plugin_names(
    api: ApiServer, tmp_path: Path
) -> None:
    """Every pod gets only what Kubeflow Trainer's torch plugin and JobSet give it: PET_NODE_RANK from the
    Indexed Job's completion index, PET_MASTER_ADDR node 0's name under the JobSet's headless Service;
    torchrun on both pods must meet there and run the payload as one world of 2."""
    install(api, *TRAINER)
    job = trainjob("torch_gloo_collectives_multi", workers=2)
    kube = submit(api, job)
    lines: list[str] = []
    state, pods = jobs.follow(kube, job, echo=lines.append, poll_s=0.2)
    run_dir = tmp_path / "run"
    launch = jobs.collect(kube, job, pods, run_dir)
    assert state == "Succeeded", "\n".join(api.logs.values())[-3000:]
    assert [(p.role, p.phase, p.host) for p in pods] == [
        ("node", "Succeeded", f"{job.name}-node-0-0"),
        ("node", "Succeeded", f"{job.name}-node-0-1"),
    ]
    (trainjob_obj,) = api.objects("trainjobs")
    assert [c["type"] for c in trainjob_obj["status"]["conditions"]] == ["Complete"]
    (jobset,) = api.objects("jobsets")
    assert jobset["metadata"]["ownerReferences"][0]["kind"] == "TrainJob"
    assert [c["reason"] for c in jobset["status"]["conditions"]] == ["AllJobsCompleted"]
    (node_job,) = api.objects("jobs", "pav")
    assert (node_job["metadata"]["name"], node_job["spec"]["completions"]) == (f"{job.name}-node-0", 2)
    env = env_of(api.objects("pods", "pav")[1])
    assert env["PET_MASTER_ADDR"] == f"{job.name}-node-0-0.{job.name}"
    assert (env["PET_NNODES"], env["PET_NPROC_PER_NODE"], env["PET_MASTER_PORT"]) == ("2", "1", "29500")
    assert env["PET_NODE_RANK"] == {
        "fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}
    }
    assert env["NCCL_IB_HCA"] and env["PYTHONPATH"] == "/opt/pav"  # the TrainJob's env and the runtime's
    measured, _ = split_gates(load_profile("cpu").get(job.test, []))
    (result,) = evaluate_launch(launch, run_dir, measured)
    assert result.status == "pass", result.reason
    rank0 = run_dir / "hosts" / "gpu-node-0" / "results" / job.test / f"{job.test}.rank0.json"
    assert json.loads(rank0.read_text())["world_size"] == 2
    assert launch.members == ["gpu-node-0", "gpu-node-1"]


def test_a_host_scope_trainjob_measures_each_node_alone(api: ApiServer, tmp_path: Path) -> None:
    install(api, *TRAINER)
    job = trainjob("torch_gloo_allreduce", workers=2)
    kube = submit(api, job)
    state, pods = jobs.follow(kube, job, echo=lambda _: None, poll_s=0.2)
    launch = jobs.collect(kube, job, pods, tmp_path / "run")
    assert state == "Succeeded", "\n".join(api.logs.values())[-3000:]
    measured, _ = split_gates(load_profile("cpu").get(job.test, []))
    results = evaluate_launch(launch, tmp_path / "run", measured)
    assert [(r.hosts, r.status) for r in results] == [(["gpu-node-0"], "pass"), (["gpu-node-1"], "pass")]


def test_nccl_tests_go_through_the_mpi_runtime(api: ApiServer, tmp_path: Path) -> None:
    """The MPI plugin's hostfile and SSH key, the node pods (sshd: reported Running, never started here)
    before the launcher (dependsOn Ready), whose script runs for real: it reads the plugin's hostfile and
    runs mpirun node by node, each node's log and rc under the node its pod ran on. No node's sshd answers
    here, so every node's mpirun fails and the test fails, per node, as it must. The finished JobSet deletes
    the node Job
    (JobSet's jobSetFinished), so its sshd pods go."""
    install(api, *TRAINER)
    job = trainjob("nccl_tests_all_reduce", workers=2)
    kube = submit(api, job)
    state, pods = jobs.follow(kube, job, echo=lambda _: None, poll_s=0.2)
    launch = jobs.collect(kube, job, pods, tmp_path / "run")
    assert state == "Failed"
    assert [(p.role, p.host, p.phase) for p in pods] == [
        ("launcher", f"{job.name}-launcher-0-0", "Failed"),
        ("node", f"{job.name}-node-0-0", "Deleted"),  # seen Running, then gone with the finished JobSet
        ("node", f"{job.name}-node-0-1", "Deleted"),
    ]
    assert {o["metadata"]["name"] for o in api.objects("jobs", "pav")} == {f"{job.name}-launcher-0"}
    hostfile = next(
        o for o in api.objects("configmaps", "pav") if o["metadata"]["name"] == f"{job.name}-mpi-hostfile"
    )
    assert hostfile["data"]["hostfile"] == "".join(
        f"{job.name}-node-0-{i}.{job.name} slots=8\n" for i in (0, 1)
    )
    launcher = next(o for o in api.objects("pods", "pav") if "launcher" in o["metadata"]["name"])
    env = env_of(launcher)
    assert (
        env["OMPI_MCA_orte_default_hostfile"] == "/etc/mpi/hostfile"
        and env["OMPI_MCA_orte_set_default_slots"] == "8"
    )
    root = tmp_path / "api" / "pods" / "pav" / launcher["metadata"]["name"]
    assert sorted(p.name for p in (root / "root" / ".ssh").iterdir()) == [
        "authorized_keys",
        "id_rsa",
        "id_rsa.pub",
    ]
    measured, _ = split_gates(load_profile("cpu").get(job.test, []))
    results = evaluate_launch(launch, tmp_path / "run", measured)
    assert [(r.hosts, r.status) for r in results] == [(["gpu-node-0"], "fail"), (["gpu-node-1"], "fail")]
    for node in ("gpu-node-0", "gpu-node-1"):
        folder = tmp_path / "run" / "hosts" / node / "results" / job.test
        assert (folder / "launcher.rc").read_text().strip() != "0"


def test_a_trainjob_past_its_deadline_fails_and_its_pods_go(api: ApiServer) -> None:
    """activeDeadlineSeconds is the test's timeout: past it the Trainer fails the TrainJob (DeadlineExceeded)
    and deletes its JobSet, so the driver is not left waiting for pods that never end."""
    install(api, *TRAINER)
    job = dataclasses.replace(trainjob("torch_gloo_allreduce", workers=2), timeout_s=2, script="sleep 300")
    kube = submit(api, job)
    state, pods = jobs.follow(kube, job, echo=lambda _: None, poll_s=0.2)
    assert state == "Failed" and {p.phase for p in pods} == {"Deleted"}
    (failed,) = api.objects("trainjobs")[0]["status"]["conditions"]
    assert (failed["type"], failed["reason"]) == ("Failed", "DeadlineExceeded")
    assert api.objects("jobsets") == [] and api.objects("pods", "pav") == []


def test_deleting_the_run_removes_the_trainjob_and_all_it_made(api: ApiServer) -> None:
    """Teardown's delete names trainjobs (and the v1 kinds only where served); the garbage collector takes
    the JobSet, its Jobs and pods, and the MPI plugin's Secret and hostfile with the TrainJob."""
    install(api, *TRAINER)
    job = trainjob("nccl_tests_all_reduce", workers=2)
    kube = submit(api, job)
    jobs.follow(kube, job, echo=lambda _: None, poll_s=0.2)
    selector = f"pav-run-id={render.run_label('r1')}"
    assert jobs.delete(kube, selector) == f"deleted 1 object(s) labelled {selector}"
    for plural in ("trainjobs", "jobsets", "jobs", "pods", "secrets"):
        assert api.objects(plural, "pav") == [], plural
    assert [o["metadata"]["name"] for o in api.objects("configmaps", "pav")] == []
    assert len(api.objects("clustertrainingruntimes")) == 1  # the runtime stays: other runs may use it


@pytest.mark.parametrize(
    ("manifests", "setting", "chosen"),
    [
        ((), "auto", job_api.TRAINER),  # a fresh cluster: the run installs Kubeflow Trainer v2
        ((), "v1", job_api.V1),
        (("v1",), "auto", job_api.V1),  # only the v1 kinds: they run as today
        (("v1", "trainer"), "auto", job_api.TRAINER),
        (("v1", "trainer"), "v1", job_api.V1),
        (("trainer",), "auto", job_api.TRAINER),
    ],
)
def test_which_api_a_cluster_gets(
    api: ApiServer, manifests: tuple[str, ...], setting: str, chosen: str
) -> None:
    install(api, *[m for name in manifests for m in (TRAINER if name == "trainer" else [V1])])
    served = job_api.served(Kubectl(api.kubeconfig, "pav"))
    assert (served.trainer, served.v1) == ("trainer" in manifests, "v1" in manifests)
    assert job_api.choose(setting, served) == chosen


def test_trainer_asked_of_a_cluster_without_it_names_the_fix(api: ApiServer) -> None:
    install(api, V1)
    served = job_api.served(Kubectl(api.kubeconfig, "pav"))
    with pytest.raises(PavError) as exc:
        job_api.require_served(job_api.TRAINER, served)
    assert str(exc.value) == (
        "the cluster serves no trainjobs.trainer.kubeflow.org (Kubeflow Trainer v2): run the configure stage "
        "to install it, or set k8s_job_api: v1 (or auto) to use the PyTorchJob/MPIJob operators it has"
    )
