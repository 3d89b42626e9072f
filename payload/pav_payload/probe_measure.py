"""The probe's measurements (probe.py runs them, probe_workers.py in a process per GPU): bf16 GEMM, HBM
copy, host<->device copies and GPU-to-GPU copies, each checked for wrong bytes, each timed by its median.

Every measurement takes torch devices and sizes, so its arithmetic runs on CPU too (timed with
perf_counter, one device after the other), which is how the tests exercise it.
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import platform
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from pav_payload.gpu_facts.decode import normalize_bus_id, nvml_text

MIB = 1 << 20

# A device and the operation to time on it; the operation only launches work (asynchronous on CUDA).
Work = tuple[torch.device, Callable[[], object]]


@dataclass(frozen=True)
class ProbeSizes:
    gemm_n: int
    hbm_bytes: int
    host_bytes: int
    p2p_bytes: int

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ProbeSizes:
        sizes = cls(args.gemm_n, args.hbm_mib * MIB, args.host_mib * MIB, args.p2p_mib * MIB)
        if min(asdict(sizes).values()) < 1:
            raise ValueError("--gemm-n, --hbm-mib, --host-mib and --p2p-mib must be >= 1")
        return sizes


@dataclass(frozen=True)
class Repeats:
    warmup: int
    iters: int

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Repeats:
        if args.iters < 1 or args.warmup < 0:
            raise ValueError("--iters must be >= 1 and --warmup >= 0")
        return cls(args.warmup, args.iters)


@dataclass
class Checks:
    """Elements that differ from what was copied, by copy; every copy the probe times is checked once."""

    wrong: dict[str, int] = field(default_factory=dict)

    def add(self, what: str, count: int) -> None:
        self.wrong[what] = self.wrong.get(what, 0) + count

    @property
    def total(self) -> int:
        return sum(self.wrong.values())

    def summary(self, shown: int = 3) -> str:
        bad = [f"{what} ({count} wrong)" for what, count in self.wrong.items() if count]
        if not bad:
            return ""
        more = f" and {len(bad) - shown} more" if len(bad) > shown else ""
        return f"wrong bytes in {len(bad)} of {len(self.wrong)} copies: {', '.join(bad[:shown])}{more}"


def measure_gemm(devices: Sequence[torch.device], n: int, repeats: Repeats) -> dict[str, float]:
    """Dense bf16 n x n x n matmul, TFLOP/s (2 n^3 flops), on random data: zeros would draw less power."""
    work: dict[str, Work] = {}
    for key, device in _keyed(devices):
        a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
        b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
        out = torch.empty(n, n, device=device, dtype=torch.bfloat16)
        work[key] = (device, _matmul(a, b, out))
    seconds = median_seconds(work, repeats)
    return {key: tflops(n, s) for key, s in seconds.items()}


def measure_hbm_copy(
    devices: Sequence[torch.device], nbytes: int, repeats: Repeats, checks: Checks
) -> dict[str, float]:
    """A copy within each GPU's memory, GB/s counting what it reads and writes: 2 * bytes / time."""
    buffers = {
        key: (random_bytes(nbytes, d), torch.zeros(nbytes, dtype=torch.uint8, device=d))
        for key, d in _keyed(devices)
    }
    work = {key: (devices[int(key)], _copy(dst, src)) for key, (src, dst) in buffers.items()}
    seconds = median_seconds(work, repeats)
    for key, (src, dst) in buffers.items():
        checks.add(f"HBM copy on GPU {key}", count_wrong(dst, src))
    return {key: gbps(2 * nbytes, s) for key, s in seconds.items()}


