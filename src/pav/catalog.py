"""The validation tests the driver knows: what each runs, where, and what it needs."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Literal

from pav.errors import PavError

Scope = Literal["host", "cluster"]
Launcher = Literal["torchrun", "nccl_tests", "mpirun", "slurm"]  # slurm: a check of Slurm itself

# nccl-tests sizes from the field's habits: 512M to 8G by factor 2.
BIG_SIZES = "512M,1G,2G,4G,8G"
# A transformer big enough that GPU throughput, not launch overhead, sets tokens/s.
GPU_MODEL = ("--model", "transformer", "--d-model", "1024", "--layers", "8", "--seq-len", "1024",
             "--batch-size", "8", "--steps", "30")  # fmt: skip
OTHER_OPS = "all_gather,reduce_scatter,all_to_all,broadcast,send_recv"
NCCL_TESTS_SWEEP = ("-b", "512M", "-e", "8G", "-f", "2")


@dataclass(frozen=True)
class TestSpec:
    name: str
    description: str
    launcher: Launcher
    scope: Scope
    needs_gpu: bool
    args: tuple[str, ...] = field(default_factory=tuple)
    procs: int | None = None  # processes per host; None: every GPU (GPU tests) or pav_cpu_procs_per_host


CATALOG: dict[str, TestSpec] = {
    spec.name: spec
    for spec in (
        TestSpec(
            "torch_gloo_allreduce",
            "torch gloo all_reduce, result checked, on each host (CPU processes)",
            "torchrun",
            "host",
            False,
            ("collectives", "--backend", "gloo", "--ops", "all_reduce", "--sizes", "1K,64K,1M"),
        ),
        TestSpec(
            "ddp_cpu_train",
            "a few DDP steps of a small model on CPU; loss must fall, replicas stay equal",
            "torchrun",
            "host",
            False,
            ("train", "--model", "mlp", "--mode", "ddp", "--steps", "20"),
        ),
        TestSpec(
            "torch_gloo_collectives_multi",
            "torch gloo collectives across all hosts through torchrun c10d rendezvous, results checked",
            "torchrun",
            "cluster",
            False,
            (
                "collectives",
                "--backend",
                "gloo",
                "--ops",
                "all_reduce,all_gather,broadcast",
                "--sizes",
                "1K,1M",
            ),
        ),
        TestSpec(
            "ddp_cpu_train_multi",
            "DDP steps across all hosts through torchrun c10d rendezvous; loss must fall",
            "torchrun",
            "cluster",
            False,
            ("train", "--model", "mlp", "--mode", "ddp", "--steps", "20"),
        ),
        TestSpec(
            "mpi_allreduce",
            "MPI_Allreduce across all hosts through mpirun over SSH, result checked",
            "mpirun",
            "cluster",
            False,
            ("pav_mpi_allreduce",),
        ),
        TestSpec(
            "torch_nccl_allreduce",
            "torch NCCL all_reduce over all GPUs of each host, 512M-8G, result checked",
            "torchrun",
            "host",
            True,
            ("collectives", "--backend", "nccl", "--ops", "all_reduce", "--sizes", BIG_SIZES),
        ),
        TestSpec(
            "torch_nccl_collectives",
            "torch NCCL all_gather, reduce_scatter, all_to_all, broadcast, send_recv over all GPUs, 512M-8G",
            "torchrun",
            "host",
            True,
            ("collectives", "--backend", "nccl", "--ops", OTHER_OPS, "--sizes", BIG_SIZES),
        ),
        TestSpec(
            "train_gpu_single",
            "1-GPU baseline: a transformer on synthetic tokens, tokens/s",
            "torchrun",
            "host",
            True,
            ("train", "--mode", "single", *GPU_MODEL),
            procs=1,
        ),
        TestSpec(
            "train_gpu_ddp",
            "DDP of the same transformer over all GPUs of a host: tokens/s/GPU and scaling vs 1 GPU",
            "torchrun",
            "host",
            True,
            ("train", "--mode", "ddp", *GPU_MODEL),
        ),
        TestSpec(
            "train_gpu_fsdp",
            "FSDP2 of a ~1.1B-parameter transformer over all GPUs of a host (bf16 compute): tokens/s/GPU",
            "torchrun",
            "host",
            True,
            (
                "train",
                "--mode",
                "fsdp",
                "--model",
                "transformer",
                "--size",
                "1b",
                "--fsdp-bf16",
                "--steps",
                "30",
            ),
        ),
        *(
            TestSpec(
                f"nccl_tests_{op}",
                f"nccl-tests {op}_perf over all GPUs of each host, 512M-8G",
                "nccl_tests",
                "host",
                True,
                (f"{op}_perf", *NCCL_TESTS_SWEEP),
            )
            for op in ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv")
        ),
        # Slurm's own checks (--launcher slurm only; docs/slurm.md): pav_payload.slurm_check in every task.
        TestSpec(
            "slurm_cluster_state",
            "sinfo/scontrol before any job: every node idle, none drained or down",
            "slurm",
            "cluster",
            False,
        ),
        TestSpec(
            "slurm_cpu_binding",
            "each task of an srun step is bound to exactly its --cpus-per-task CPUs",
            "slurm",
            "cluster",
            False,
        ),
        TestSpec(
            "slurm_gpu_binding",
            "each task sees exactly its GPU (CUDA_VISIBLE_DEVICES, nvidia-smi in the step)",
            "slurm",
            "cluster",
            True,
        ),
        TestSpec(
            "slurm_shared_fs",
            "a file the batch script writes on the first node is read on every node",
            "slurm",
            "cluster",
            False,
        ),
    )
}


# FOR TESTING ONLY (tests/faults): launches that hang until their timeout. Known only with PAV_FAULT_TESTS=1.
HANG = ("collectives", "--backend", "gloo", "--ops", "all_reduce", "--sizes", "1K", "--inject-hang")
FAULT_TESTS: dict[str, TestSpec] = {
    spec.name: spec
    for spec in (
        TestSpec("fault_hang", "FOR TESTING: rank 1 hangs", "torchrun", "host", False, (*HANG, "1")),
        TestSpec("fault_hang_multi", "FOR TESTING: rank 0 hangs", "torchrun", "cluster", False, (*HANG, "0")),
        TestSpec(
            "fault_rank_exit_multi",
            "FOR TESTING: rank 1 exits with code 3",
            "torchrun",
            "cluster",
            False,
            (
                "collectives",
                "--backend",
                "gloo",
                "--ops",
                "all_reduce",
                "--sizes",
                "1K",
                "--inject-exit",
                "1",
            ),
        ),
    )
}


def select(names: list[str], where: str = "pav_tests") -> list[TestSpec]:
    known = CATALOG | (FAULT_TESTS if os.environ.get("PAV_FAULT_TESTS") == "1" else {})
    unknown = [n for n in names if n not in known]
    if unknown:
        raise PavError(f"unknown test(s) {', '.join(unknown)} in {where}; known: {', '.join(CATALOG)}")
    return [known[n] for n in names]
