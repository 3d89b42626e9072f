"""Process-group lifecycle for one rank: join, and leave without stranding the others."""

import sys
from collections.abc import Callable
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.distributed import distributed_c10d

from pav_payload.env import RankInfo
from pav_payload.runtime import DeviceInfo, describe, resolve_backend, select_device


class Session:
    def __init__(self, info: RankInfo) -> None:
        self.info = info
        self.device_info: DeviceInfo | None = None
        self._distributed = False
        self._group: tuple[str, torch.device] | None = None  # the process group's backend and device

    def start_distributed(self, backend_request: str, timeout_s: float) -> torch.device:
        backend = resolve_backend(backend_request)
        if self._distributed and self._group is not None:
            # A suite's later tests reuse the group the first one made: that start-up is paid once.
            if self._group[0] != backend:
                raise RuntimeError(f"the suite's process group is {self._group[0]}, not {backend}")
            self.device_info = describe(backend, self._group[1])
            return self._group[1]
        device = select_device(backend == "nccl", self.info.local_rank)
        self.device_info = describe(backend, device)
        options: dict[str, object] = {"timeout": timedelta(seconds=timeout_s)}
        if device.type == "cuda":
            # Binds the communicator to this rank's GPU up front instead of guessing at the first collective.
            options["device_id"] = device
        if self.info.launched:
            dist.init_process_group(backend, **options)
        else:
            # Started without torchrun: a one-rank group needs no rendezvous, so an in-memory store does.
            dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1, **options)
        self._distributed = True
        self._group = (backend, device)
        return device

    def start_local(self) -> torch.device:
        device = select_device(torch.cuda.is_available(), self.info.local_rank)
        self.device_info = describe("none", device)
        return device

    def close(self, healthy: bool, exit_code: int) -> int:
        """Leave the group; ``healthy`` means every rank is expected to reach this point in step.

        Returns the exit code to leave with: the worst over all ranks when they all got here. torchrun's
        agents wait at an exit barrier (300 s) for every agent whose ranks all exited 0, and an agent whose
        rank failed never joins it: a job with one bad host would hold the good ones for five minutes.
        Exiting non-zero everywhere ends every agent at once; each rank's report still says its own status.
        """
        if not self._distributed:
            return exit_code
        self._distributed = False
        if healthy:
            # Also the final barrier: every rank has written its report before any rank leaves.
            worst = [exit_code]
            _best_effort("exit code agreement", lambda: worst.__setitem__(0, self._worst(exit_code)))
            _best_effort("destroy_process_group", dist.destroy_process_group)
            return worst[0]
        # After an error peers may be stuck in a collective; a NCCL destroy could then wait forever.
        abort = getattr(distributed_c10d, "_abort_process_group", None)
        if self.device_info is not None and self.device_info.backend == "nccl" and abort is not None:
            _best_effort("abort process group", abort)
        else:
            _best_effort("destroy_process_group", dist.destroy_process_group)
        return exit_code

    def agree(self, exit_code: int) -> int:
        """The worst exit code over all ranks (every rank must call it): what torchrun would exit with."""
        return self._worst(exit_code) if self._distributed else exit_code

    def _worst(self, exit_code: int) -> int:
        device = self._group[1] if self._group is not None else "cpu"
        code = torch.tensor([exit_code], dtype=torch.int32, device=device)
        dist.all_reduce(code, op=dist.ReduceOp.MAX)
        return int(code.item())


def _best_effort(what: str, action: Callable[[], object]) -> None:
    try:
        action()
    except Exception as exc:  # the report is already written; teardown trouble must not mask it
        print(f"pav_payload: {what} failed: {exc}", file=sys.stderr)
