"""The probe's per-GPU figures, each GPU driven by a process of its own, as a job drives it (torchrun starts
one process per GPU). One process driving every GPU measured host copies 25-40% under what a process per
GPU measures on the same healthy 4x H100 (issue 36): a figure of the probe, not of the hardware.

Phases, held in step by a barrier: bf16 GEMM and HBM copy on every GPU at once; host<->device copies on
each GPU alone, one after the other (its own PCIe link); then on every GPU at once (what the GPUs share on
the way to host memory: a PCIe switch, a root port, the CPU's memory); the host copies in 3 rounds, every
round recorded and each GPU's median the figure judged (issue 63). Each worker sees its own GPU alone
(CUDA_VISIBLE_DEVICES) and binds itself to that GPU's CPUs where NVML says which, as a tuned job does, so a
copy does not cross to another socket's memory.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from pav_payload.probe_measure import (
    Checks,
    ProbeSizes,
    Repeats,
    describe_device,
    figure,
    measure_gemm,
    measure_hbm_copy,
    measure_host_copies,
)

# A worker that has not reached the next phase in this long is stuck (a hung GPU): the others stop.
PHASE_TIMEOUT_S = 600.0
PER_GPU_ALONE = ("gemm_bf16_tflops", "hbm_copy_gbps", "h2d_gbps", "d2h_gbps")
AT_ONCE = {"h2d_gbps": "h2d_all_gbps", "d2h_gbps": "d2h_all_gbps"}
BROKEN = "BrokenBarrierError"  # how a worker reports that another one aborted, or a phase timed out
HOST_COPY_ROUNDS = 3  # host copies alone and at once; each GPU's median round is its figure
ROUNDS = "_rounds"  # a figure's every round, as metric + ROUNDS: {"h2d_gbps_rounds": {"0": [r1, r2, r3]}}
# A figure's value: a number, or (its rounds) a list of them.
Figure = float | list[float]


class WorkerFailed(RuntimeError):
    """A GPU's worker process died or stopped answering; the message names the GPU."""


@dataclass(frozen=True)
class Job:
    position: int  # the GPU's index among the visible devices (the metrics' key)
    count: int
    device_type: str
    sizes: ProbeSizes
    repeats: Repeats
    uuid: str = ""  # the worker's only visible GPU (CUDA_VISIBLE_DEVICES); "" on CPU


def measure_per_gpu(
    devices: list[torch.device], sizes: ProbeSizes, repeats: Repeats
) -> tuple[dict[str, dict[str, Figure]], Checks]:
    """gemm_bf16_tflops, hbm_copy_gbps, h2d_gbps and d2h_gbps (each GPU alone), and, with 2 or more GPUs,
    h2d_all_gbps and d2h_all_gbps (every GPU at once); keyed by the device's position as a string. Each host
    copy figure also has its rounds (h2d_gbps_rounds, ...), of which it is the median."""
    ctx = mp.get_context("spawn")  # CUDA cannot be forked; spawn also leaves the parent's state behind
    barrier, results = ctx.Barrier(len(devices)), ctx.Queue()
    workers = [
        ctx.Process(
            target=_work,
            args=(Job(i, len(devices), devices[i].type, sizes, repeats, _uuid(devices[i])), barrier, results),
            name=f"pav-probe-gpu{i}",
        )
        for i in range(len(devices))
    ]
    for worker in workers:
        worker.start()
    try:
        found = _gather(workers, results)
    finally:
        for worker in workers:
            worker.join(timeout=30)
            if worker.is_alive():
                worker.kill()
    return _merge(found)


def _gather(workers: list[Any], results: Any, poll_s: float = 5.0) -> dict[int, dict[str, Any]]:
    """poll_s: how long a silent queue is waited on before the workers are looked at."""
    found: dict[int, dict[str, Any]] = {}
    stopped: list[int] = []  # workers that stopped because another broke the barrier: not the cause
    while len(found) + len(stopped) < len(workers):
        try:
            position, payload = results.get(timeout=poll_s)
        except queue.Empty:
            done = set(found) | set(stopped)
            dead = [i for i, w in enumerate(workers) if i not in done and not w.is_alive()]
            if dead:
                codes = ", ".join(f"GPU {i} exit {workers[i].exitcode}" for i in dead)
                raise WorkerFailed(f"the probe's process for {codes} ended without a result") from None
            if stopped:  # the others gave up on the barrier; the ones still silent never reached it
                silent = ", ".join(f"GPU {i}" for i in range(len(workers)) if i not in done)
                raise WorkerFailed(f"{silent}: did not finish a phase in {PHASE_TIMEOUT_S:g} s") from None
            continue
        error = str(payload.get("error", ""))
        if error.startswith(BROKEN):
            stopped.append(position)
        elif error:
            raise WorkerFailed(f"GPU {position}: {error}")
        else:
            found[position] = payload
    if stopped:
        raise WorkerFailed(
            f"the probe's processes for GPU {', '.join(map(str, sorted(stopped)))} stopped waiting"
        )
    return found


