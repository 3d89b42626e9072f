"""The kubelet the double plays: a pod whose container runs `bash`/`sh` is run for real on this machine,
with only the environment its spec and the operator gave it. Each pod gets its own folder standing in for
the container's filesystem (/tmp, /opt, /root, /etc/mpi and every volume mount are paths under it; ConfigMap
and Secret volumes are written there). Each pod has an address of its own in the double's pod network
(tests/k8s/apiserver/network.py), and a name the cluster DNS answers resolves to the address of the pod it
names. A container that runs sshd (an MPIJob worker) is reported Running and never started: it would write
this machine's /etc/ssh and take its port 22."""

from __future__ import annotations

import base64
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from tests.k8s.apiserver.network import PodNetwork
from tests.k8s.apiserver.resources import BUILTIN, Resource
from tests.k8s.apiserver.store import Store, matches_labels

POD = next(r for r in BUILTIN if r.kind == "Pod")
SERVICE = next(r for r in BUILTIN if r.kind == "Service")
CONFIGMAP = next(r for r in BUILTIN if r.kind == "ConfigMap")
SECRET = next(r for r in BUILTIN if r.kind == "Secret")
CONTAINER_DIRS = ("/tmp", "/opt", "/root", "/etc/mpi", "/dev/shm")


class Kubelet:
    def __init__(self, store: Store, root: Path, logs: dict[str, str]) -> None:
        self.store, self.root, self.logs = store, root, logs
        self.threads: list[tuple[str, threading.Thread]] = []  # (namespace, the pod's thread)
        self.network = PodNetwork()
        self.addresses: dict[tuple[str, str], str] = {}  # (namespace, pod) -> its address
        self.stopping = False
        # FOR TESTING: nodes whose pods fail as on a node with a dead GPU (the container exits 1 at once).
        self.broken: set[str] = set()
        store.hooks.append(self._on_write)

    def stop(self) -> None:
        self.stopping = True
        for _, t in self.threads:
            t.join(timeout=10)
        self.network.stop()

    def wait(self, namespace: str) -> None:
        """Until the processes of the namespace's pods have ended (its pods deleted: they are killed)."""
        for ns, t in list(self.threads):
            if ns == namespace:
                t.join(timeout=30)

    def _on_write(self, resource: Resource, obj: dict[str, Any]) -> None:
        if resource.kind == "Pod" and not obj.get("status"):
            t = threading.Thread(target=self._run, args=(obj,), daemon=True)
            self.threads.append((obj["metadata"]["namespace"], t))
            t.start()

    def _run(self, pod: dict[str, Any]) -> None:
        meta, spec = pod["metadata"], pod["spec"]
        ns, name = meta["namespace"], meta["name"]
        self.addresses[(ns, name)] = self.network.address()
        root = self.root / ns / name
        mounts = self._volumes(ns, spec, root)
        main = spec["containers"][0]
        if spec.get("nodeName") in self.broken:
            self.logs[f"{ns}/{name}/{main['name']}"] = f"FOR TESTING: node {spec['nodeName']} is broken\n"
            self._status(ns, name, "Failed", rc=1)
            return
        command = [*(main.get("command") or []), *(main.get("args") or [])]
        if Path(command[0]).name not in ("bash", "sh") or "sshd" in " ".join(command):
            self._status(ns, name, "Running", running=True)
            return
        for init in spec.get("initContainers") or []:
            rc = self._container(ns, name, init, root, mounts, spec)
            if rc != 0:
                self._status(ns, name, "Failed", rc=rc)
                return
        self._status(ns, name, "Running", running=True)
        rc = self._container(ns, name, main, root, mounts, spec)
        self._status(ns, name, "Succeeded" if rc == 0 else "Failed", rc=rc)

    def _volumes(self, ns: str, spec: dict[str, Any], root: Path) -> list[str]:
        paths = []
        volumes = {v["name"]: v for v in spec.get("volumes") or []}
        for c in [*spec.get("initContainers", []), *spec["containers"]]:
            for m in c.get("volumeMounts") or []:
                folder = root / m["mountPath"].lstrip("/")
                folder.mkdir(parents=True, exist_ok=True)
                paths.append(m["mountPath"])
                volume = volumes.get(m["name"]) or {}
                if "configMap" in volume:
                    cm = self.store.find(CONFIGMAP, ns, volume["configMap"]["name"]) or {}
                    data = cm.get("data") or {}
                    items = volume["configMap"].get("items") or [{"key": k, "path": k} for k in data]
                    for item in items:  # only the listed keys, each at its path (the kubelet's rule)
                        target = folder / item["path"]
                        target.parent.mkdir(parents=True, exist_ok=True)
                        target.write_text(data[item["key"]])
                if "secret" in volume:
                    secret = self.store.find(SECRET, ns, volume["secret"]["secretName"]) or {}
                    data = secret.get("data") or {}
                    items = volume["secret"].get("items") or [{"key": k, "path": k} for k in data]
                    for (
                        item
                    ) in items:  # a key may be projected to several paths (the MPI plugin's public key)
                        (folder / item["path"]).write_bytes(base64.b64decode(data[item["key"]]))
        return paths

    def _container(
        self, ns: str, pod: str, c: dict[str, Any], root: Path, mounts: list[str], spec: dict[str, Any]
    ) -> int:
        prefixes = sorted({*CONTAINER_DIRS, *mounts}, key=len, reverse=True)
        pattern = re.compile(r"(?<![\w.-])(" + "|".join(map(re.escape, prefixes)) + r")(?=/|\b|$)")
        inside = lambda text: pattern.sub(lambda m: f"{root}{m.group(1)}", text)  # noqa: E731
        pod_obj = self.store.find(POD, ns, pod) or {}
        env = {
            "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
            "HOSTNAME": pod,
            "HOME": f"{root}/root",
        }
        for var in c.get("env") or []:
            value = (
                _field(pod_obj, var["valueFrom"]["fieldRef"]["fieldPath"])
                if "valueFrom" in var
                else str(var.get("value", ""))
            )
            env[var["name"]] = self._resolve(ns, value) or inside(value)
        for d in CONTAINER_DIRS:
            (root / d.lstrip("/")).mkdir(parents=True, exist_ok=True)
        argv = [inside(a) for a in [*(c.get("command") or []), *(c.get("args") or [])]]
        cwd = inside(c.get("workingDir") or "/tmp")
        key = f"{ns}/{pod}/{c['name']}"
        self.logs[key] = ""
        proc = subprocess.Popen(
            [*self.network.enter(), *argv],
            env=env,
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        reader = threading.Thread(target=self._read, args=(proc, key), daemon=True)
        reader.start()
        deadline = time.monotonic() + float(spec.get("activeDeadlineSeconds") or 600)
        while proc.poll() is None:
            gone = self.store.find(POD, ns, pod) is None
            if gone or self.stopping or time.monotonic() > deadline:
                os.killpg(proc.pid, signal.SIGKILL)
            time.sleep(0.1)
        reader.join(timeout=5)
        return proc.returncode

    def _resolve(self, ns: str, value: str) -> str:
        """The cluster DNS: a Service's name resolves to the address of the pod its selector picks (the first
        by name), a pod's HOSTNAME.SUBDOMAIN under a headless Service (a JobSet's pods) to that pod's; "" for
        a value that names neither. A pod not started yet has no address: asked again, as DNS is, a while."""
        labels = value.split(".")
        services = {s["metadata"]["name"]: s for s in self.store.list(SERVICE, ns)}
        if labels[0] in services:
            selector = (services[labels[0]].get("spec") or {}).get("selector") or {}
            wanted = ",".join(f"{k}={v}" for k, v in selector.items())

            def named(pod: dict[str, Any]) -> bool:
                return bool(selector) and matches_labels(pod, wanted)
        elif len(labels) > 1 and labels[1] in services:

            def named(pod: dict[str, Any]) -> bool:
                return (pod["spec"].get("hostname"), pod["spec"].get("subdomain")) == (labels[0], labels[1])
        else:
            return ""
        deadline = time.monotonic() + 60
        while not self.stopping and time.monotonic() < deadline:
            for pod in self.store.list(POD, ns):
                address = self.addresses.get((ns, pod["metadata"]["name"]))
                if named(pod) and address:
                    return address
            time.sleep(0.1)
        return value  # no pod answers to the name: it resolves to nothing, as on a real cluster

    def _read(self, proc: subprocess.Popen[str], key: str) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self.logs[key] += line

    def _status(self, ns: str, pod: str, phase: str, running: bool = False, rc: int = 0) -> None:
        if running:
            state: dict[str, Any] = {"running": {"startedAt": _now()}}
        else:
            reason = "Completed" if rc == 0 else "Error"
            state = {"terminated": {"exitCode": rc, "reason": reason, "finishedAt": _now()}}
        live = self.store.find(POD, ns, pod)
        if live is None:
            return
        statuses = [{"name": c["name"], "state": state, "ready": running} for c in live["spec"]["containers"]]
        address = self.addresses[(ns, pod)]
        status = {
            "phase": phase,
            "podIP": address,
            "podIPs": [{"ip": address}],
            "containerStatuses": statuses,
        }
        self.store.update_status(POD, ns, pod, status)


def _field(pod: dict[str, Any], path: str) -> str:
    """The downward API's fieldRef: metadata.name, metadata.annotations['KEY'], metadata.labels['KEY'], ..."""
    match = re.fullmatch(r"metadata\.(annotations|labels)\['([^']+)'\]", path)
    if match:
        return str((pod.get("metadata", {}).get(match[1]) or {}).get(match[2], ""))
    node: Any = pod
    for part in path.split("."):
        node = node.get(part, "") if isinstance(node, dict) else ""
    return str(node)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
