"""Error counters over the run (issue 50): each GPU's NVLink, PCIe and AER counters and each RDMA port's,
read at configure (facts.gpus) and again after the tests (facts.gpus_after, roles/run_tests). NVLink CRC
counts from boot (1-65 per link on a healthy H200, 347-457 on a healthy H100: tests/payload/fixtures/
node-state), so the gates are on the change over the run, with DCGM's and NVSentinel's figures as the
anchors (docs/thresholds.md, "Error counters"). Each GPU's clock violation times are judged the same way
(violations.py, issue 63). One `error_counters` result per host read twice, each problem naming the GPU
and link or the port.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pav.results import HostRecord, TestResult
from pav.thresholds.hardware import Gpu, device_bus_id, read_hardware
from pav.thresholds.violations import SHARE, counted, violation_problems, violation_seconds

NAME = "error_counters"
NVLINK_CRC_PER_S = 100.0  # DCGM health: NVLink CRC >= 100/s fails (any replay or recovery too)
PCIE_REPLAYS = 80  # DCGM pcie plugin max_pcie_replays: more in a test fails
AER_CORRECTABLE_PER_MIN = 32.0  # DCGM pcie plugin: > 32/min (Gen5 x16) fails...
AER_CORRECTABLE_TOTAL = 480  # ... or >= 480 in total
# NVSentinel nic-health-monitor: any increment of these is fatal; the others by rate.
PORT_ANY = ("link_downed", "excessive_buffer_overrun_errors")
PORT_PER_S = {"symbol_error": 10.0, "port_rcv_errors": 10.0}
PORT_PER_MIN = {"link_error_recovery": 5.0}


def counters_results(hosts: Mapping[str, HostRecord]) -> list[TestResult]:
    """A result per host whose counters were read before and after the tests."""
    out = []
    for name, record in hosts.items():
        before, after = record.facts.get("gpus"), record.facts.get("gpus_after")
        if isinstance(after, dict) and has_counters(before):
            out.append(judge_host(name, record.facts, before, after))
    return out


def has_counters(gpus: Any) -> bool:
    """Whether a facts read (facts.gpus) holds any error counter: a GPU's, or an RDMA port's."""
    if not isinstance(gpus, dict):
        return False
    return any(_counted(d.get("counters")) for d in gpus.get("devices") or []) or bool(gpus.get("rdma"))


def _counted(counters: Any) -> bool:
    """A GPU's counters with any value read (the nvidia-smi fallback reads none)."""
    if not isinstance(counters, dict):
        return False
    aer = counters.get("aer") or {}
    read = [counters.get("pcie_replay"), *aer.values()]
    return bool(counters.get("nvlink")) or any(v is not None for v in read) or counted(counters)


def judge_host(host: str, facts: dict[str, Any], before: dict[str, Any], after: dict[str, Any]) -> TestResult:
    seconds = max(float(after.get("read_at") or 0) - float(before.get("read_at") or 0), 1.0)
    labels = {g.bus_id: g for g in read_hardware(host, facts).gpus}
    found: list[tuple[str, str]] = []
    held: dict[str, dict[str, float]] = {}  # GPU index -> policy -> seconds its clocks were held back
    then = {device_bus_id(d): d for d in before.get("devices") or []}
    for dev in after.get("devices") or []:
        bus = device_bus_id(dev)
        if bus in labels and bus in then:
            old, new = then[bus].get("counters") or {}, dev.get("counters") or {}
            found += gpu_problems(labels[bus], old, new, seconds)
            if spent := violation_seconds(old, new):
                held[str(labels[bus].index)] = spent
                found += violation_problems(labels[bus].label(), spent, seconds)
    found += port_problems(before.get("rdma") or [], after.get("rdma") or [], seconds)
    metrics: dict[str, Any] = {"seconds_between_reads": round(seconds, 1), "problems": len(found)}
    if held:  # power-cap time among them: recorded, not judged
        metrics["violation_s"] = held
    why = (
        "no NVLink, PCIe, AER or RDMA port error counter grew past its gate over the run (facts.gpus_after), "
        f"and no GPU held its clocks back for heat or sync boost over {SHARE:.0%} of it"
    )
    threshold: dict[str, Any] = {"gates": [{"metric": "problems", "max": 0, "why": why}]}
    if found:
        threshold["problems"] = [{"part": part, "problem": p} for part, p in found]
    status = "fail" if found else "pass"
    return TestResult(NAME, [host], status, "; ".join(p for _, p in found), metrics, threshold)