def _merge(found: dict[int, dict[str, Any]]) -> tuple[dict[str, dict[str, Figure]], Checks]:
    metrics: dict[str, dict[str, Figure]] = {}
    checks = Checks()
    for position in sorted(found):
        for name, value in found[position]["metrics"].items():
            metrics.setdefault(name, {})[str(position)] = value
        for what, count in found[position]["wrong"].items():
            checks.add(what, count)
    return metrics, checks


def _work(job: Job, barrier: Any, results: Any) -> None:
    try:
        results.put((job.position, _measure(job, barrier)))
    except Exception as exc:
        barrier.abort()  # the others stop waiting for this one
        results.put((job.position, {"error": f"{type(exc).__name__}: {exc}"}))


def _measure(job: Job, barrier: Any) -> dict[str, Any]:
    device = torch.device("cpu")
    if job.device_type == "cuda":
        # Its own GPU alone: no context on the others, whose work this process must not wait for or touch.
        os.environ["CUDA_VISIBLE_DEVICES"] = job.uuid
        _bind_to_gpu_cpus()
        device = torch.device("cuda", 0)
        torch.cuda.set_device(device)
    own = Checks()
    wait = lambda: barrier.wait(timeout=PHASE_TIMEOUT_S)  # noqa: E731
    wait()
    metrics: dict[str, Figure] = {
        "gemm_bf16_tflops": measure_gemm([device], job.sizes.gemm_n, job.repeats)["0"]
    }
    wait()
    metrics["hbm_copy_gbps"] = measure_hbm_copy([device], job.sizes.hbm_bytes, job.repeats, own)["0"]
    alone: list[tuple[float, float]] = []
    together: list[tuple[float, float]] = []
    for _ in range(HOST_COPY_ROUNDS):
        for turn in range(job.count):  # alone: one GPU copies while the others wait
            wait()
            if turn == job.position:
                alone.append(_host_copies(device, job, own))
        if job.count > 1:
            wait()
            together.append(_host_copies(device, job, own))
    metrics |= host_copy_figures(alone, "h2d_gbps", "d2h_gbps")
    if together:
        metrics |= host_copy_figures(together, AT_ONCE["h2d_gbps"], AT_ONCE["d2h_gbps"])
    wait()  # nobody leaves while another still measures
    # measure_* name the GPU by its position in the list they were given (0): name it by this host's.
    wrong = {what.replace("GPU 0", f"GPU {job.position}"): n for what, n in own.wrong.items()}
    return {"metrics": metrics, "wrong": wrong}


def host_copy_figures(rounds: Sequence[tuple[float, float]], h2d: str, d2h: str) -> dict[str, Figure]:
    """Each direction's rounds, and their median as the figure the gates judge. Not the best round, which
    hid a link that dips in some rounds; not the worst, which one stall of the host's memory drags down
    (a healthy 4x H100 read 28 of 55 GB/s in one round, 55 in the next). The driver fails a dip that
    repeats (thresholds/dips.py) from the rounds themselves."""
    out: dict[str, Figure] = {}
    for name, direction in ((h2d, 0), (d2h, 1)):
        values = [r[direction] for r in rounds]
        out[name] = figure(statistics.median(values))
        out[name + ROUNDS] = values
    return out


def _host_copies(device: torch.device, job: Job, checks: Checks) -> tuple[float, float]:
    h2d, d2h = measure_host_copies([device], job.sizes.host_bytes, job.repeats, checks)
    return h2d["0"], d2h["0"]


def _uuid(device: torch.device) -> str:
    """What names this GPU in a worker's CUDA_VISIBLE_DEVICES: its UUID, else this process's own name."""
    if device.type != "cuda":
        return ""
    uuid = describe_device(device)["uuid"]
    if uuid:
        return uuid
    visible = [v for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v]
    return (
        visible[device.index]
        if device.index is not None and device.index < len(visible)
        else str(device.index)
    )


def _bind_to_gpu_cpus() -> None:
    """Run on the CPUs NVML lists as near this GPU (its NUMA node); nothing changes where NVML cannot say."""
    try:
        import pynvml  # type: ignore[import-not-found]  # nvidia-ml-py, on the GPU hosts' image

        pynvml.nvmlInit()
        try:
            handle = pynvml.nvmlDeviceGetHandleByPciBusId(_bus_id(0))
            words = pynvml.nvmlDeviceGetCpuAffinity(handle, ((os.cpu_count() or 64) + 63) // 64)
        finally:
            pynvml.nvmlShutdown()
        cpus = {w * 64 + b for w, word in enumerate(words) for b in range(64) if int(word) >> b & 1}
        allowed = os.sched_getaffinity(0) & cpus
        if allowed:
            os.sched_setaffinity(0, allowed)
    except Exception:  # no pynvml, no NVML, a container that forbids it: the figures are taken unbound
        return


def _bus_id(position: int) -> str:
    props = torch.cuda.get_device_properties(position)
    return f"{getattr(props, 'pci_domain_id', 0) or 0:08X}:{props.pci_bus_id:02X}:{props.pci_device_id:02X}.0"
