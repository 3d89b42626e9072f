"""Backend and device choice, and facts about them worth recording next to the numbers."""

import platform
import resource
from dataclasses import dataclass

import torch

BACKENDS = ("auto", "gloo", "nccl")


@dataclass(frozen=True)
class DeviceInfo:
    backend: str
    device: str
    device_name: str
    nccl_version: str | None


def resolve_backend(requested: str) -> str:
    if requested == "auto":
        return "nccl" if torch.cuda.is_available() else "gloo"
    if requested == "nccl" and not torch.cuda.is_available():
        raise RuntimeError("backend nccl requested but CUDA is not available")
    if requested not in BACKENDS:
        raise ValueError(f"unknown backend {requested!r}")
    return requested


def select_device(use_cuda: bool, local_rank: int) -> torch.device:
    if not use_cuda:
        return torch.device("cpu")
    # Each local rank owns one GPU; setting it before any CUDA work keeps NCCL from touching GPU 0.
    device = torch.device("cuda", local_rank % torch.cuda.device_count())
    torch.cuda.set_device(device)
    return device


def describe(backend: str, device: torch.device) -> DeviceInfo:
    if device.type == "cuda":
        return DeviceInfo(backend, str(device), torch.cuda.get_device_name(device), nccl_version())
    return DeviceInfo(backend, "cpu", platform.processor() or platform.machine(), None)


def nccl_version() -> str | None:
    try:
        version = torch.cuda.nccl.version()
    except (AttributeError, RuntimeError):
        return None
    return ".".join(str(part) for part in version) if isinstance(version, tuple) else str(version)


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def peak_memory(device: torch.device) -> tuple[int, str]:
    """Peak bytes and where the figure comes from; the CPU figure is the whole process's RSS."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device), "cuda_max_memory_allocated"
    # Linux reports ru_maxrss in KiB.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "ru_maxrss"
