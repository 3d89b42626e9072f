"""A whole k8s run through the CLI, the real kubectl and real ansible-playbook, against the API-server double
of tests/k8s/apiserver. On a fresh cluster the one pipeline installs Kubeflow Trainer v2 and JobSet, runs a
2-node torch TrainJob whose pods run for real on this machine (CPU: the NCCL test errors, as it must without
CUDA) and nccl-tests through the MPI runtime, reports, deletes the run's jobs and scrubs secrets from the run
dir as on hosts. On a cluster that serves only the v1 kinds the same run goes as PyTorchJob, as before.
Each on a cluster of its own (tests/k8s/conftest.py's `api`): what it installs is asserted cluster-wide.
Which API a cluster with both gets, and what results.json records of that choice, is proven without a
whole run (tests/k8s/test_trainjob.py::test_which_api_a_cluster_gets)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli
from tests.k8s.apiserver import ApiServer
from tests.k8s.conftest import V1_OPERATOR

# Slow: the whole pipeline, torchrun in two pods (each double's pods in a network namespace of their own).
pytestmark = pytest.mark.slow

SECRET = "t0ken-value-the-run-must-not-keep"
# One GPU a node (a real Nebius preset): one rank a pod. Each rank imports torch (~1.5 CPU-s) to find
# no CUDA; what is proven here is the pipeline, not the ranks a node holds (test_manifests checks those).
# The preset has 16 vCPUs: fewer are kept back for the node than the default 20.
SETTINGS = """\
pav_platform: k8s
pav_hosts: 2
k8s_node_preset: 1gpu-16vcpu-200gb
k8s_cpu_reserved: 4
pav_tests: [torch_nccl_allreduce_multi, nccl_tests_all_reduce]
pav_test_timeout_s: 300
nccl_env_fabric: socket
"""


def run_k8s(tmp_path: Path, api: ApiServer, settings: str, *flags: str) -> tuple[dict[str, Any], Path]:
    inventory = tmp_path / "inventory"
    (inventory / "group_vars").mkdir(parents=True)
    (inventory / "hosts.yml").write_text("all:\n  hosts: {}\n")
    (inventory / "group_vars" / "all.yml").write_text(settings)
    run_dir = tmp_path / "run"
    env = {**api.env(), "KUBECONFIG": str(api.kubeconfig), "NEBIUS_IAM_TOKEN": SECRET}
    run = run_cli("--inventory", str(inventory / "hosts.yml"), "--run-dir", str(run_dir), *flags, env=env)
    assert run.rc == 1, run.stdout[-3000:] + run.stderr[-3000:]  # FAIL: a verdict, not a broken run
    results = json.loads((run_dir / "results.json").read_text())
    stages = {s["name"]: s["status"] for s in results["stages"]}
    every = ("provision", "configure", "validate", "collect", "report", "teardown")
    assert stages == dict.fromkeys(every, "ok")
    kept = [p for p in run_dir.rglob("*") if p.is_file() and SECRET in p.read_text(errors="replace")]
    assert kept == []  # Ansible's artifacts held the environment; the pipeline scrubbed them
    return results, run_dir


def test_a_k8s_run_on_a_fresh_cluster_installs_trainer_v2_and_runs_trainjobs(
    tmp_path: Path, api: ApiServer
) -> None:
    results, run_dir = run_k8s(tmp_path, api, SETTINGS, "--keep")
    assert {o["metadata"]["name"] for o in api.objects("customresourcedefinitions")} == {
        "jobsets.jobset.x-k8s.io",
        "trainjobs.trainer.kubeflow.org",
        "trainingruntimes.trainer.kubeflow.org",
        "clustertrainingruntimes.trainer.kubeflow.org",
    }
    assert results["k8s"]["job_api"] == "trainer"
    assert results["k8s"]["chosen_by"] == "k8s_job_api: auto; the cluster served: neither"
    torch, *nccl = results["tests"]
    assert torch["status"] == "error" and "CUDA is not available" in torch["reason"]
    assert [(t["name"], t["hosts"], t["status"]) for t in nccl] == [
        ("nccl_tests_all_reduce", ["gpu-node-0"], "fail"),  # no sshd answers in the double
        ("nccl_tests_all_reduce", ["gpu-node-1"], "fail"),
    ]
    roles = {
        node: [(p["kind"], p["role"]) for p in h["facts"]["k8s"]["pods"]]
        for node, h in results["hosts"].items()
    }
    assert roles == {
        node: [("TrainJob", "node"), ("TrainJob", "node")] for node in ("gpu-node-0", "gpu-node-1")
    }
    summary = (run_dir / "summary.txt").read_text()
    assert "Kubeflow Trainer v2 and JobSet ready" in summary
    assert "2 job(s) ran as TrainJob (trainer.kubeflow.org/v1alpha1, Kubeflow Trainer v2)" in summary
    # --keep: the TrainJobs stay for a look (their JobSets, and the launchers' Jobs and pods with them);
    # a teardown given the run dir deletes them and all they made.
    assert len(api.objects("trainjobs", "pav")) == 2 and api.objects("jobsets", "pav")
    env = {**api.env(), "KUBECONFIG": str(api.kubeconfig)}
    inventory = str(tmp_path / "inventory" / "hosts.yml")
    down = run_cli("--inventory", inventory, "--stages", "teardown", "--run-dir", str(run_dir), env=env)
    assert down.rc == 0, down.stdout[-3000:] + down.stderr[-3000:]
    for plural in ("trainjobs", "jobsets", "jobs", "pods"):
        assert api.objects(plural, "pav") == [], plural


def test_a_cluster_serving_only_the_v1_kinds_runs_them_as_before(tmp_path: Path, api: ApiServer) -> None:
    """Only the v1 operators (training-operator: PyTorchJob): PyTorchJob, chosen by auto; configure installs
    the v1 operators (the MPI operator with them)."""
    api.store.put(next(r for r in api.store.resources() if r.kind == "Namespace"),
                  {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kubeflow"}})  # fmt: skip
    argv = ["kubectl", "--kubeconfig", str(api.kubeconfig), "apply", "--server-side", "-f", str(V1_OPERATOR)]
    subprocess.run(argv, env=api.env(), capture_output=True, timeout=300, check=True)
    settings = SETTINGS.replace("nccl_tests_all_reduce]", "]").replace(", ]", "]")
    results, _ = run_k8s(tmp_path, api, settings)
    assert results["k8s"]["job_api"] == "v1"
    assert results["k8s"]["chosen_by"] == "k8s_job_api: auto; the cluster served: v1"
    assert {o["metadata"]["name"] for o in api.objects("customresourcedefinitions")} >= {
        "pytorchjobs.kubeflow.org",
        "mpijobs.kubeflow.org",  # the role's v1 install, the MPI operator with it
    }
    (test,) = results["tests"]
    assert test["status"] == "error" and "CUDA is not available" in test["reason"]
    roles = {node: [p["role"] for p in h["facts"]["k8s"]["pods"]] for node, h in results["hosts"].items()}
    assert roles == {"gpu-node-0": ["master"], "gpu-node-1": ["worker"]}
    assert api.objects("pytorchjobs") == [] and api.objects("pods", "pav") == []  # teardown deleted them
