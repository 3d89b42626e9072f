"""How the model is spread over ranks: not at all (single), replicated (DDP) or sharded (FSDP2)."""

import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel


@dataclass(frozen=True)
class WrapOptions:
    bf16: bool = False  # FSDP only: compute in bfloat16, reduce gradients in float32 (CUDA only)


@dataclass(frozen=True)
class Mode:
    distributed: bool
    wrap: Callable[[nn.Module, torch.device, WrapOptions], nn.Module]


def _single(model: nn.Module, _device: torch.device, _options: WrapOptions) -> nn.Module:
    return model


def _ddp(model: nn.Module, device: torch.device, _options: WrapOptions) -> nn.Module:
    device_ids = [device.index] if device.type == "cuda" else None
    # No buffer broadcast before each forward: BatchNorm's running statistics are not gradients (training
    # reads the batch's own), and the broadcast is a synchronisation per step that cost ResNet-50 3.3 ms of
    # a 33 ms step on 2x H200 (scripts/bench-ddp). Replicas stay equal: the parameter checksum checks it.
    return DistributedDataParallel(model, device_ids=device_ids, broadcast_buffers=False)


def _fsdp(model: nn.Module, device: torch.device, options: WrapOptions) -> nn.Module:
    """FSDP2: every parameter becomes a DTensor sharded on dim 0 over all ranks, gathered per unit."""
    if options.bf16 and device.type != "cuda":
        raise ValueError("--fsdp-bf16 needs CUDA (the nccl backend)")
    # Imported here: FSDP pulls in DTensor and torch.fx (~0.7 s a process on a CPU core), which every
    # other launch of every rank would pay for nothing.
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    # Named explicitly: the default mesh follows the machine's accelerator, not the backend chosen.
    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
    block_policy = root_policy = MixedPrecisionPolicy()
    if options.bf16:
        block_policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        # Logits leave the root in float32, so the loss is computed as in the float32 run.
        root_policy = MixedPrecisionPolicy(
            param_dtype=torch.bfloat16, reduce_dtype=torch.float32, output_dtype=torch.float32
        )
    # The logits are a view (Linear on 3-D input); FSDP2 warns that an in-place op on them would skip the
    # backward all-gather. The loss only reads them, so the warning is noise on every rank.
    warnings.filterwarnings("ignore", message=r"FSDP2-wrapped module .* returned a view tensor")
    units: list[nn.Module] = model.shard_units() if hasattr(model, "shard_units") else []
    for unit in units:
        fully_shard(unit, mesh=mesh, mp_policy=block_policy)
    fully_shard(model, mesh=mesh, mp_policy=root_policy)
    return model


_MODES = {
    "ddp": Mode(distributed=True, wrap=_ddp),
    "fsdp": Mode(distributed=True, wrap=_fsdp),
    "single": Mode(distributed=False, wrap=_single),
}
MODES = tuple(_MODES)


def get_mode(name: str) -> Mode:
    if name not in _MODES:
        raise ValueError(f"unknown mode {name!r}; choose from {', '.join(MODES)}")
    return _MODES[name]
