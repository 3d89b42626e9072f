"""The kubelet the double plays: a pod whose container runs `bash`/`sh` is run for real on this machine,
with only the environment its spec and the operator gave it. Each pod gets its own folder standing in for
the container's filesystem (/tmp, /opt, /root, /etc/mpi and every volume mount are paths under it; ConfigMap
and Secret volumes are written there), and a Service's DNS name resolves to 127.0.0.1 (every pod is on this
host). A container that runs sshd (an MPIJob worker) is reported Running and never started: it would write
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

from tests.k8s.apiserver.resources import BUILTIN, Resource
from tests.k8s.apiserver.store import Store

POD = next(r for r in BUILTIN if r.kind == "Pod")
SERVICE = next(r for r in BUILTIN if r.kind == "Service")
CONFIGMAP = next(r for r in BUILTIN if r.kind == "ConfigMap")
SECRET = next(r for r in BUILTIN if r.kind == "Secret")
CONTAINER_DIRS = ("/tmp", "/opt", "/root", "/etc/mpi", "/dev/shm")


class Kubelet:
    def __init__(self, store: Store, root: Path, logs: dict[str, str]) -> None:
        self.store, self.root, self.logs = store, root, logs
        self.threads: list[threading.Thread] = []
        self.stopping = False
        # FOR TESTING: nodes whose pods fail as on a node with a dead GPU (the container exits 1 at once).
        self.broken: set[str] = set()
        store.hooks.append(self._on_write)

    def stop(self) -> None:
        self.stopping = True
        for t in self.threads:
            t.join(timeout=10)

    def _on_write(self, resource: Resource, obj: dict[str, Any]) -> None:
        if resource.kind == "Pod" and not obj.get("status"):
            t = threading.Thread(target=self._run, args=(obj,), daemon=True)
            self.threads.append(t)
            t.start()

    def _run(self, pod: dict[str, Any]) -> None:
        meta, spec = pod["metadata"], pod["spec"]
        ns, name = meta["namespace"], meta["name"]
        root = self.root / ns / name
        mounts = self._volumes(ns, spec, root)
        main = spec["containers"][0]
        if spec.get("nodeName") in self.broken:
            self.logs[f"{name}/{main['name']}"] = f"FOR TESTING: node {spec['nodeName']} is broken\n"
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
        services = {s["metadata"]["name"] for s in self.store.list(SERVICE, ns)}
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
            labels = value.split(".")
            # A Service's name, or a pod's HOSTNAME.SUBDOMAIN under a headless Service (a JobSet's pods).
            named = labels[0] in services or (len(labels) > 1 and labels[1] in services)
            env[var["name"]] = "127.0.0.1" if named else inside(value)
        for d in CONTAINER_DIRS:
            (root / d.lstrip("/")).mkdir(parents=True, exist_ok=True)
        argv = [inside(a) for a in [*(c.get("command") or []), *(c.get("args") or [])]]
        cwd = inside(c.get("workingDir") or "/tmp")
        key = f"{pod}/{c['name']}"
        self.logs[key] = ""
        proc = subprocess.Popen(
            argv,
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
        self.store.update_status(POD, ns, pod, {"phase": phase, "containerStatuses": statuses})


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
