"""Which tests the k8s platform can run, and as which job kind: torchrun GPU tests as PyTorchJob,
nccl-tests as MPIJob. Asked before anything is provisioned (pav.run_inputs) and again when jobs are
planned, so a CPU test in pav_tests stops a k8s run before a paid cluster exists."""

from __future__ import annotations

from pav.catalog import TestSpec
from pav.errors import PavError

KINDS = {"torchrun": "PyTorchJob", "nccl_tests": "MPIJob"}


def job_kind(spec: TestSpec) -> str:
    kind = KINDS.get(spec.launcher)
    if kind is None or not spec.needs_gpu:
        raise PavError(
            f"test {spec.name} runs through {spec.launcher} on CPUs; the k8s platform runs GPU torchrun "
            f"tests as PyTorchJob and nccl-tests as MPIJob: take it out of pav_tests"
        )
    return kind