def measure_host_copies(
    devices: Sequence[torch.device], nbytes: int, repeats: Repeats, checks: Checks
) -> tuple[dict[str, float], dict[str, float]]:
    """Host->device and device->host through pinned memory (what DMA does without a staging copy), GB/s."""
    pinned = all(d.type == "cuda" for d in devices)
    buffers: dict[str, tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]] = {}
    for key, device in _keyed(devices):
        on_device = random_bytes(nbytes, device)
        host_src = torch.empty(nbytes, dtype=torch.uint8, pin_memory=pinned)
        host_src.copy_(on_device)  # random bytes made on the GPU: far faster than on the CPU
        landed = torch.zeros(nbytes, dtype=torch.uint8, device=device)
        host_dst = torch.zeros(nbytes, dtype=torch.uint8, pin_memory=pinned)
        buffers[key] = (host_src, landed, on_device, host_dst)
    h2d = median_seconds(
        {k: (devices[int(k)], _copy(b[1], b[0], async_=True)) for k, b in buffers.items()}, repeats
    )
    d2h = median_seconds(
        {k: (devices[int(k)], _copy(b[3], b[2], async_=True)) for k, b in buffers.items()}, repeats
    )
    for key, (host_src, landed, on_device, host_dst) in buffers.items():
        checks.add(f"host->device copy to GPU {key}", count_wrong(landed, host_src))
        checks.add(f"device->host copy from GPU {key}", count_wrong(host_dst, on_device))
    return (
        {key: gbps(nbytes, s) for key, s in h2d.items()},
        {key: gbps(nbytes, s) for key, s in d2h.items()},
    )


def measure_p2p(
    devices: Sequence[torch.device], nbytes: int, repeats: Repeats, checks: Checks
) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, bool]]]:
    """Each ordered pair i -> j alone: a buffer on i copied to j, GB/s (bytes / time); and whether CUDA
    offers direct peer access between them (without it the copy is staged through the host)."""
    if len(devices) < 2:
        return {}, {}  # no pair to measure
    sources = [random_bytes(nbytes, d) for d in devices]
    targets = [torch.zeros(nbytes, dtype=torch.uint8, device=d) for d in devices]
    rates: dict[str, dict[str, float]] = {}
    access: dict[str, dict[str, bool]] = {}
    for i, j in itertools.permutations(range(len(devices)), 2):
        # Timed on the source GPU's stream: torch runs a cross-device copy there.
        seconds = median_seconds({"pair": (devices[i], _copy(targets[j], sources[i]))}, repeats)["pair"]
        rates.setdefault(str(i), {})[str(j)] = gbps(nbytes, seconds)
        access.setdefault(str(i), {})[str(j)] = peer_access(devices[i], devices[j])
        # Each source holds other random bytes, so a copy that did not happen cannot pass as one.
        checks.add(f"GPU {i} -> GPU {j} copy", count_wrong(targets[j], sources[i]))
    return rates, access


def describe_devices(devices: Sequence[torch.device]) -> dict[str, dict[str, str | None]]:
    return {key: describe_device(device) for key, device in _keyed(devices)}


def describe_device(device: torch.device) -> dict[str, str | None]:
    if device.type != "cuda":
        return {"name": platform.processor() or platform.machine(), "uuid": None, "pci_bus_id": None}
    props = torch.cuda.get_device_properties(device)
    uuid, bus = _uuid_text(getattr(props, "uuid", None)), _props_bus_id(props)
    if uuid is None or bus is None:
        nvml_uuid, nvml_bus = _nvml_ids(device.index, uuid)
        uuid, bus = uuid or nvml_uuid, bus or nvml_bus
    return {"name": props.name, "uuid": uuid, "pci_bus_id": bus}


# --- building blocks --------------------------------------------------------------------------------------


def median_seconds(work: Mapping[str, Work], repeats: Repeats) -> dict[str, float]:
    """Median seconds of one run of each operation, after warm-up runs."""
    if work and all(device.type == "cuda" for device, _ in work.values()):
        return _cuda_medians(work, repeats)
    return _host_medians(work, repeats)


