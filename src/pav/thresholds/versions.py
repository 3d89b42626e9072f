"""The same software on every node (issue 50): driver, CUDA driver, VBIOS, kernel, torch, NCCL and HCA
firmware, from each host's facts (facts.gpus, read through NVML with the kernel and the RDMA ports' firmware;
facts.torch). One `software_versions` result per run: a component a node has other than the run's other
nodes (the most common value), or other than `pav_expected_versions` pins, names the node, the component
and both values. A component no host reports is not compared; a run of one node is compared with the pins
only. Drift is a configuration problem (category config), not a failing part.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from pav.results import HostRecord, TestResult
from pav.thresholds.node_policy import COMPONENTS, NodePolicy

NAME = "software_versions"
CATEGORY = "config"


def host_versions(facts: Mapping[str, Any]) -> dict[str, str]:
    """component -> version for what this host's facts say; several GPUs' or HCAs' values joined by ', '."""
    gpus = facts.get("gpus") if isinstance(facts.get("gpus"), dict) else {}
    torch = facts.get("torch") if isinstance(facts.get("torch"), dict) else {}
    devices = [d for d in gpus.get("devices") or [] if isinstance(d, dict)]
    found = {
        "driver": gpus.get("driver"),
        "cuda_driver": gpus.get("cuda_driver"),
        "vbios": _joined((d.get("state") or {}).get("vbios") for d in devices),
        "kernel": gpus.get("kernel"),
        "torch": torch.get("version"),
        "nccl": torch.get("nccl"),
        "hca_fw": _joined(p.get("fw_ver") for p in gpus.get("rdma") or [] if isinstance(p, dict)),
    }
    return {k: str(v) for k, v in found.items() if v}


def _joined(values: Any) -> str:
    return ", ".join(sorted({str(v) for v in values if v}))


def versions_results(hosts: Mapping[str, HostRecord], policy: NodePolicy | None = None) -> list[TestResult]:
    """The run's one result, or none where there is nothing to compare (one node and no pins)."""
    policy = policy or NodePolicy()
    seen = {name: v for name, record in hosts.items() if (v := host_versions(record.facts))}
    if not seen or (len(seen) < 2 and not policy.expected_versions):
        return []
    table = {c: {h: v[c] for h, v in seen.items() if c in v} for c in COMPONENTS}
    table = {c: per_host for c, per_host in table.items() if per_host}
    found = [
        (host, problem)
        for component, per_host in table.items()
        for host, problem in drift(component, per_host, policy.expected_versions.get(component, ""))
    ]
    metrics = {"nodes": len(seen), "components": len(table), "problems": len(found)}
    threshold: dict[str, Any] = {
        "gates": [{"metric": "problems", "max": 0, "why": "the same software on every node, as pinned"}],
        "versions": table,
    }
    if found:
        threshold["problems"] = [{"part": h, "problem": p, "category": CATEGORY} for h, p in found]
    status = "fail" if found else "pass"
    return [TestResult(NAME, sorted(seen), status, "; ".join(p for _, p in found), metrics, threshold)]


def drift(component: str, per_host: Mapping[str, str], pinned: str) -> list[tuple[str, str]]:
    """(host, problem) for each host whose version of `component` is not the pinned one, or (unpinned) not
    the one most of the others have; where no value is most common, every host is named."""
    if pinned:
        return [
            (h, f"{h}: {component} {v}, expected {pinned} (pav_expected_versions.{component})")
            for h, v in sorted(per_host.items())
            if v != pinned
        ]
    counts = Counter(per_host.values()).most_common()
    if len(counts) < 2:
        return []
    if counts[0][1] == counts[1][1]:
        listed = ", ".join(f"{h} {v}" for h, v in sorted(per_host.items()))
        return [(h, f"{h}: {component} differs across the nodes ({listed})") for h in sorted(per_host)]
    usual, many = counts[0]
    return [
        (h, f"{h}: {component} {v} where {many} other node(s) have {usual}")
        for h, v in sorted(per_host.items())
        if v != usual
    ]
