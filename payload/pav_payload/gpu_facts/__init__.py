"""``facts`` subcommand: per-GPU facts from NVML (else nvidia-smi) and the kernel log's Xid lines.

Prints one JSON object on stdout and exits 0 whatever the host lacks: a fact that cannot be read is null
and named, with the reason, in the ``missing`` list beside it, so the driver can say which gate lacks
which fact instead of guessing. The torch_payload role runs it at configure; the driver stores the object
as the host's ``facts.gpus``. This package needs no torch: only the standard library and, where installed,
``pynvml`` (the nvidia-ml-py package).

Here: which source answers, and the subcommand. The readers: ``nvml`` (with ``nvlink``), else ``smi``
(nvidia-smi); ``xid`` scans the kernel log; ``output`` is the JSON object's shape.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
from collections.abc import Callable
from types import ModuleType

from pav_payload.gpu_facts.commands import Run, run_command
from pav_payload.gpu_facts.missing import describe_error
from pav_payload.gpu_facts.nvml import read_nvml
from pav_payload.gpu_facts.output import GpuFacts
from pav_payload.gpu_facts.smi import read_nvidia_smi
from pav_payload.gpu_facts.xid import scan_xid


def import_pynvml() -> ModuleType:
    return importlib.import_module("pynvml")


def collect(load_nvml: Callable[[], ModuleType] = import_pynvml, run: Run = run_command) -> GpuFacts:
    nvml, why_not = _open_nvml(load_nvml)
    if nvml is None:
        facts = read_nvidia_smi(run, why_not)
    else:
        try:
            facts = read_nvml(nvml)
        finally:
            _close_nvml(nvml)
    facts.xid = scan_xid(run)
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


def facts_json() -> str:
    """The facts as one JSON object, whatever the host has: a bug here still answers, saying what broke."""
    try:
        return collect().to_json()
    except Exception as exc:
        return GpuFacts("none", missing=[f"facts: {type(exc).__name__}: {exc}"]).to_json()


def print_facts(_args: argparse.Namespace) -> int:
    """The ``facts`` subcommand: one JSON object on stdout, exit 0."""
    print(facts_json(), flush=True)
    return 0
