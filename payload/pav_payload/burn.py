"""``burn`` subcommand (gpu_burn): every GPU of the host under sustained bf16 GEMM and HBM copy load for
the burn-in's duration, in windows; an all_reduce across the host's GPUs every few windows (its result
checked); NVML sampled beside it (burn_sampler.py); the SDC check (sdc.py) at the start and the end.

Each window records this GPU's GEMM TFLOP/s (CUDA events around the GEMMs: time the GPU spent on them,
shared with anything else running there), its HBM copy GB/s, and what the samples of that window saw.
The driver judges the series (src/pav/thresholds/burn_in.py); a rank fails here only for wrong results:
an all_reduce sum or an SDC mismatch. On CPU the same code runs (gloo, fp32, timed with perf_counter).
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import asdict, dataclass
from typing import Any

import torch
import torch.distributed as dist

from pav_payload import sdc
from pav_payload.burn_sampler import Sample, Sampler
from pav_payload.probe_measure import describe_device
from pav_payload.runner import Outcome
from pav_payload.session import Session

MIB = 1 << 20


@dataclass(frozen=True)
class BurnConfig:
    duration_s: float
    window_s: float
    sample_s: float
    gemm_n: int
    gemm_per_step: int
    hbm_mib: int
    allreduce_every: int
    allreduce_mib: float

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> BurnConfig:
        cfg = cls(args.duration_s, args.window_s, args.sample_s, args.gemm_n, args.gemm_per_step,
                  args.hbm_mib, args.allreduce_every, args.allreduce_mib)  # fmt: skip
        if cfg.duration_s <= 0 or cfg.window_s <= 0 or cfg.sample_s <= 0:
            raise ValueError("--duration-s, --window-s and --sample-s must be > 0")
        if min(cfg.gemm_n, cfg.gemm_per_step, cfg.hbm_mib, cfg.allreduce_every) < 1 or cfg.allreduce_mib <= 0:
            raise ValueError("--gemm-n, --gemm-per-step, --hbm-mib, --allreduce-every, --allreduce-mib >= 1")
        return cfg

    @property
    def windows(self) -> int:
        return max(1, math.ceil(self.duration_s / self.window_s - 1e-9))


@dataclass
class Window:
    index: int
    start_s: float
    end_s: float
    tflops: float
    hbm_gbps: float
    steps: int
    sm_clock_min_mhz: int | None = None
    temp_max_c: int | None = None
    power_max_w: float | None = None
    reasons: tuple[str, ...] = ()
    ecc_uncorrected: int | None = None
    ecc_corrected: int | None = None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--duration-s", type=float, required=True, help="the burn-in's length in seconds")
    parser.add_argument("--window-s", type=float, default=30.0, help="seconds per measured window")
    parser.add_argument("--sample-s", type=float, default=2.0, help="seconds between NVML samples")
    parser.add_argument("--gemm-n", type=int, default=8192, help="square bf16 matmul size (fp32 on CPU)")
    parser.add_argument("--gemm-per-step", type=int, default=8, help="matmuls between two HBM copies")
    parser.add_argument("--hbm-mib", type=int, default=1024, help="device-to-device copy per step, MiB")
    parser.add_argument("--allreduce-every", type=int, default=2, help="an all_reduce every N windows")
    parser.add_argument("--allreduce-mib", type=float, default=64.0, help="all_reduce size, MiB")
    sdc.add_arguments(parser)


def run_burn(args: argparse.Namespace, session: Session) -> Outcome:
    cfg, sdc_cfg = BurnConfig.from_args(args), sdc.SdcConfig.from_args(args)
    # Before CUDA starts: number the GPUs as NVML and nvidia-smi do, so burn-in GPU 1 is facts.gpus GPU 1.
    sdc.deterministic_env()
    device = session.start_distributed(args.backend, args.timeout_s)
    ident = describe_device(device)
    local = session.info.local_rank
    label = sdc.gpu_label(device, ident, local)
    at_start = sdc.check(device, sdc_cfg, local, label)
    t0 = time.monotonic()
    sampler = Sampler(ident.get("pci_bus_id"), cfg.sample_s, cfg.window_s, t0).start()
    try:
        windows, checks, wrong = run_windows(device, cfg, t0)
    finally:
        sampled = sampler.stop()
    at_end = sdc.check(device, sdc_cfg, local, label)
    attach_samples(windows, sampled.samples)
    mismatches = at_start.mismatches + at_end.mismatches
    metrics: dict[str, Any] = {
        "gpu": {str(local): ident},
        "device_type": device.type,
        "config": asdict(cfg),
        "windows": [asdict(w) for w in windows],
        **sampled.record(),
        "allreduce_checks": checks,
        "wrong_total": wrong,
        "sdc": {"start": at_start.record(), "end": at_end.record()},
        "sdc_mismatches": len(mismatches),
    }
    checked = (("start", at_start.reason), ("end", at_end.reason))
    reasons = [f"{reason} (the SDC check at the burn-in's {when})" for when, reason in checked if reason]
    if wrong:
        reasons.append(f"{label}: {wrong} wrong elements in the burn-in's all_reduce results")
    return Outcome("fail" if reasons else "pass", "; ".join(reasons), metrics)


def run_windows(device: torch.device, cfg: BurnConfig, t0: float) -> tuple[list[Window], int, int]:
    """The windows, each ending at its deadline from t0 (a slowed GPU does fewer steps, never more
    windows), so every rank reaches each all_reduce together."""
    load = Load(device, cfg)
    windows: list[Window] = []
    checks = wrong = 0
    for index in range(cfg.windows):
        start = time.monotonic()
        deadline = t0 + min((index + 1) * cfg.window_s, cfg.duration_s)
        gemm_s = copy_s = 0.0
        steps = 0
        while steps == 0 or time.monotonic() < deadline:
            g, c = load.step()
            gemm_s, copy_s, steps = gemm_s + g, copy_s + c, steps + 1
        flops = 2.0 * cfg.gemm_n**3 * cfg.gemm_per_step * steps
        copied = 2.0 * load.hbm_bytes * steps  # read and written
        windows.append(Window(index, round(start - t0, 3), round(time.monotonic() - t0, 3),
                              _figure(flops / max(gemm_s, 1e-9) / 1e12),
                              _figure(copied / max(copy_s, 1e-9) / 1e9), steps))  # fmt: skip
        if (index + 1) % cfg.allreduce_every == 0 or index == cfg.windows - 1:
            wrong += allreduce_check(device, cfg.allreduce_mib)
            checks += 1
    return windows, checks, wrong


class Load:
    """One step: gemm_per_step matmuls, then one HBM copy; each timed on the device."""

    def __init__(self, device: torch.device, cfg: BurnConfig) -> None:
        self.device, self.cfg = device, cfg
        dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
        n = cfg.gemm_n
        # Random data: zeros draw less power, and the burn-in is about the GPU at full power.
        self.a = torch.randn(n, n, device=device, dtype=dtype)
        self.b = torch.randn(n, n, device=device, dtype=dtype)
        self.c = torch.empty(n, n, device=device, dtype=dtype)
        self.hbm_bytes = cfg.hbm_mib * MIB
        self.src = torch.randint(0, 256, (self.hbm_bytes,), dtype=torch.uint8, device=device)
        self.dst = torch.empty_like(self.src)

    def step(self) -> tuple[float, float]:
        """Seconds spent on the GEMMs and on the copy."""
        if self.device.type != "cuda":
            start = time.perf_counter()
            self._gemms()
            mid = time.perf_counter()
            self.dst.copy_(self.src)
            return mid - start, time.perf_counter() - mid
        events = [torch.cuda.Event(enable_timing=True) for _ in range(3)]
        events[0].record()
        self._gemms()
        events[1].record()
        self.dst.copy_(self.src)
        events[2].record()
        events[2].synchronize()
        return events[0].elapsed_time(events[1]) / 1e3, events[1].elapsed_time(events[2]) / 1e3

    def _gemms(self) -> None:
        for _ in range(self.cfg.gemm_per_step):
            torch.matmul(self.a, self.b, out=self.c)


def allreduce_check(device: torch.device, mib: float) -> int:
    """Wrong elements of an all_reduce of (rank + 1) everywhere: the sum is exact in fp32."""
    if not dist.is_initialized():
        return 0
    world, rank = dist.get_world_size(), dist.get_rank()
    count = max(1, int(mib * MIB) // 4)
    tensor = torch.full((count,), float(rank + 1), dtype=torch.float32, device=device)
    dist.all_reduce(tensor)
    return int((tensor != float(world * (world + 1) // 2)).sum().item())


def attach_samples(windows: list[Window], samples: list[Sample]) -> None:
    """Each window's extremes of the samples taken during it (the last window also takes the stop's)."""
    for position, window in enumerate(windows):
        last = position == len(windows) - 1
        inside = [
            s for s in samples if window.start_s <= s.t_s < window.end_s or (last and s.t_s >= window.end_s)
        ]
        if not inside:
            continue
        window.sm_clock_min_mhz = _least([s.sm_mhz for s in inside])
        window.temp_max_c = _most([s.temp_c for s in inside])
        window.power_max_w = _most([s.power_w for s in inside])
        window.reasons = tuple(sorted({r for s in inside for r in s.reasons}))
        window.ecc_uncorrected = _most([s.ecc_uncorrected for s in inside])
        window.ecc_corrected = _most([s.ecc_corrected for s in inside])


def _least(values: list[Any]) -> Any:
    present = [v for v in values if v is not None]
    return min(present) if present else None


def _most(values: list[Any]) -> Any:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def _figure(value: float) -> float:
    return float(f"{value:.4g}")