def _grew(before: Any, after: Any) -> int:
    """The change of a counter read twice; 0 where either read is missing or it went back (a reset)."""
    if not isinstance(before, int) or not isinstance(after, int) or after < before:
        return 0
    return after - before


def gpu_problems(
    gpu: Gpu, before: dict[str, Any], after: dict[str, Any], seconds: float
) -> list[tuple[str, str]]:
    label = gpu.label()
    out = []
    links_then = {x.get("link"): x for x in before.get("nvlink") or []}
    for link in after.get("nvlink") or []:
        out += _link_problems(label, links_then.get(link.get("link")) or {}, link, seconds)
    replays = _grew(before.get("pcie_replay"), after.get("pcie_replay"))
    if replays > PCIE_REPLAYS:
        out.append((label, f"{label}: {replays} PCIe replays during the run (> {PCIE_REPLAYS} fails)"))
    aer_then, aer_now = before.get("aer") or {}, after.get("aer") or {}
    corrected = _grew(aer_then.get("correctable"), aer_now.get("correctable"))
    if corrected >= AER_CORRECTABLE_TOTAL or corrected / (seconds / 60) > AER_CORRECTABLE_PER_MIN:
        out.append((label, f"{label}: {corrected} correctable PCIe AER errors in {seconds:.0f} s "
                    f"(> {AER_CORRECTABLE_PER_MIN:g}/min or >= {AER_CORRECTABLE_TOTAL} fails)"))  # fmt: skip
    for kind in ("nonfatal", "fatal"):
        if n := _grew(aer_then.get(kind), aer_now.get(kind)):
            out.append((label, f"{label}: {n} {kind} PCIe AER errors during the run (any fails)"))
    return out


def _link_problems(
    label: str, then: dict[str, Any], now: dict[str, Any], seconds: float
) -> list[tuple[str, str]]:
    where = f"{label}: NVLink link {now.get('link')}"
    out = [
        (label, f"{where}: {n} {key} errors during the run (any fails)")
        for key in ("replay", "recovery")
        if (n := _grew(then.get(key), now.get(key)))
    ]
    crc = _grew(then.get("crc_flit"), now.get("crc_flit")) + _grew(then.get("crc_data"), now.get("crc_data"))
    if crc / seconds >= NVLINK_CRC_PER_S:
        out.append((label, f"{where}: {crc} CRC errors in {seconds:.0f} s (>= {NVLINK_CRC_PER_S:g}/s fails)"))
    return out


def port_problems(
    before: list[dict[str, Any]], after: list[dict[str, Any]], seconds: float
) -> list[tuple[str, str]]:
    """Each RDMA port whose counters grew past their gate, or that left ACTIVE, over the run."""
    then = {(p.get("device"), p.get("port")): p for p in before}
    out = []
    for port in after:
        old = then.get((port.get("device"), port.get("port")))
        if old is None:
            continue
        name = f"{port.get('device')} port {port.get('port')}"
        if old.get("state") == "ACTIVE" and port.get("state") != "ACTIVE":
            out.append((name, f"{name}: went from ACTIVE to {port.get('state')} during the run"))
        c0, c1 = old.get("counters") or {}, port.get("counters") or {}
        for key in PORT_ANY:
            if n := _grew(c0.get(key), c1.get(key)):
                out.append((name, f"{name}: {key} +{n} during the run (any fails)"))
        for key, limit in PORT_PER_S.items():
            if (n := _grew(c0.get(key), c1.get(key))) / seconds > limit:
                out.append((name, f"{name}: {key} +{n} in {seconds:.0f} s (> {limit:g}/s fails)"))
        for key, limit in PORT_PER_MIN.items():
            if (n := _grew(c0.get(key), c1.get(key))) / (seconds / 60) > limit:
                out.append((name, f"{name}: {key} +{n} in {seconds:.0f} s (> {limit:g}/min fails)"))
    return out
