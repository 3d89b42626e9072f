"""Kubeflow Trainer v2 through the real kubectl (v1.32) against the API-server double of tests/k8s/apiserver:
the pinned Trainer and JobSet manifests applied as the role applies them, the tool's ClusterTrainingRuntimes
and TrainJobs as the driver renders them, the TrainJob -> JobSet -> Jobs -> Pods chain with the torch and MPI
plugins' environment, and the pods' scripts run for real (CPU, gloo), each test in a namespace of its own
on the shared double (tests/k8s/conftest.py). Which API a cluster gets: pav.k8s.job_api and the configure
stage's choice (pav.stages.k8s.choose_api) against what a double of the test's own serves."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from pav import catalog
from pav.errors import PavError
from pav.evaluate import evaluate_launch
from pav.k8s import job_api, jobs, render
from pav.k8s.kubectl import Kubectl
from pav.k8s_fabric import fabric_env
from pav.settings import load_settings
from pav.stages import k8s as stages
from pav.thresholds.profiles import load_profile
from pav.thresholds.scaling import split_gates
from tests.driver.contexts import context
from tests.k8s.apiserver import ApiServer
from tests.k8s.conftest import (
    FOLLOW_POLL_S,
    INVENTORY,
    OPERATOR_NAMESPACES,
    TRAINER,
    V1_OPERATOR,
    Namespace,
    apply,
    namespace_yaml,
)

# Slow: torchrun in pods (each double's pods in a network namespace of their own: tests/k8s/conftest.py).
pytestmark = pytest.mark.slow


def install(api: ApiServer, *manifests: Path) -> None:
    """On a cluster of the test's own, as the role applies them: each object into the namespace it names."""
    apply(api, "-", stdin=namespace_yaml(*OPERATOR_NAMESPACES))
    if manifests:
        apply(api, *manifests)


def trainjob(k8s: Namespace, test: str, workers: int) -> render.Job:
    """A TrainJob as plan_jobs makes it for the env in the test's namespace; a torch test runs a CPU test's
    script (a rank a pod)."""
    flavor = catalog.k8s_job_kind(catalog.CATALOG[test]) if catalog.CATALOG[test].needs_gpu else "torch"
    base = "torch_nccl_allreduce" if flavor == "torch" else test
    (planned,) = render.plan_jobs(catalog.select([base]), k8s.config,
                                  fabric_env(load_settings(INVENTORY)), workers, "r1", lambda _: 120,
                                  api=job_api.TRAINER)  # fmt: skip
    if flavor == "mpi":
        return planned
    spec = catalog.CATALOG[test]
    return dataclasses.replace(planned, test=spec.name, name=render.job_name("r1", spec.name),
                               labels=render.job_labels("r1", spec.name), procs_per_worker=1,
                               script=render._torch_script(spec), scope=spec.scope)  # fmt: skip


def submit(k8s: Namespace, job: render.Job) -> Kubectl:
    kube = k8s.kube
    for manifest in render.render([job], k8s.name, render.job_labels("r1", "payload")):
        jobs.submit(kube, manifest)
    return kube


def env_of(pod: dict[str, object]) -> dict[str, object]:
    container = pod["spec"]["containers"][0]  # type: ignore[index]
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def test_a_two_node_trainjob_meets_at_the_rendezvous_the_torch_plugin_names(
    k8s: Namespace, tmp_path: Path
) -> None:
    """Every pod gets only what Kubeflow Trainer's torch plugin and JobSet give it: PET_NODE_RANK from the
    Indexed Job's completion index, PET_MASTER_ADDR node 0's name under the JobSet's headless Service;
    torchrun on both pods must meet there and run the payload as one world of 2."""
    job = trainjob(k8s, "torch_gloo_collectives_multi", workers=2)
    kube = submit(k8s, job)
    lines: list[str] = []
    state, pods = jobs.follow(kube, job, echo=lines.append, poll_s=FOLLOW_POLL_S)
    run_dir = tmp_path / "run"
    launch = jobs.collect(kube, job, pods, run_dir)
    assert state == "Succeeded", k8s.logs()[-3000:]
    assert [(p.role, p.phase, p.host) for p in pods] == [
        ("node", "Succeeded", f"{job.name}-node-0-0"),
        ("node", "Succeeded", f"{job.name}-node-0-1"),
    ]
    (trainjob_obj,) = k8s.objects("trainjobs")
    assert [c["type"] for c in trainjob_obj["status"]["conditions"]] == ["Complete"]
    (jobset,) = k8s.objects("jobsets")
    assert jobset["metadata"]["ownerReferences"][0]["kind"] == "TrainJob"
    assert [c["reason"] for c in jobset["status"]["conditions"]] == ["AllJobsCompleted"]
    (node_job,) = k8s.objects("jobs")
    assert (node_job["metadata"]["name"], node_job["spec"]["completions"]) == (f"{job.name}-node-0", 2)
    env = env_of(k8s.objects("pods")[1])
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


