"""Per-iteration timing of a collective, in microseconds."""

import time
from collections.abc import Callable

import torch
import torch.distributed as dist


def time_iterations(op: Callable[[], None], iters: int, device: torch.device) -> list[float]:
    if device.type == "cuda":
        return _cuda_times(op, iters, device)
    return _host_times(op, iters)


def _cuda_times(op: Callable[[], None], iters: int, device: torch.device) -> list[float]:
    # Device-side events, launched back to back like nccl-tests: host launch jitter stays out of the
    # figure, and in steady state each interval covers exactly one op on the stream.
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    dist.barrier()
    torch.cuda.synchronize(device)
    for start, end in zip(starts, ends, strict=True):
        start.record()
        op()
        end.record()
    torch.cuda.synchronize(device)
    return [start.elapsed_time(end) * 1000.0 for start, end in zip(starts, ends, strict=True)]


def _host_times(op: Callable[[], None], iters: int) -> list[float]:
    times = []
    for _ in range(iters):
        # Line the ranks up first, or the fastest rank's figure would include waiting for the slowest.
        dist.barrier()
        start = time.perf_counter()
        op()
        times.append((time.perf_counter() - start) * 1e6)
    return times