def _cuda_medians(work: Mapping[str, Work], repeats: Repeats) -> dict[str, float]:
    for _ in range(repeats.warmup):
        _launch_round(work, None)
    _synchronize_all()
    rounds: list[dict[str, tuple[torch.cuda.Event, torch.cuda.Event]]] = []
    for _ in range(repeats.iters):
        events = {
            key: (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for key in work
        }
        _launch_round(work, events)
        rounds.append(events)
    # Also the devices an operation only waits on (a copy's destination), so no work outlives the timing.
    _synchronize_all()
    return {
        key: statistics.median(start.elapsed_time(end) for start, end in (r[key] for r in rounds)) / 1e3
        for key in work
    }


def _launch_round(
    work: Mapping[str, Work], events: dict[str, tuple[torch.cuda.Event, torch.cuda.Event]] | None
) -> None:
    """One run of every operation, each on its own device's current stream; nothing here waits for a GPU,
    so all devices run at once. Events around each launch time it on that device alone."""
    for key, (device, op) in work.items():
        with torch.cuda.device(device):
            if events is None:
                op()
                continue
            start, end = events[key]
            start.record()
            op()
            end.record()


def _synchronize_all() -> None:
    for index in range(torch.cuda.device_count()):
        torch.cuda.synchronize(index)


def _host_medians(work: Mapping[str, Work], repeats: Repeats) -> dict[str, float]:
    medians = {}
    for key, (_device, op) in work.items():
        for _ in range(repeats.warmup):
            op()
        times = []
        for _ in range(repeats.iters):
            start = time.perf_counter()
            op()
            times.append(time.perf_counter() - start)
        medians[key] = statistics.median(times)
    return medians


def random_bytes(nbytes: int, device: torch.device) -> torch.Tensor:
    return torch.randint(0, 256, (nbytes,), dtype=torch.uint8, device=device)


def count_wrong(got: torch.Tensor, want: torch.Tensor) -> int:
    """Elements of ``got`` that differ from ``want`` (brought to got's device first); every one counts."""
    if got.shape != want.shape:
        return max(got.numel(), want.numel())
    return int((got != want.to(got.device)).sum().item())


def peer_access(src: torch.device, dst: torch.device) -> bool:
    if src.type != "cuda" or dst.type != "cuda":
        return False
    return bool(torch.cuda.can_device_access_peer(src, dst))


def tflops(n: int, seconds: float) -> float:
    return figure(2.0 * n**3 / _positive(seconds) / 1e12)


def gbps(nbytes: int, seconds: float) -> float:
    """GB/s with GB = 1e9 bytes, as NVIDIA's datasheets count."""
    return figure(nbytes / _positive(seconds) / 1e9)


def _positive(seconds: float) -> float:
    # A coarse clock can read 0 for a tiny CPU op: the figure is then large, not a division error.
    return max(seconds, 1e-9)


def figure(value: float) -> float:
    """Four significant digits: the runs differ by more than that, and the JSON stays readable."""
    return float(f"{value:.4g}") if math.isfinite(value) else value


def _keyed(devices: Sequence[torch.device]) -> list[tuple[str, torch.device]]:
    return [(str(position), device) for position, device in enumerate(devices)]


def _matmul(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> Callable[[], object]:
    return lambda: torch.matmul(a, b, out=out)


def _copy(dst: torch.Tensor, src: torch.Tensor, async_: bool = False) -> Callable[[], object]:
    # non_blocking: a pinned host copy then returns at once, so every GPU's copy runs at the same time.
    return lambda: dst.copy_(src, non_blocking=async_)


def _uuid_text(uuid: object) -> str | None:
    if uuid is None:
        return None
    text = str(uuid).strip()
    if not text:
        return None
    return text if text.startswith(("GPU-", "MIG-")) else f"GPU-{text}"


def _props_bus_id(props: Any) -> str | None:
    bus, device, domain = (
        getattr(props, name, None) for name in ("pci_bus_id", "pci_device_id", "pci_domain_id")
    )
    if isinstance(bus, int) and isinstance(device, int):
        return f"{domain or 0:08X}:{bus:02X}:{device:02X}.0"
    return normalize_bus_id(bus) if isinstance(bus, str) and bus else None


def _nvml_ids(index: int | None, uuid: str | None) -> tuple[str | None, str | None]:
    """The GPU's uuid and bus id from NVML, where torch did not give them. By uuid when known; by index
    only when CUDA_VISIBLE_DEVICES is unset, as CUDA's index is NVML's only then (CUDA_DEVICE_ORDER set)."""
    if uuid is None and (index is None or "CUDA_VISIBLE_DEVICES" in os.environ):
        return None, None
    try:
        import pynvml  # type: ignore[import-not-found]  # nvidia-ml-py, on the GPU hosts' image

        pynvml.nvmlInit()
        try:
            handle = (
                pynvml.nvmlDeviceGetHandleByUUID(uuid) if uuid else pynvml.nvmlDeviceGetHandleByIndex(index)
            )
            found_uuid = pynvml.nvmlDeviceGetUUID(handle)
            bus_id = pynvml.nvmlDeviceGetPciInfo(handle).busId
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no pynvml or no NVML: the ids stay null, the figures do not depend on them
        return None, None

    return nvml_text(found_uuid), normalize_bus_id(nvml_text(bus_id))
