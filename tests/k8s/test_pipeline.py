"""A whole k8s run through the CLI, the real kubectl and real ansible-playbook, against the API-server double
of tests/k8s/apiserver standing for a fresh cluster: the one pipeline installs the operators, runs a 2-node
PyTorchJob whose pods run for real on this machine (CPU: the NCCL test errors, as it must without CUDA),
reports, deletes the run's jobs and scrubs secrets from the run dir as on hosts."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.k8s.apiserver import ApiServer

# Slow: the whole pipeline, torchrun in two pods; on the worker of tests/k8s/test_kubectl.py (port 23456).
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("k8s-pods")]

SECRET = "t0ken-value-the-run-must-not-keep"
SETTINGS = """\
pav_platform: k8s
pav_hosts: 2
pav_tests: [torch_nccl_allreduce_multi]
pav_test_timeout_s: 300
nccl_env_fabric: socket
"""


@pytest.fixture
def api(tmp_path: Path) -> Iterator[ApiServer]:
    with ApiServer(tmp_path / "api") as server:
        yield server


def test_a_k8s_run_on_a_fresh_cluster_goes_through_every_stage(tmp_path: Path, api: ApiServer) -> None:
    inventory = tmp_path / "inventory"
    (inventory / "group_vars").mkdir(parents=True)
    (inventory / "hosts.yml").write_text("all:\n  hosts: {}\n")
    (inventory / "group_vars" / "all.yml").write_text(SETTINGS)
    run_dir = tmp_path / "run"
    env = {**api.env(), "KUBECONFIG": str(api.kubeconfig), "NEBIUS_IAM_TOKEN": SECRET}
    run = run_cli("--inventory", str(inventory / "hosts.yml"), "--run-dir", str(run_dir), env=env)
    assert run.rc == 1, run.stdout[-3000:] + run.stderr[-3000:]  # FAIL: a verdict, not a broken run
    results = json.loads((run_dir / "results.json").read_text())
    stages = {s["name"]: s["status"] for s in results["stages"]}
    every = ("provision", "configure", "validate", "collect", "report", "teardown")
    assert stages == dict.fromkeys(every, "ok")
    assert {o["metadata"]["name"] for o in api.objects("customresourcedefinitions")} == {
        "pytorchjobs.kubeflow.org",
        "mpijobs.kubeflow.org",
    }
    (test,) = results["tests"]
    assert test["status"] == "error" and "CUDA is not available" in test["reason"]
    roles = {node: [p["role"] for p in h["facts"]["k8s"]["pods"]] for node, h in results["hosts"].items()}
    assert roles == {"gpu-node-0": ["master"], "gpu-node-1": ["worker"]}
    assert api.objects("pytorchjobs") == [] and api.objects("pods", "pav") == []  # teardown deleted them
    kept = [p for p in run_dir.rglob("*") if p.is_file() and SECRET in p.read_text(errors="replace")]
    assert kept == []  # Ansible's artifacts held the environment; the pipeline scrubbed them
