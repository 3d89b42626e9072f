"""The six collectives, each as a ready-to-run case with buffers sized the way nccl-tests counts them."""

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist

from pav_payload import patterns

# torch 2.13 renamed the *_into_tensor / *_tensor variants; older CUDA builds on hosts may lack the new names.
_ALL_GATHER = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
_REDUCE_SCATTER = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor

BROADCAST_ROOT = 0


class Skipped(Exception):
    """The op cannot run in this job's shape; the message says why."""


@dataclass(frozen=True)
class Layout:
    rank: int
    world: int
    dtype: torch.dtype
    device: torch.device

    def empty(self, count: int) -> torch.Tensor:
        return torch.empty(count, dtype=self.dtype, device=self.device)


@dataclass(frozen=True)
class Parts:
    run: Callable[[], object]
    # Refills inputs and poisons outputs, so the checked run starts from known data.
    reset: Callable[[], None]
    result: torch.Tensor
    expected: Callable[[], torch.Tensor]


@dataclass(frozen=True)
class Case:
    op: str
    count: int  # elements in the buffer whose size nccl-tests reports
    size_bytes: int
    parts: Parts


def build_case(op: str, size_bytes: int, layout: Layout) -> Case:
    if op not in _BUILDERS:
        raise ValueError(f"unknown op {op!r}")
    per_rank_split, builder = _BUILDERS[op]
    item = torch.empty((), dtype=layout.dtype).element_size()
    # Round down to whole elements (and whole per-rank blocks), never below one per rank.
    if per_rank_split:
        count = max(1, size_bytes // (item * layout.world)) * layout.world
    else:
        count = max(1, size_bytes // item)
    return Case(op, count, count * item, builder(count, layout))


def _all_reduce(count: int, lay: Layout) -> Parts:
    buf = lay.empty(count)
    return Parts(
        run=lambda: dist.all_reduce(buf),
        reset=lambda: patterns.fill_owned(buf, lay.rank, lay.world),
        result=buf,
        expected=lambda: patterns.owned_sum(count, lay.world, lay.dtype, lay.device),
    )


def _reduce_scatter(count: int, lay: Layout) -> Parts:
    # As in nccl-tests, the size is the whole input; each rank keeps 1/world of the reduced result.
    block = count // lay.world
    inp, out = lay.empty(count), lay.empty(block)

    def reset() -> None:
        patterns.fill_owned(inp, lay.rank, lay.world)
        out.fill_(patterns.SENTINEL)

    def expected() -> torch.Tensor:
        total = patterns.owned_sum(count, lay.world, lay.dtype, lay.device)
        return total[lay.rank * block : (lay.rank + 1) * block]

    return Parts(lambda: _REDUCE_SCATTER(out, inp), reset, out, expected)


def _all_gather(count: int, lay: Layout) -> Parts:
    # As in nccl-tests, the size is the whole gathered output.
    block = count // lay.world
    inp, out = lay.empty(block), lay.empty(count)

    def reset() -> None:
        inp.fill_(patterns.rank_value(lay.rank, lay.dtype))
        out.fill_(patterns.SENTINEL)

    def expected() -> torch.Tensor:
        return patterns.rank_values(lay.world, lay.dtype, lay.device).repeat_interleave(block)

    return Parts(lambda: _ALL_GATHER(out, inp), reset, out, expected)


def _all_to_all(count: int, lay: Layout) -> Parts:
    block = count // lay.world
    inp, out = lay.empty(count), lay.empty(count)
    ranks = torch.arange(lay.world, device=lay.device)

    def reset() -> None:
        inp.copy_(patterns.exchange_codes(lay.rank, ranks, lay.world, lay.dtype).repeat_interleave(block))
        out.fill_(patterns.SENTINEL)

    def expected() -> torch.Tensor:
        return patterns.exchange_codes(ranks, lay.rank, lay.world, lay.dtype).repeat_interleave(block)

    return Parts(lambda: dist.all_to_all_single(out, inp), reset, out, expected)


def _broadcast(count: int, lay: Layout) -> Parts:
    buf = lay.empty(count)
    value = patterns.rank_value(BROADCAST_ROOT, lay.dtype)

    def reset() -> None:
        buf.fill_(value if lay.rank == BROADCAST_ROOT else patterns.SENTINEL)

    def expected() -> torch.Tensor:
        return torch.full_like(buf, value)

    return Parts(lambda: dist.broadcast(buf, BROADCAST_ROOT), reset, buf, expected)


def _send_recv(count: int, lay: Layout) -> Parts:
    if lay.world % 2:
        raise Skipped(f"send_recv pairs ranks 2k<->2k+1 and needs an even world size, not {lay.world}")
    peer = lay.rank ^ 1
    send, recv = lay.empty(count), lay.empty(count)

    def run() -> None:
        ops = [dist.P2POp(dist.isend, send, peer), dist.P2POp(dist.irecv, recv, peer)]
        for request in dist.batch_isend_irecv(ops):
            request.wait()

    def reset() -> None:
        send.fill_(patterns.rank_value(lay.rank, lay.dtype))
        recv.fill_(patterns.SENTINEL)

    def expected() -> torch.Tensor:
        return torch.full_like(recv, patterns.rank_value(peer, lay.dtype))

    return Parts(run, reset, recv, expected)


# op -> (whether the size is split into one block per rank, builder)
_BUILDERS: dict[str, tuple[bool, Callable[[int, Layout], Parts]]] = {
    "all_reduce": (False, _all_reduce),
    "all_gather": (True, _all_gather),
    "reduce_scatter": (True, _reduce_scatter),
    "all_to_all": (True, _all_to_all),
    "broadcast": (False, _broadcast),
    "send_recv": (False, _send_recv),
}
