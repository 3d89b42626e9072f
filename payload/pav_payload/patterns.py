"""Rank-dependent fill values whose collective results are exactly predictable.

Every value is a small integer that the dtype represents exactly, and reductions are arranged so that each
element has a single non-zero contributor: then every partial sum, in whatever order the library reduces,
is exact, so the check can demand bit equality even in bfloat16 and at any world size.
"""

import math

import torch

# Written into output buffers before the checked run so that an output the op never wrote is caught;
# every expected value is >= 1.
SENTINEL = -1.0


def exact_limit(dtype: torch.dtype) -> int:
    """Integers 1..limit are exactly representable in ``dtype``."""
    return round(2 / torch.finfo(dtype).eps)


def rank_value(rank: int, dtype: torch.dtype) -> float:
    return float(rank % exact_limit(dtype) + 1)


def rank_values(world: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    return (torch.arange(world, device=device) % exact_limit(dtype) + 1).to(dtype)


def fill_owned(buf: torch.Tensor, rank: int, world: int) -> None:
    """Element i belongs to rank i % world: the owner writes its value there, everybody else zero."""
    buf.zero_()
    buf[rank::world] = rank_value(rank, buf.dtype)


def owned_sum(count: int, world: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """The sum over all ranks of ``fill_owned`` buffers of ``count`` elements."""
    return rank_values(world, dtype, device).repeat(math.ceil(count / world))[:count]


def exchange_codes(
    senders: torch.Tensor | int, receivers: torch.Tensor | int, world: int, dtype: torch.dtype
) -> torch.Tensor:
    """A value per (sender, receiver) pair, so all-to-all blocks that land in the wrong place show up.

    Unique while world**2 fits the dtype's exact range (world <= 4096 in float32, 16 in bfloat16).
    """
    return ((senders * world + receivers) % exact_limit(dtype) + 1).to(dtype)
