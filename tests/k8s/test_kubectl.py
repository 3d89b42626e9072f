"""The k8s path through the real kubectl (v1.32 on PATH) against the API-server double of tests/k8s/apiserver:
a real server's refusals (missing namespace, a type it does not serve) and the operators' env contract for
pods, with the pods' own scripts run for real (CPU, gloo)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import time
from pathlib import Path

import pytest

from pav import catalog, cli, paths
from pav.errors import PavError
from pav.evaluate import evaluate_launch
from pav.k8s import jobs, provision, render
from pav.k8s.kubectl import Kubectl
from pav.k8s_config import load_config
from pav.k8s_fabric import fabric_env
from pav.k8s_settings import K8sSettings
from pav.results import HostRecord
from pav.settings import load_settings
from pav.stages import k8s as stages
from pav.thresholds.profiles import load_profile
from pav.thresholds.scaling import split_gates
from tests.k8s.apiserver import ApiServer
from tests.k8s.conftest import FOLLOW_POLL_S, Namespace

# Slow: torchrun in pods (each double's pods in a network namespace of their own: tests/k8s/conftest.py).
pytestmark = pytest.mark.slow

INVENTORY = paths.INVENTORIES / "nebius-eu-k8s"
FILES = paths.ROOT / "roles" / "training_operator" / "files"
TRAINING_OPERATOR = FILES / "training-operator-v1.8.1" / "training-operator.yaml"
NAMESPACE = "apiVersion: v1\nkind: Namespace\nmetadata: {name: pav}\n"


def install_pytorchjob_crd(api: ApiServer) -> None:
    """The pinned training-operator manifest (PyTorchJob only) and the jobs' namespace (on a cluster of the
    test's own; the shared double of tests/k8s/conftest.py has the manifest applied)."""
    Kubectl(api.kubeconfig, "kubeflow").run("apply", "--server-side", "-f", str(TRAINING_OPERATOR))
    Kubectl(api.kubeconfig, "pav").run("apply", "--server-side", "-f", "-", stdin=NAMESPACE)


def cpu_job(test: str, workers: int, config: K8sSettings | None = None) -> render.Job:
    """A job as plan_jobs makes it for the env (config: its k8s settings), but running a CPU test's script
    (one process per pod)."""
    (planned,) = render.plan_jobs(
        catalog.select(["torch_nccl_allreduce"]),
        config or load_config(INVENTORY),
        fabric_env(load_settings(INVENTORY)),
        workers,
        "r1",
        lambda _: 120,
    )
    spec = catalog.CATALOG[test]
    return dataclasses.replace(
        planned,
        test=spec.name,
        name=render.job_name("r1", spec.name),
        labels=render.job_labels("r1", spec.name),
        procs_per_worker=1,
        script=render._torch_script(spec),
        scope=spec.scope,
    )


def test_a_two_node_pytorchjob_meets_at_the_master_the_operator_names(k8s: Namespace, tmp_path: Path) -> None:
    """Every pod gets only what training-operator v1.8.1 sets; torchrun on both pods must find each other.
    With Worker replicas alone (no Master) the operator sets no master address or node rank: both pods
    would be node 0 of their own rendezvous and the job would fail at its deadline."""
    kube = k8s.kube
    job = cpu_job("torch_gloo_collectives_multi", workers=2, config=k8s.config)
    for manifest in render.render([job], k8s.name, render.job_labels("r1", "payload")):
        jobs.submit(kube, manifest)
    lines: list[str] = []
    state, pods = jobs.follow(kube, job, echo=lines.append, poll_s=FOLLOW_POLL_S)
    run_dir = tmp_path / "run"
    launch = jobs.collect(kube, job, pods, run_dir)
    assert state == "Succeeded", k8s.logs()[-3000:]
    assert [(p.role, p.phase) for p in pods] == [("master", "Succeeded"), ("worker", "Succeeded")]
    master = f"{job.name}-master-0"
    assert lines[-1] == f"  {job.test}: Succeeded [master-0 Succeeded, worker-0 Succeeded]"
    env = {e["name"]: e["value"] for e in k8s.objects("pods")[1]["spec"]["containers"][0]["env"]}
    assert (env["PET_MASTER_ADDR"], env["PET_NODE_RANK"], env["PET_NNODES"]) == (master, "1", "2")
    measured, _ = split_gates(load_profile("cpu").get(job.test, []))
    (result,) = evaluate_launch(launch, run_dir, measured)
    assert result.status == "pass", result.reason
    rank0 = run_dir / "hosts" / "gpu-node-0" / "results" / job.test / f"{job.test}.rank0.json"
    assert json.loads(rank0.read_text())["world_size"] == 2
    hosts: dict[str, HostRecord] = {}
    jobs.add_host_records(hosts, job, pods)
    assert sorted(hosts) == ["gpu-node-0", "gpu-node-1"]  # one pod per node, results under the node
    assert launch.members == ["gpu-node-0", "gpu-node-1"]
    (master_pod,) = hosts["gpu-node-0"].facts["k8s"]["pods"]
    assert (master_pod["pod"], master_pod["role"], hosts["gpu-node-0"].status) == (master, "master", "ok")


