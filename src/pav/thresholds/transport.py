"""NCCL's network between hosts, as its INFO lines name it (pav.nccl_transport), held to the fabric the hosts
are set up for (facts.nccl_env.fabric): InfiniBand and RoCE expect NCCL's IB transport, sockets expect Socket.

A fallback to sockets where the hosts have HCAs shows only as low bandwidth, its cause unnamed: one cluster
in the field ran ~3 GB/s over TCP where its fabric gives ~489 (issue 63). This gate names it. A test whose log
holds no such line (NCCL_DEBUG below INFO, a run recorded before the tests logged it) is not failed: its
transport is recorded as unknown (threshold.not_applicable).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pav.catalog import spec_of
from pav.hostlist import compress
from pav.nccl_transport import IB, SOCKET, is_ib
from pav.results import TestResult

BASIS = "transport"
METRIC = "nccl_transport.net"
PART = "fabric"
# What each fabric nccl_env sets up expects NCCL to use between hosts, and the fabric in words.
EXPECTED = {"infiniband": IB, "roce": IB, "socket": SOCKET}
WORDS = {"infiniband": "InfiniBand", "roce": "RoCE", "socket": "sockets"}
HCA_FIX = "check the HCAs (ibstat), NCCL_IB_HCA, NCCL_IB_DISABLE and, in a container, /dev/infiniband"


def judge(test: TestResult, fabrics: Mapping[str, str]) -> None:
    """Hold a test across hosts whose transport is judged (catalog: nccl_transport) to its hosts' fabric
    (host -> nccl_env_fabric): a gate in threshold.gates (basis transport, part fabric) that fails the test
    naming the transport and the fix, or a not_applicable entry saying why it was not judged."""
    spec = spec_of(test.name)
    if spec is None or not spec.nccl_transport or len(test.hosts) < 2 or test.status not in ("pass", "fail"):
        return
    seen = test.metrics.get("nccl_transport") or {}
    fabric = _fabric(test.hosts, fabrics)
    net = seen.get("net")
    why = _not_judged(seen, fabric, net)
    if why:
        entry = {"metric": METRIC, "not_applicable": why}
        test.threshold.setdefault("not_applicable", []).append(entry)
        return
    gate = _gate(seen, fabric, str(net), test.hosts)
    test.threshold.setdefault("gates", []).append(gate)
    if gate["status"] == "fail":
        if test.status == "pass":
            test.status, test.reason = "fail", ""
        test.reason = "; ".join(r for r in (test.reason, gate["reason"]) if r)


def _fabric(hosts: list[str], fabrics: Mapping[str, str]) -> str:
    """The one fabric every host of the test is set up for; "" where one is unknown or they differ."""
    found = {fabrics.get(h, "") for h in hosts}
    return found.pop() if len(found) == 1 else ""


def _not_judged(seen: Mapping[str, Any], fabric: str, net: Any) -> str:
    """Why NCCL's network cannot be held to the fabric, else ""."""
    if not net:
        lines = seen.get("info_lines") or 0
        if lines:
            return f"not measured: NCCL's {lines} INFO line(s) in launcher.log name no network"
        return (
            "not measured: NCCL's transport is unknown: launcher.log holds no NCCL INFO line (NCCL_DEBUG "
            "below INFO, or a run recorded before the test logged it)"
        )
    if fabric not in EXPECTED:
        return f"NCCL used NET/{net}; the hosts' fabric (facts.nccl_env.fabric) is unknown or differs"
    if not (is_ib(str(net)) or net == SOCKET):
        return f"NCCL used NET/{net}, a network this release does not hold to a fabric"
    return ""


def _gate(seen: Mapping[str, Any], fabric: str, net: str, hosts: list[str]) -> dict[str, Any]:
    expected = EXPECTED[fabric]
    ok = is_ib(net) if expected == IB else net == SOCKET
    gate: dict[str, Any] = {
        "metric": METRIC,
        "basis": BASIS,
        "part": PART,
        "source": f"nccl_env_fabric: {fabric} on {compress(hosts)}: NCCL's network between them: {expected}",
        "value": net,
        "expected": expected,
        "status": "pass" if ok else "fail",
    }
    if not ok:
        gate["reason"] = _reason(seen, fabric, net)
    return gate


def _reason(seen: Mapping[str, Any], fabric: str, net: str) -> str:
    head = (
        f"{PART}: NCCL used NET/{net} between the hosts, where they are set up for {WORDS[fabric]} "
        f"(nccl_env_fabric: {fabric})"
    )
    if fabric == "socket":
        return f"{head}: set nccl_env_fabric to the fabric the hosts have (infiniband or roce)"
    if seen.get("ib_disabled"):
        return (
            f"{head}: NCCL was told not to use it (NCCL_IB_DISABLE set by environment to 1): unset "
            "NCCL_IB_DISABLE where the launch gets it (nccl_env_extra, the job's environment)"
        )
    if seen.get("no_ib_device"):
        return f"{head}: NCCL found no IB device (NET/IB : No device found): {HCA_FIX}"
    return f"{head}: {HCA_FIX}"
