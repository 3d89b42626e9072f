"""What a run tested, as history keys it: runs are compared only with runs of the same key.

The key is the env, the hosts and their GPUs: `custom:gpu-host:2xNVIDIA H100 80GB HBM3`. An inventory's
hosts keep their names from run to run, so they are named (a localhost run is never compared with sim
hosts, though both record env `custom`); a provisioning env (one with Terraform state) names its hosts
anew each run, so they are counted (`sim:2 hosts:no GPU`). Many names are shown as their count and a digest
of them. Older results.json files are keyed from what they recorded, so they need no rewrite.
"""

from __future__ import annotations

import hashlib
from typing import Any

NAMED_HOSTS = 4  # more hosts than this are shown as their count and a digest of their names


def key_of(results: dict[str, Any]) -> str:
    hosts = results.get("hosts") or {}
    hosts = hosts if isinstance(hosts, dict) else {}
    names = _hosts(sorted(map(str, hosts)), bool(results.get("state_dir")))
    shapes = " + ".join(sorted({gpu_shape(h) for h in hosts.values()})) or "no hosts"
    return f"{results.get('env')}:{names}:{shapes}"


def gpu_shape(host: Any) -> str:
    """A host's GPUs as preflight counted them: "2xNVIDIA H100 80GB HBM3", "no GPU", or "GPUs unknown"
    for a host whose facts were never read (or are not GPU facts: a k8s node)."""
    facts = host.get("facts") if isinstance(host, dict) else None
    gpu = facts.get("gpu") if isinstance(facts, dict) else None
    count = gpu.get("count") if isinstance(gpu, dict) else None
    if not isinstance(count, int) or isinstance(count, bool):
        return "GPUs unknown"
    if count == 0:
        return "no GPU"
    devices = gpu.get("devices") if isinstance(gpu, dict) else None
    models = sorted({str(d[1]) for d in devices or [] if isinstance(d, list) and len(d) > 1})
    return f"{count}x{'/'.join(models) or 'GPU'}"


def _hosts(names: list[str], provisioned: bool) -> str:
    if provisioned:
        return f"{len(names)} hosts"
    if len(names) <= NAMED_HOSTS:
        return ",".join(names)
    digest = hashlib.sha256("\n".join(names).encode()).hexdigest()[:8]
    return f"{len(names)} hosts #{digest}"