def test_a_host_scope_trainjob_measures_each_node_alone(k8s: Namespace, tmp_path: Path) -> None:
    job = trainjob(k8s, "torch_gloo_allreduce", workers=2)
    kube = submit(k8s, job)
    state, pods = jobs.follow(kube, job, echo=lambda _: None, poll_s=FOLLOW_POLL_S)
    launch = jobs.collect(kube, job, pods, tmp_path / "run")
    assert state == "Succeeded", k8s.logs()[-3000:]
    measured, _ = split_gates(load_profile("cpu").get(job.test, []))
    results = evaluate_launch(launch, tmp_path / "run", measured)
    assert [(r.hosts, r.status) for r in results] == [(["gpu-node-0"], "pass"), (["gpu-node-1"], "pass")]
    for node in ("gpu-node-0", "gpu-node-1"):  # each a world of its own, whatever the torch plugin's PET_*
        rank0 = tmp_path / "run" / "hosts" / node / "results" / job.test / f"{job.test}.rank0.json"
        assert json.loads(rank0.read_text())["world_size"] == 1


def test_nccl_tests_go_through_the_mpi_runtime_and_deleting_the_run_removes_all_it_made(
    k8s: Namespace, tmp_path: Path
) -> None:
    """The MPI plugin's hostfile and SSH key, the node pods (sshd: reported Running, never started here)
    before the launcher (dependsOn Ready), whose script runs for real: it reads the plugin's hostfile and
    runs mpirun node by node, each node's log and rc under the node its pod ran on. No node's sshd answers
    here, so every node's mpirun fails and the test fails, per node, as it must. The finished JobSet deletes
    the node Job (JobSet's jobSetFinished), so its sshd pods go.
    Then teardown's delete, which names trainjobs (and the v1 kinds only where served: the shared double
    serves pytorchjobs, not mpijobs): the garbage collector takes the JobSet, its Jobs and pods, and the MPI
    plugin's Secret and hostfile with the TrainJob; the ClusterTrainingRuntime stays."""
    runtimes = {o["metadata"]["name"] for o in k8s.api.objects("clustertrainingruntimes")}
    job = trainjob(k8s, "nccl_tests_all_reduce", workers=2)
    kube = submit(k8s, job)
    # 0.2 s, not FOLLOW_POLL_S: the node pods must be seen Running before the finished JobSet deletes
    # them, and the launcher's mpirun may fail within a second.
    state, pods = jobs.follow(kube, job, echo=lambda _: None, poll_s=0.2)
    launch = jobs.collect(kube, job, pods, tmp_path / "run")
    assert state == "Failed"
    assert [(p.role, p.host, p.phase) for p in pods] == [
        ("launcher", f"{job.name}-launcher-0-0", "Failed"),
        ("node", f"{job.name}-node-0-0", "Deleted"),  # seen Running, then gone with the finished JobSet
        ("node", f"{job.name}-node-0-1", "Deleted"),
    ]
    assert {o["metadata"]["name"] for o in k8s.objects("jobs")} == {f"{job.name}-launcher-0"}
    hostfile = next(
        o for o in k8s.objects("configmaps") if o["metadata"]["name"] == f"{job.name}-mpi-hostfile"
    )
    assert hostfile["data"]["hostfile"] == "".join(
        f"{job.name}-node-0-{i}.{job.name} slots=8\n" for i in (0, 1)
    )
    launcher = next(o for o in k8s.objects("pods") if "launcher" in o["metadata"]["name"])
    env = env_of(launcher)
    assert (
        env["OMPI_MCA_orte_default_hostfile"] == "/etc/mpi/hostfile"
        and env["OMPI_MCA_orte_set_default_slots"] == "8"
    )
    root = k8s.pods / launcher["metadata"]["name"]
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

    selector = f"pav-run-id={render.run_label('r1')}"
    assert jobs.delete(kube, selector) == f"deleted 1 object(s) labelled {selector}"
    for plural in ("trainjobs", "jobsets", "jobs", "pods", "secrets"):
        assert k8s.objects(plural) == [], plural
    assert [o["metadata"]["name"] for o in k8s.objects("configmaps")] == []
    # the runtime stays: other runs may use it
    assert {o["metadata"]["name"] for o in k8s.api.objects("clustertrainingruntimes")} == runtimes | {
        job.runtime
    }


