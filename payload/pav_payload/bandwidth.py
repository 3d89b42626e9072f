"""Bandwidth arithmetic following nccl-tests (doc/PERFORMANCE.md there).

algbw is bytes moved per second from the caller's point of view; busbw rescales it by the traffic each
rank's link must carry in an optimal algorithm, so that it is comparable with the hardware link speed
whatever the number of ranks.
"""

from collections.abc import Callable

_BUS_FACTORS: dict[str, Callable[[int], float]] = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "send_recv": lambda n: 1.0,
}

OPS: tuple[str, ...] = tuple(_BUS_FACTORS)


def bus_factor(op: str, world_size: int) -> float:
    if op not in _BUS_FACTORS:
        raise ValueError(f"unknown op {op!r}")
    if world_size < 1:
        raise ValueError(f"world size must be positive, got {world_size}")
    return _BUS_FACTORS[op](world_size)


def algbw_gbps(size_bytes: int, time_us: float) -> float:
    """GB/s with GB = 1e9 bytes, as nccl-tests reports."""
    return size_bytes / (time_us * 1e-6) / 1e9


def busbw_gbps(op: str, world_size: int, size_bytes: int, time_us: float) -> float:
    return algbw_gbps(size_bytes, time_us) * bus_factor(op, world_size)
