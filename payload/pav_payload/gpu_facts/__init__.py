"""``facts`` subcommand: per-GPU facts from NVML (else nvidia-smi), the kernel log's Xid lines, and the
PCIe AER and InfiniBand counters sysfs keeps.

Prints one JSON object on stdout and exits 0 whatever the host lacks: a fact that cannot be read is null
and named, with the reason, in the ``missing`` list beside it, so the driver can say which gate lacks
which fact instead of guessing. The torch_payload role runs it at configure; the driver stores the object
as the host's ``facts.gpus``. This package needs no torch: only the standard library and, where installed,
``pynvml`` (the nvidia-ml-py package).

Here: which source answers, and the subcommand. The readers: ``nvml`` (with ``nvlink``, ``state`` and
``counters``), else ``smi`` (nvidia-smi); ``xid`` scans the kernel log; ``counters`` also reads the GPUs'
AER files and ``rdma`` the InfiniBand ports, whatever the source; ``output`` is the JSON object's shape.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType

from pav_payload.gpu_facts.commands import Run, run_command
from pav_payload.gpu_facts.counters import PCI_ROOT, read_aer
from pav_payload.gpu_facts.meminfo import read_host_memory
from pav_payload.gpu_facts.missing import describe_error
from pav_payload.gpu_facts.nvml import read_nvml
from pav_payload.gpu_facts.output import GpuFacts
from pav_payload.gpu_facts.rdma import IB_ROOT, read_rdma
from pav_payload.gpu_facts.smi import read_nvidia_smi
from pav_payload.gpu_facts.xid import scan_xid

FACTS_HELP = "per-GPU facts from NVML (else nvidia-smi), Xid lines, AER and InfiniBand counters, as JSON"


def import_pynvml() -> ModuleType:
    return importlib.import_module("pynvml")


def collect(
    load_nvml: Callable[[], ModuleType] = import_pynvml,
    run: Run = run_command,
    pci_root: Path = PCI_ROOT,
    ib_root: Path = IB_ROOT,
) -> GpuFacts:
    read_at = time.time()
    nvml, why_not = _open_nvml(load_nvml)
    if nvml is None:
        facts = read_nvidia_smi(run, why_not)
    else:
        try:
            facts = read_nvml(nvml)
        finally:
            _close_nvml(nvml)
    # The kernel keeps AER whatever answers for the GPUs, so the nvidia-smi fallback has it too.
    for device in facts.devices:
        device.counters.aer = read_aer(pci_root, device.pci_bus_id, device.missing)
    facts.xid = scan_xid(run)
    facts.rdma = read_rdma(ib_root, facts.missing)
    facts.host_memory = read_host_memory(facts.missing)
    facts.read_at = read_at
    return facts


def _open_nvml(load_nvml: Callable[[], ModuleType]) -> tuple[ModuleType | None, str]:
    try:
        nvml = load_nvml()
    except ImportError as exc:
        return None, f"nvml: pynvml is not importable ({exc}; it comes with the nvidia-ml-py package)"
    try:
        nvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, _DriverNotLoaded, ...: no NVML on this host
        return None, f"nvml: nvmlInit failed: {describe_error(exc)}"
    return nvml, ""


def _close_nvml(nvml: ModuleType) -> None:
    # The facts are read by now; a failed shutdown changes none of them.
    with contextlib.suppress(Exception):
        nvml.nvmlShutdown()


def facts_json(pci_root: Path = PCI_ROOT, ib_root: Path = IB_ROOT) -> str:
    """The facts as one JSON object, whatever the host has: a bug here still answers, saying what broke."""
    try:
        return collect(import_pynvml, run_command, pci_root, ib_root).to_json()
    except Exception as exc:
        return GpuFacts("none", missing=[f"facts: {type(exc).__name__}: {exc}"]).to_json()


def add_facts_arguments(parser: argparse.ArgumentParser) -> None:
    """Where sysfs is read: the facts and host-facts subcommands' options; a test points them at a tree of
    its own."""
    parser.add_argument(
        "--pci-sysfs", type=Path, default=PCI_ROOT, metavar="DIR", help="PCI devices (default %(default)s)"
    )
    parser.add_argument(
        "--infiniband-sysfs",
        type=Path,
        default=IB_ROOT,
        metavar="DIR",
        help="RDMA devices (default %(default)s)",
    )


def print_facts(args: argparse.Namespace) -> int:
    """The ``facts`` subcommand: one JSON object on stdout, exit 0."""
    print(facts_json(args.pci_sysfs, args.infiniband_sysfs), flush=True)
    return 0


def facts_main(argv: Sequence[str]) -> int:
    """``python -m pav_payload facts [options]`` without the parser of the other subcommands, whose
    modules import torch (seconds of a preflight's budget)."""
    parser = argparse.ArgumentParser(prog="pav_payload facts", description=FACTS_HELP)
    add_facts_arguments(parser)
    return print_facts(parser.parse_args(argv))