def test_teardown_deletes_the_jobs_when_the_mpijob_type_is_not_installed(k8s: Namespace) -> None:
    """A cluster with the PyTorchJob CRD only (install_mpi false, or the MPI operator never installed): real
    kubectl refuses a delete that names mpijobs, and teardown must still remove what the run made. (The
    shared double serves TrainJob too: the delete names trainjobs and pytorchjobs, never mpijobs.)"""
    kube = k8s.kube
    job = cpu_job("torch_gloo_allreduce", workers=1, config=k8s.config)
    assert "mpijobs.kubeflow.org" not in kube.run("api-resources", "-o", "name").split()
    for manifest in render.render([job], k8s.name, render.job_labels("r1", "payload")):
        jobs.submit(kube, manifest)
    selector = f"pav-run-id={render.run_label('r1')}"
    assert jobs.delete(kube, selector) == f"deleted 2 object(s) labelled {selector}"
    assert k8s.objects("pytorchjobs") == [] and k8s.objects("configmaps") == []
    assert k8s.objects("pods") == []  # the job's pods went with it (ownerReferences)


def test_a_host_scope_test_measures_each_node_alone(k8s: Namespace, tmp_path: Path) -> None:
    """A host-scope test is one job whose pods each run torchrun --standalone, whatever the operator's PET_*
    say: one result per node, each a world of its own, as the hosts platform judges it."""
    kube = k8s.kube
    job = cpu_job("torch_gloo_allreduce", workers=2, config=k8s.config)
    for manifest in render.render([job], k8s.name, render.job_labels("r1", "payload")):
        jobs.submit(kube, manifest)
    state, pods = jobs.follow(kube, job, echo=lambda _: None, poll_s=FOLLOW_POLL_S)
    launch = jobs.collect(kube, job, pods, tmp_path / "run")
    assert state == "Succeeded", k8s.logs()[-3000:]
    measured, _ = split_gates(load_profile("cpu").get(job.test, []))
    results = evaluate_launch(launch, tmp_path / "run", measured)
    assert [(r.hosts, r.status) for r in results] == [(["gpu-node-0"], "pass"), (["gpu-node-1"], "pass")]
    for node in ("gpu-node-0", "gpu-node-1"):
        rank0 = tmp_path / "run" / "hosts" / node / "results" / job.test / f"{job.test}.rank0.json"
        assert json.loads(rank0.read_text())["world_size"] == 1


def test_a_watch_sends_each_change_made_after_it_began(api: ApiServer) -> None:
    """kubectl get --watch-only, as kubectl wait and rollout status watch: the double sends each write made
    after the watch began (ADDED, MODIFIED, DELETED), as a real server does, though its watches now wait on
    the store's writes (store.wait_change) instead of listing the store every 0.1 s."""
    namespace = next(r for r in api.store.resources() if r.kind == "Namespace")
    shown = 'jsonpath={.type} {.object.metadata.name} {.object.metadata.labels.pav}{"\\n"}'
    argv = ["kubectl", "--kubeconfig", str(api.kubeconfig), "get", "namespaces", "--watch-only",
            "--output-watch-events", "-o", shown]  # fmt: skip

    def put(labels: dict[str, str]) -> None:
        api.store.put(namespace, {"apiVersion": "v1", "kind": "Namespace",
                                  "metadata": {"name": "w", "labels": labels}})  # fmt: skip

    writes = [lambda: put({}), lambda: put({"pav": "x"}), lambda: api.store.delete(namespace, "", "w")]
    seen = []
    with subprocess.Popen(argv, env=api.env(), stdout=subprocess.PIPE, text=True) as watch:
        assert watch.stdout is not None
        while watch.poll() is None and not any("watch=true" in r for r in api.requests):
            time.sleep(0.05)  # until its list is done and its watch open: what comes after is the watch's
        for write in writes:
            write()
            seen.append(watch.stdout.readline().strip())  # a change never sent: "" when the watch ends (60 s)
        watch.kill()
    assert seen == ["ADDED w", "MODIFIED w x", "DELETED w"]


def test_a_failed_delete_never_skips_the_destroy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Teardown of a provisioned cluster whose API does not answer (a port nothing listens on): real kubectl
    fails the delete, and the destroy still runs before the error is raised. The destroy is recorded, not
    run: it would need the Nebius API."""
    monkeypatch.setenv("PAV_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("KUBECACHEDIR", str(tmp_path / "kube-cache"))  # not the user's ~/.kube/cache
    monkeypatch.delenv("KUBECONFIG", raising=False)
    # A teardown of the env's state, of no kept run: its record under --results-root (issue 48: a --run-dir
    # that does not exist names a kept run, and is refused).
    args = cli.build_parser().parse_args(["--env", "nebius-eu-k8s", "--stages", "teardown", "--results-root",
                                          str(tmp_path / "runs")])  # fmt: skip
    ctx = cli.make_context(args)
    dead = ApiServer(tmp_path / "dead")  # made, never started: its port is closed
    port = dead.http.server_address[1]
    dead.http.server_close()
    kubeconfig = provision.kubeconfig_path(ctx.env)
    kubeconfig.parent.mkdir(parents=True)
    kubeconfig.write_text(f"apiVersion: v1\nkind: Config\nclusters: [{{name: c, cluster: {{server: 'http://127.0.0.1:{port}'}}}}]\n"
                          "contexts: [{name: c, context: {cluster: c}}]\ncurrent-context: c\n")  # fmt: skip
    destroyed: list[str] = []
    monkeypatch.setattr(provision, "destroy", lambda env: destroyed.append(env.name) or ["cluster"])
    with pytest.raises(PavError, match="delete them with: kubectl delete") as failed:
        stages.teardown_stage(ctx)
    assert destroyed == ["nebius-eu-k8s"] and ctx.results.destroyed == ["cluster"]
    assert "destroyed 1 resource(s)" in str(failed.value)
