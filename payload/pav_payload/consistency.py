"""Whether every rank holds bit-identical parameters: DDP replicas, or FSDP shards gathered on each rank."""

import sys
from collections.abc import Iterable, Iterator

import torch
import torch.distributed as dist
from torch import nn

_SAME_WIDTH_INT = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def full_parameters(model: nn.Module) -> Iterator[torch.Tensor]:
    """The model's parameters, whole: an FSDP shard (a DTensor) is all-gathered, one parameter at a time.

    Collective for sharded models: every rank must consume the iterator in step.
    """
    for param in model.parameters():
        whole = param.detach()
        yield whole.full_tensor() if _is_dtensor(whole) else whole


def _is_dtensor(tensor: torch.Tensor) -> bool:
    # Only FSDP makes DTensors, and it imports their module: a process without it never pays that import
    # (DTensor pulls in torch.fx, ~0.6 s of a CPU core per rank).
    module = sys.modules.get("torch.distributed.tensor")
    return module is not None and isinstance(tensor, module.DTensor)


def param_checksum(params: Iterable[torch.Tensor]) -> torch.Tensor:
    """Sum of the parameters' raw bit patterns: exact and order-independent, unlike a float sum."""
    total: torch.Tensor | None = None
    for param in params:
        bits = param.contiguous().view(_SAME_WIDTH_INT[param.element_size()]).to(torch.int64).sum()
        total = bits if total is None else total + bits
    if total is None:
        raise ValueError("the model has no parameters")
    return total


def checksum_spread(checksum: torch.Tensor) -> int:
    """max - min of the checksum over all ranks; 0 when every replica agrees."""
    high, low = checksum.clone(), checksum.clone()
    dist.all_reduce(high, op=dist.ReduceOp.MAX)
    dist.all_reduce(low, op=dist.ReduceOp.MIN)
    return int(high.item()) - int(low.item())
