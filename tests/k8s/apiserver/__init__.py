"""A Kubernetes API server double on loopback that the real kubectl talks to (tests only; no cluster can run
here). It serves discovery and the OpenAPI v3 kubectl reads, stores objects, refuses a write into a missing
namespace and a type it does not serve (as a real server does), and plays the controllers a run depends on:
training-operator v1.8.1 (PyTorchJob), mpi-operator v0.6.0 (MPIJob), Kubeflow Trainer v2.3.0 (TrainJob, its
torch and MPI plugins), JobSet v0.12.0 and the Indexed Jobs under it, the CRD, Deployment and namespace
controllers, the scheduler (round-robin onto its nodes) and a kubelet that runs bash pods for real.

    with ApiServer(tmp_path) as api:
        subprocess.run(["kubectl", "--kubeconfig", str(api.kubeconfig), "get", "nodes"], env=api.env())
"""

from __future__ import annotations

import os
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from tests.k8s.apiserver import builtin, scheduler
from tests.k8s.apiserver.controller import Controller
from tests.k8s.apiserver.handler import Handler
from tests.k8s.apiserver.jobset import JobController, JobSetController
from tests.k8s.apiserver.mpijob import MPIJobController
from tests.k8s.apiserver.pods import Kubelet
from tests.k8s.apiserver.pytorchjob import PyTorchJobController
from tests.k8s.apiserver.resources import BUILTIN
from tests.k8s.apiserver.store import ApiError, Store
from tests.k8s.apiserver.trainjob import TrainJobController

__all__ = ["ApiError", "ApiServer"]
NODE = next(r for r in BUILTIN if r.kind == "Node")
NAMESPACE = next(r for r in BUILTIN if r.kind == "Namespace")
TICK_S = 1.0  # the controllers' pass when nothing is written: deadlines and TTLs are seconds
# The least time between two passes, as a real controller's work queue batches the events of a moment: each
# step of a JobSet (node pods Ready, the launcher started, failed, the JobSet finished, its Jobs deleted)
# then takes a pass of its own, so a client polling every 0.2 s sees the node pods before they go (an
# instant cascade deleted them under load before test_trainjob's MPI test saw them Running).
MIN_PASS_S = 0.1


class ApiServer:
    def __init__(self, workdir: Path, gpus_per_node: dict[str, int] | None = None) -> None:
        self.workdir = workdir
        self.store = Store()
        self.logs: dict[str, str] = {}
        self.requests: list[str] = []
        nodes = gpus_per_node if gpus_per_node is not None else {"gpu-node-0": 8, "gpu-node-1": 8}
        builtin.install(self.store)
        scheduler.install(self.store)  # before the nodes: a node written cordoned gets its taint
        for name in ("default", "kube-system"):
            self.store.put(NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        for name, gpus in nodes.items():
            allocatable = {
                "cpu": "128",
                "memory": "1600Gi",
                **({"nvidia.com/gpu": str(gpus)} if gpus else {}),
            }
            self.store.put(
                NODE,
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {"name": name},
                    "status": {"allocatable": allocatable},
                },
            )
        self.kubelet = Kubelet(self.store, workdir / "pods", self.logs)
        names = list(nodes) or ["node-0"]
        self.controllers: list[Controller | TrainJobController | JobSetController | JobController] = [
            PyTorchJobController(self.store, names),
            MPIJobController(self.store, names),
            TrainJobController(self.store, names),
            JobSetController(self.store, names),
            JobController(self.store, names),
        ]
        self._stop = threading.Event()
        handler = type(
            "BoundHandler", (Handler,), {"store": self.store, "logs": self.logs, "requests": self.requests}
        )
        self.http = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.http.daemon_threads = True
        self.kubeconfig = workdir / "kubeconfig"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http.server_address[1]}"

    def env(self) -> dict[str, str]:
        """The environment for kubectl: its discovery cache in the test's folder, not ~/.kube."""
        return {**os.environ, "KUBECACHEDIR": str(self.workdir / "kube-cache")}

    def __enter__(self) -> ApiServer:
        self.workdir.mkdir(parents=True, exist_ok=True)
        cluster = {"name": "double", "cluster": {"server": self.url}}
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [cluster],
            "users": [{"name": "u", "user": {"token": "double-token"}}],
            "contexts": [{"name": "double", "context": {"cluster": "double", "user": "u"}}],
            "current-context": "double",
        }
        self.kubeconfig.write_text(yaml.safe_dump(config))
        for target in (self.http.serve_forever, self._reconcile):
            threading.Thread(target=target, daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self.http.stopping = True  # type: ignore[attr-defined]  # open watches end
        self.http.shutdown()
        self.http.server_close()
        self.store.wake()  # the controllers' loop and open watches end now
        self.kubelet.stop()

    def _reconcile(self) -> None:
        """The controllers react to each write, as the real ones to their watches (a pass that writes
        is followed by another, until one changes nothing); and pass at least once a second for what time
        alone changes (activeDeadlineSeconds, ttlSecondsAfterFinished). An idle server does not spin."""
        while not self._stop.is_set():
            version = self.store.version
            for controller in self.controllers:
                controller.reconcile_all()
            if self._stop.wait(MIN_PASS_S):
                return
            self.store.wait_change(version, TICK_S)

    def objects(self, plural: str, namespace: str = "") -> list[dict[str, Any]]:
        """What the server holds of a type (any version), for a test's asserts."""
        return [
            o
            for k, o in sorted(self.store.objects.items())
            if k[1] == plural and (not namespace or k[2] == namespace)
        ]
