"""The API-server double of tests/k8s/apiserver, as the k8s tests get it.

`api`: a cluster of its own for one test (two 8-GPU nodes, nothing installed), for a test that asserts on the
whole cluster: what a fresh cluster gets installed, which job API a cluster's types decide, its nodes'
taints, every request the server took. A module's `api_nodes` gives it other nodes.

`k8s`: a namespace of its own for one test on the session's shared double (one per xdist worker), where the
pinned training-operator (PyTorchJob), JobSet and Kubeflow Trainer manifests were applied once, as the role
applies them. The namespace goes when the test ends, and all in it: the pods' processes are ended before the
next test starts. Cluster-scoped objects a test makes (ClusterTrainingRuntimes) stay, as on a real cluster.

Every pod-running test may go to any xdist worker: each double's pods run in a network namespace of their
own (tests/k8s/apiserver/network.py). Where this machine refuses one, those tests share one worker."""

from __future__ import annotations

import dataclasses
import itertools
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pav import paths
from pav.k8s.kubectl import Kubectl
from pav.k8s_config import load_config
from pav.k8s_settings import K8sSettings
from tests.k8s.apiserver import ApiServer, network

INVENTORY = paths.INVENTORIES / "nebius-eu-k8s"
FILES = paths.ROOT / "roles" / "training_operator" / "files"
V1_OPERATOR = FILES / "training-operator-v1.8.1" / "training-operator.yaml"  # PyTorchJob only
TRAINER = (FILES / "jobset-v0.12.0" / "jobset.yaml", FILES / "kubeflow-trainer-v2.3.0")
OPERATOR_NAMESPACES = ("kubeflow", "jobset-system", "kubeflow-system")
DOUBLE_FIXTURES = {"api", "k8s"}
# jobs.follow's poll for a job whose pods run torch: each poll is two kubectl runs (~0.07 CPU-s each, most of
# it kubectl's own start), so at 0.2 s a job's few seconds cost more CPU in kubectl than its ranks' torch
# imports. Once a second still sees every state a torch job's pods pass through (they last seconds).
FOLLOW_POLL_S = 1.0


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook turns group marks into workers
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Without a network namespace for the pods, every test of the double shares one worker: their pods
    would all listen on this machine's loopback (PyTorchJob's master port 23456, the torch plugin's 29500)."""
    if network.isolated():
        return
    for item in items:
        if DOUBLE_FIXTURES & set(getattr(item, "fixturenames", ())) and "/k8s/" in item.nodeid.replace(
            "\\", "/"
        ):
            item.add_marker(pytest.mark.xdist_group("k8s-pods"))


def apply(api: ApiServer, *manifests: Path | str, stdin: str | None = None) -> None:
    """kubectl apply --server-side, as the role applies the pinned manifests (all in one run): each object
    into the namespace it names."""
    files = [arg for manifest in manifests for arg in ("-f", str(manifest))]
    argv = ["kubectl", "--kubeconfig", str(api.kubeconfig), "apply", "--server-side", *files]
    proc = subprocess.run(argv, input=stdin, env=api.env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]


def namespace_yaml(*names: str) -> str:
    """The namespaces, for one kubectl apply (each kubectl run costs ~0.07 CPU-s, most of it its start)."""
    return "---\n".join(f"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {name}\n" for name in names)


@pytest.fixture
def api_nodes() -> dict[str, int] | None:
    """The nodes of `api`'s cluster and their GPUs (a module overrides it); None: two 8-GPU nodes."""
    return None


@pytest.fixture
def api(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, api_nodes: dict[str, int] | None
) -> Iterator[ApiServer]:
    """A cluster of this test's own, nothing installed."""
    with ApiServer(tmp_path / "api", api_nodes) as server:
        monkeypatch.setenv("KUBECACHEDIR", str(tmp_path / "api" / "kube-cache"))  # pav's Kubectl too
        yield server


@pytest.fixture(scope="session")
def shared_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    """The session's double: the v1 training-operator (PyTorchJob; no MPIJob), JobSet and Kubeflow Trainer
    applied once."""
    with ApiServer(tmp_path_factory.mktemp("shared-api")) as server:
        apply(server, "-", stdin=namespace_yaml(*OPERATOR_NAMESPACES))
        apply(server, V1_OPERATOR, *TRAINER)
        yield server


@dataclasses.dataclass(frozen=True)
class Namespace:
    """A test's own namespace on the shared double: its jobs, pods and payload ConfigMap go there."""

    api: ApiServer
    name: str

    @property
    def kube(self) -> Kubectl:
        return Kubectl(self.api.kubeconfig, self.name)

    @property
    def config(self) -> K8sSettings:
        """The env's k8s settings, with this namespace for k8s_namespace."""
        return dataclasses.replace(load_config(INVENTORY), namespace=self.name)

    @property
    def pods(self) -> Path:
        """Where the double's kubelet keeps this namespace's pods' folders."""
        return self.api.workdir / "pods" / self.name

    def objects(self, plural: str) -> list[dict[str, Any]]:
        """The namespace's objects of a type."""
        return self.api.objects(plural, self.name)

    def logs(self) -> str:
        return "\n".join(v for k, v in self.api.logs.items() if k.startswith(f"{self.name}/"))


_COUNT = itertools.count(1)


@pytest.fixture
def k8s(
    shared_api: ApiServer, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Namespace]:
    monkeypatch.setenv("KUBECACHEDIR", str(shared_api.workdir / "kube-cache"))  # pav's Kubectl too
    slug = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:40].strip("-")
    space = Namespace(shared_api, f"t{next(_COUNT)}-{slug}")
    apply(shared_api, "-", stdin=namespace_yaml(space.name))
    yield space
    Kubectl(shared_api.kubeconfig, space.name).run("delete", "namespace", space.name, "--wait=false")
    shared_api.kubelet.wait(space.name)
