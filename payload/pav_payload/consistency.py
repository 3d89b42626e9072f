"""Whether data-parallel replicas still hold bit-identical parameters."""

import torch
import torch.distributed as dist
from torch import nn

_SAME_WIDTH_INT = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def param_checksum(model: nn.Module) -> torch.Tensor:
    """Sum of the parameters' raw bit patterns: exact and order-independent, unlike a float sum."""
    first = next(model.parameters())
    total = torch.zeros((), dtype=torch.int64, device=first.device)
    for param in model.parameters():
        bits = param.detach().contiguous().view(_SAME_WIDTH_INT[param.element_size()])
        total += bits.to(torch.int64).sum()
    return total


def checksum_spread(checksum: torch.Tensor) -> int:
    """max - min of the checksum over all ranks; 0 when every replica agrees."""
    high, low = checksum.clone(), checksum.clone()
    dist.all_reduce(high, op=dist.ReduceOp.MAX)
    dist.all_reduce(low, op=dist.ReduceOp.MIN)
    return int(high.item()) - int(low.item())
