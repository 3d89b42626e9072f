"""The double's pod network (tests/k8s/apiserver/network.py), which lets the pod-running k8s tests spread over
xdist workers: two doubles' pods listen on one wildcard port at once, as the pods of two clusters do (the
operators' fixed ports, 23456 and 29500), and a Service's name resolves to the address of the pod it selects.
Bare pods, no operator: a second or two."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.k8s.apiserver import ApiServer, network
from tests.k8s.apiserver.pods import POD, SERVICE

LISTEN = (
    "import socket; s = socket.socket(); s.bind(('0.0.0.0', 23456)); s.listen(); print('bound', flush=True); "
    "s.accept()[0].sendall(b'hello'); print('served', flush=True)"
)
CONNECT = (
    "import os, socket, time\n"
    "for _ in range(600):\n"
    "    try:\n"
    "        c = socket.create_connection((os.environ['MASTER_ADDR'], 23456)); break\n"
    "    except OSError: time.sleep(0.1)\n"
    "print('got', c.recv(5).decode(), 'from', c.getpeername()[0], flush=True)"
)


def pod(name: str, code: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    container = {
        "name": "main",
        "command": ["bash", "-c", f'exec python -c "{code}"'],
        "env": [{"name": k, "value": v} for k, v in (env or {}).items()],
    }
    meta = {"name": name, "namespace": "default", "labels": {"app": name}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"nodeName": "gpu-node-0", "containers": [container]},
    }


def wait_for(api: ApiServer, name: str, phases: tuple[str, ...]) -> dict[str, Any]:
    for _ in range(1200):  # the pod's process starts, or ends, within two minutes on a loaded machine
        live = api.store.get(POD, "default", name)
        if (live.get("status") or {}).get("phase") in phases:
            return live
        time.sleep(0.1)
    raise AssertionError(f"{name}: {live.get('status')}; log {api.logs}")


@pytest.mark.skipif(not network.isolated(), reason="no network namespace here: the pods share one loopback")
def test_two_doubles_pods_listen_on_one_port_and_a_service_name_resolves_to_its_pod(tmp_path: Path) -> None:
    with ApiServer(tmp_path / "a") as a, ApiServer(tmp_path / "b") as b:
        for api in (a, b):  # each a master listening on 0.0.0.0:23456, both at once
            meta = {"name": "master", "namespace": "default"}
            spec = {"clusterIP": "None", "selector": {"app": "m"}}
            api.store.put(SERVICE, {"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": spec})
            api.store.put(POD, pod("m", LISTEN))
        for api in (a, b):
            wait_for(api, "m", ("Running", "Failed"))
        for _ in range(1200):
            if all(api.logs.get("default/m/main") for api in (a, b)):
                break
            time.sleep(0.1)
        assert [api.logs["default/m/main"] for api in (a, b)] == ["bound\n", "bound\n"]
        for api in (a, b):  # a worker reaches its own double's master by the Service's name
            api.store.put(POD, pod("w", CONNECT, {"MASTER_ADDR": "master"}))
        for api in (a, b):
            master = wait_for(api, "m", ("Succeeded", "Failed"))
            worker = wait_for(api, "w", ("Succeeded", "Failed"))
            address = master["status"]["podIP"]
            assert address.startswith("127.") and address != "127.0.0.1"
            assert address != worker["status"]["podIP"]
            assert api.logs["default/w/main"] == f"got hello from {address}\n"
            assert (master["status"]["phase"], worker["status"]["phase"]) == ("Succeeded", "Succeeded")
