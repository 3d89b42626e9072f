"""How the model is spread over ranks. FSDP slots in as one more entry (its wrapper, distributed=True);
the parameter-consistency check would then have to compare gathered full parameters."""

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel


@dataclass(frozen=True)
class Mode:
    distributed: bool
    wrap: Callable[[nn.Module, torch.device], nn.Module]


def _single(model: nn.Module, _device: torch.device) -> nn.Module:
    return model


def _ddp(model: nn.Module, device: torch.device) -> nn.Module:
    device_ids = [device.index] if device.type == "cuda" else None
    return DistributedDataParallel(model, device_ids=device_ids)


_MODES = {"ddp": Mode(distributed=True, wrap=_ddp), "single": Mode(distributed=False, wrap=_single)}
MODES = tuple(_MODES)


def get_mode(name: str) -> Mode:
    if name not in _MODES:
        raise ValueError(f"unknown mode {name!r}; choose from {', '.join(MODES)}")
    return _MODES[name]