def test_a_trainjob_past_its_deadline_fails_and_its_pods_go(k8s: Namespace) -> None:
    """activeDeadlineSeconds is the test's timeout: past it the Trainer fails the TrainJob (DeadlineExceeded)
    and deletes its JobSet, so the driver is not left waiting for pods that never end."""
    job = dataclasses.replace(
        trainjob(k8s, "torch_gloo_allreduce", workers=2), timeout_s=2, script="sleep 300"
    )
    kube = submit(k8s, job)
    state, pods = jobs.follow(kube, job, echo=lambda _: None, poll_s=FOLLOW_POLL_S)
    assert state == "Failed" and {p.phase for p in pods} == {"Deleted"}
    (failed,) = k8s.objects("trainjobs")[0]["status"]["conditions"]
    assert (failed["type"], failed["reason"]) == ("Failed", "DeadlineExceeded")
    assert k8s.objects("jobsets") == [] and k8s.objects("pods") == []


@pytest.mark.parametrize(
    ("manifests", "setting", "chosen", "served_words"),
    [
        ((), "auto", job_api.TRAINER, "neither"),  # a fresh cluster: the run installs Kubeflow Trainer v2
        ((), "v1", job_api.V1, "neither"),
        (("v1",), "auto", job_api.V1, "v1"),  # only the v1 kinds: they run as today
        (("v1", "trainer"), "auto", job_api.TRAINER, "trainer, v1"),
        (("v1", "trainer"), "v1", job_api.V1, "trainer, v1"),
        (("trainer",), "auto", job_api.TRAINER, "trainer"),
    ],
)
def test_which_api_a_cluster_gets(
    api: ApiServer, manifests: tuple[str, ...], setting: str, chosen: str, served_words: str
) -> None:
    """pav.k8s.job_api's decision, and the configure stage's record of it in results.json (k8s) as a run
    against this cluster makes it (stages.choose_api through the real kubectl)."""
    install(api, *[m for name in manifests for m in (TRAINER if name == "trainer" else [V1_OPERATOR])])
    kube = Kubectl(api.kubeconfig, "pav")
    served = job_api.served(kube)
    assert (served.trainer, served.v1) == ("trainer" in manifests, "v1" in manifests)
    assert job_api.choose(setting, served) == chosen
    ctx = context(0, platform="k8s", tests=["torch_nccl_allreduce"])
    ctx.settings = dataclasses.replace(
        ctx.settings, k8s=dataclasses.replace(ctx.settings.k8s, job_api=setting)
    )
    assert stages.choose_api(ctx, kube) == chosen
    assert ctx.results.k8s == {
        "job_api": chosen,
        "api": job_api.DESCRIBED[chosen],
        "chosen_by": f"k8s_job_api: {setting}; the cluster served: {served_words}",
    }


def test_trainer_asked_of_a_cluster_without_it_names_the_fix(api: ApiServer) -> None:
    install(api, V1_OPERATOR)
    served = job_api.served(Kubectl(api.kubeconfig, "pav"))
    with pytest.raises(PavError) as exc:
        job_api.require_served(job_api.TRAINER, served)
    assert str(exc.value) == (
        "the cluster serves no trainjobs.trainer.kubeflow.org (Kubeflow Trainer v2): run the configure stage "
        "to install it, or set k8s_job_api: v1 (or auto) to use the PyTorchJob/MPIJob operators it has"
    )
