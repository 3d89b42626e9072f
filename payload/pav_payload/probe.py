"""``probe`` subcommand: what each GPU of a host, and each link between two of them, delivers.

torchrun starts one process per host (--nproc-per-node 1); it starts a process per GPU (probe_workers.py),
as a job loads the hardware: bf16 GEMM and HBM copy on every GPU at once, host<->device copies on each GPU
alone (its own PCIe link) and then on every GPU at once (what they share on the way to host memory). Each
ordered GPU pair's copy is then measured alone from this process, so the figure belongs to one link. The
driver derives the gates (what the hardware should do) from the host's facts; this file only measures,
and fails only when a copy delivered wrong bytes.

The measurements themselves are probe_measure.py's.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

import torch

from pav_payload.probe_measure import Checks, ProbeSizes, Repeats, describe_devices, measure_p2p
from pav_payload.probe_workers import measure_per_gpu
from pav_payload.runner import Outcome
from pav_payload.session import Session

NO_CUDA = "probe needs CUDA GPUs"


def run_probe(args: argparse.Namespace, session: Session) -> Outcome:
    sizes, repeats = ProbeSizes.from_args(args), Repeats.from_args(args)
    # Before CUDA starts: number the GPUs as NVML and nvidia-smi do, so probe GPU 3 is facts.gpus GPU 3.
    os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    session.start_local()
    if not torch.cuda.is_available():
        return Outcome("fail", NO_CUDA)
    if session.info.local_world_size > 1:
        # Several processes per host would each drive every GPU: figures of contention, not of hardware.
        return Outcome("fail", f"probe runs one process per host; got {session.info.local_world_size}")
    devices = [torch.device("cuda", index) for index in range(torch.cuda.device_count())]
    metrics, checks = measure_host(devices, sizes, repeats)
    _print_table(metrics)
    return outcome_of(metrics, checks)


def outcome_of(metrics: dict[str, Any], checks: Checks) -> Outcome:
    return Outcome("fail" if checks.total else "pass", checks.summary(), metrics)


def measure_host(
    devices: Sequence[torch.device], sizes: ProbeSizes, repeats: Repeats
) -> tuple[dict[str, Any], Checks]:
    """The rank's metrics; keys are GPU indices as strings (the gates' dotted paths: p2p_gbps.0.1)."""
    per_gpu, checks = measure_per_gpu(list(devices), sizes, repeats)
    # After the workers are gone: each pair's copy then has the GPUs to itself.
    p2p, access = measure_p2p(devices, sizes.p2p_bytes, repeats, checks)
    metrics = {
        "gpu_count": len(devices),
        "gpu": describe_devices(devices),
        # Set: the host was given these GPUs (a split machine, a scheduler's allocation); the driver then
        # judges only them, matched to the facts by UUID or bus id.
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        **per_gpu,
        "p2p_gbps": p2p,
        "p2p_access": access,
        "wrong_total": checks.total,
        "sizes": asdict(sizes),
    }
    return metrics, checks


# --- the measurements -------------------------------------------------------------------------------------


def _print_table(metrics: dict[str, Any]) -> None:
    """H2D/D2H: each GPU alone; "all": every GPU at once (2 or more GPUs)."""
    columns = [
        ("gemm_bf16_tflops", "bf16 TFLOP/s"), ("hbm_copy_gbps", "HBM GB/s"), ("h2d_gbps", "H2D GB/s"),
        ("d2h_gbps", "D2H GB/s"), ("h2d_all_gbps", "H2D all"), ("d2h_all_gbps", "D2H all"),
    ]  # fmt: skip
    shown = [(m, title) for m, title in columns if m in metrics]
    print(f"{'gpu':>4} " + " ".join(f"{title:>13}" for _, title in shown))
    for key in metrics["gpu"]:
        print(f"{key:>4} " + " ".join(f"{metrics[m][key]:>13.1f}" for m, _ in shown))
    for src, row in metrics["p2p_gbps"].items():
        print(f"p2p {src} -> " + ", ".join(f"{dst}: {value:.1f}" for dst, value in row.items()))
    sys.stdout.flush()
