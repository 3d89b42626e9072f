"""The per-GPU metrics of a run (pav.reporting.metrics): each GPU's identity, its verdict, and the probe's
figures per GPU and per GPU pair (and the burn-in's per GPU), in base units."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pav.reporting.bad_parts import BadPart
from pav.reporting.exposition import Family

GPU_PART = re.compile(r"GPU (\d+)(?: \(|$)")
TERA, GB = 1e12, 1e9  # results.json's TFLOP/s and GB/s (GB = 1e9 bytes, as the datasheets count)
HOST_COPY = ("pav_gpu_host_copy_bytes_per_second", "copy over PCIe, one GPU at a time")


@dataclass(frozen=True)
class PerGpu:
    """A probe metric keyed by GPU index, as a family in its base unit."""

    family: str
    help: str
    scale: float  # to the base unit
    labels: tuple[tuple[str, str], ...] = ()  # the variant of the family's figure


PER_GPU = {
    "gemm_bf16_tflops": PerGpu(
        "pav_gpu_gemm_bf16_flops_per_second",
        "dense bf16 matrix multiply, floating-point operations per second (277 TFLOP/s is 2.77e14)",
        TERA,
    ),
    "hbm_copy_gbps": PerGpu("pav_gpu_memory_copy_bytes_per_second", "device memory copy (read + write)", GB),
    "h2d_gbps": PerGpu(*HOST_COPY, GB, (("direction", "host_to_device"),)),
    "d2h_gbps": PerGpu(*HOST_COPY, GB, (("direction", "device_to_host"),)),
    # The burn-in (gpu_burn): where each GPU ended, and how low its clock went on the way.
    "burn_in_last_tflops": PerGpu(
        "pav_gpu_burn_in_gemm_flops_per_second", "bf16 matrix multiply in the burn-in's last window", TERA
    ),
    "burn_in_sm_mhz_min": PerGpu(
        "pav_gpu_burn_in_sm_clock_min_hertz", "lowest SM clock NVML read during the burn-in", 1e6
    ),
}
PAIRS = ("p2p_gbps", "pav_gpu_peer_copy_bytes_per_second", "copy from the GPU to its peer_gpu")


def gpu_families(
    results: dict[str, Any], env: str, parts: list[BadPart], host_verdicts: dict[str, str]
) -> list[Family]:
    info = Family("pav_gpu_info", "a GPU of the host: its model, UUID and PCI bus id")
    verdict = Family("pav_gpu_verdict", "1 for the GPU's verdict (NONE: no gate of its own judged), 0 else")
    figures = {spec.family: Family(spec.family, spec.help) for spec in PER_GPU.values()}
    pairs = Family(PAIRS[1], PAIRS[2])
    failed = {(h, i) for p in parts if p.kind == "gpu" and (i := gpu_index(p.part)) for h in p.hosts}
    passed = _passed(results)
    for host in host_verdicts:
        gpus = _identities(host, results)
        for index, ident in gpus.items():
            info.add(1, env=env, host=host, gpu=index, **ident)
            judged = "FAIL" if (host, index) in failed else "PASS" if (host, index) in passed else "NONE"
            for state in ("PASS", "FAIL", "NONE"):
                verdict.add(1 if state == judged else 0, env=env, host=host, gpu=index, verdict=state)
        for test, metrics in _tests_on(host, results):
            for metric, spec in PER_GPU.items():
                for index, value in _per_gpu(metrics.get(metric)):
                    labels = {"env": env, "host": host, "gpu": index, "test": test, **dict(spec.labels)}
                    figures[spec.family].add(value * spec.scale, **labels)
            for index, peers in _nested(metrics.get(PAIRS[0])):
                for peer, value in _per_gpu(peers):
                    pairs.add(value * GB, env=env, host=host, gpu=index, peer_gpu=peer, test=test)
    return [info, verdict, *figures.values(), pairs]


def gpu_index(part: str) -> str | None:
    """The index of the one GPU a gate's or bad part's `part` names ("GPU 1 (bus id, uuid)"); None for a
    pair, a port, the host or the fabric."""
    found = GPU_PART.match(part)
    return found.group(1) if found and " -> " not in part else None


def number(value: Any) -> float | None:
    return None if isinstance(value, bool) or not isinstance(value, int | float) else float(value)


def _identities(host: str, results: dict[str, Any]) -> dict[str, dict[str, str]]:
    """index -> model, uuid, pci_bus_id: from the NVML facts, else nvidia-smi's, else the probe's own."""
    facts = ((results.get("hosts") or {}).get(host) or {}).get("facts") or {}
    found: dict[str, dict[str, str]] = {}
    for dev in (facts.get("gpus") or {}).get("devices") or []:
        found[str(dev.get("index"))] = _ident(dev.get("name"), dev.get("uuid"), dev.get("pci_bus_id"))
    for row in (facts.get("gpu") or {}).get("devices") or []:
        if isinstance(row, list) and len(row) > 4 and str(row[0]) not in found:
            found[str(row[0])] = _ident(row[1], None, row[4])
    for _, metrics in _tests_on(host, results):
        for index, dev in _nested(metrics.get("gpu")):
            found.setdefault(index, _ident(dev.get("name"), dev.get("uuid"), dev.get("pci_bus_id")))
    return dict(sorted(found.items(), key=lambda item: (len(item[0]), item[0])))


def _ident(model: Any, uuid: Any, bus: Any) -> dict[str, str]:
    return {"model": str(model or ""), "uuid": str(uuid or ""), "pci_bus_id": str(bus or "")}


def _passed(results: dict[str, Any]) -> set[tuple[str, str]]:
    """(host, GPU index) of every GPU with a gate of its own judged and passed on a host test."""
    out = set()
    for test in results.get("tests") or []:
        for gate in (test.get("threshold") or {}).get("gates") or []:
            index = gpu_index(str(gate.get("part") or ""))
            if index is not None and gate.get("status") == "pass":
                out |= {(str(h), index) for h in test.get("hosts") or []}
    return out


def _tests_on(host: str, results: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(test, metrics) of the tests that ran on the host alone: per-GPU figures are one host's."""
    return [
        (str(t.get("name")), t.get("metrics") or {})
        for t in results.get("tests") or []
        if t.get("hosts") == [host] and t.get("status") in ("pass", "fail")
    ]


def _per_gpu(table: Any) -> list[tuple[str, float]]:
    if not isinstance(table, dict):
        return []
    return [(str(k), v) for k, raw in table.items() if (v := number(raw)) is not None]


def _nested(table: Any) -> list[tuple[str, dict[str, Any]]]:
    if not isinstance(table, dict):
        return []
    return [(str(k), v) for k, v in table.items() if isinstance(v, dict)]
