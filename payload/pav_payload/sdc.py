"""Silent data corruption: every GPU computes the same seeded GEMM chain many times, and the results must
be bitwise equal across repetitions on a GPU and across the host's GPUs of one model.

The inputs are made on the CPU from a seeded generator and moved to the device, so every GPU starts from the
same bytes; deterministic algorithms and a fixed cuBLAS workspace (CUBLAS_WORKSPACE_CONFIG, set in the
test's environment before CUDA starts) make a healthy GPU give the same bytes every time. A repetition that
differs from its GPU's majority, or a GPU whose result differs from the majority of the host's GPUs of its
model, is named with the first differing element. GPUs of different models are never compared: their
kernels differ, so their bytes may too.

``sdc`` subcommand (sdc_check) and a building block of ``burn`` (gpu_burn runs it at its start and end).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import ctypes
import hashlib
import math
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist

from pav_payload.probe_measure import describe_device
from pav_payload.runner import Outcome
from pav_payload.session import Session

SHOWN = 3  # mismatches listed per GPU: the first tells where, the count says how many
_INT_VIEW = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


@dataclass(frozen=True)
class SdcConfig:
    n: int
    layers: int
    reps: int
    seed: int
    inject_gpu: int = -1  # FOR TESTING: this local GPU flips one element of one repetition
    inject_rep: int = 1

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> SdcConfig:
        cfg = cls(args.sdc_n, args.sdc_layers, args.sdc_reps, args.sdc_seed, args.inject_sdc_gpu,
                  args.inject_sdc_rep)  # fmt: skip
        if cfg.n < 2 or cfg.layers < 1 or cfg.reps < 2:
            raise ValueError("--sdc-n must be >= 2, --sdc-layers >= 1 and --sdc-reps >= 2")
        return cfg


@dataclass
class Mismatch:
    rep: int | None  # None: every repetition (the GPU's result itself differs from the host's majority)
    element: int
    got: float
    want: float
    against: str  # what it was compared with

    def text(self, label: str, reps: int, n: int) -> str:
        which = "its result" if self.rep is None else f"repetition {self.rep} of {reps}"
        row, col = divmod(self.element, n)
        return (
            f"SDC: {label}: {which} differs from {self.against} at element {self.element} "
            f"(row {row}, column {col}): {self.got!r} instead of {self.want!r}"
        )


@dataclass
class SdcResult:
    label: str
    reps: int
    n: int
    digest: str = ""  # this GPU's majority digest
    distinct: int = 0  # distinct digests over its repetitions (1 when healthy)
    mismatches: list[Mismatch] = field(default_factory=list)

    @property
    def reason(self) -> str:
        if not self.mismatches:
            return ""
        first = self.mismatches[0].text(self.label, self.reps, self.n)
        more = len(self.mismatches) - 1
        return first + (f" (and {more} more)" if more else "")

    def record(self) -> dict[str, Any]:
        return {
            "reps": self.reps,
            "n": self.n,
            "digest": self.digest,
            "distinct": self.distinct,
            "mismatches": [vars(m) for m in self.mismatches[:SHOWN]],
            "mismatch_count": len(self.mismatches),
        }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sdc-n", type=int, default=4096, help="square matrices of the GEMM chain")
    parser.add_argument("--sdc-layers", type=int, default=8, help="GEMMs in the chain")
    parser.add_argument("--sdc-reps", type=int, default=10, help="repetitions per GPU")
    parser.add_argument("--sdc-seed", type=int, default=0)
    parser.add_argument(
        "--inject-sdc-gpu",
        type=int,
        default=-1,
        metavar="LOCAL_GPU",
        help="FOR TESTING ONLY: this local GPU (its local rank) flips one element of one repetition",
    )
    parser.add_argument(
        "--inject-sdc-rep", type=int, default=1, help="FOR TESTING ONLY: that repetition; -1: every one"
    )


def deterministic_env() -> None:
    """cuBLAS reads its workspace setting when CUDA starts: the test's environment sets it (catalog
    SDC_ENV); this covers a start by hand. Without it deterministic matmuls refuse to run at all."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")


def run_sdc(args: argparse.Namespace, session: Session) -> Outcome:
    cfg = SdcConfig.from_args(args)
    deterministic_env()
    device = session.start_distributed(args.backend, args.timeout_s)
    ident = describe_device(device)
    result = check(device, cfg, session.info.local_rank, gpu_label(device, ident, session.info.local_rank))
    metrics = {"gpu": {str(session.info.local_rank): ident}, "sdc": result.record(),
               "sdc_mismatches": len(result.mismatches)}  # fmt: skip
    return Outcome("fail" if result.mismatches else "pass", result.reason, metrics)


def gpu_label(device: torch.device, ident: dict[str, str | None], local_rank: int) -> str:
    """As the driver names a GPU (thresholds/hardware.py Gpu.label): index, bus id, uuid."""
    if device.type != "cuda":
        return f"local rank {local_rank} (CPU)"
    ids = ", ".join(str(x) for x in (ident.get("pci_bus_id"), ident.get("uuid")) if x)
    return f"GPU {device.index} ({ids})" if ids else f"GPU {device.index}"


def check(device: torch.device, cfg: SdcConfig, local_rank: int, label: str) -> SdcResult:
    """Collective: every rank of the group calls it with the same cfg."""
    result = SdcResult(label, cfg.reps, cfg.n)
    with _deterministic():
        x, weights = _inputs(cfg, device)
        digests: list[str] = []
        kept: dict[str, torch.Tensor] = {}  # the first result of each distinct digest
        for rep in range(cfg.reps):
            out = _chain(x, weights)
            if local_rank == cfg.inject_gpu and cfg.inject_rep in (rep, -1):
                _flip_one(out)
            digest = digest_of(out)
            digests.append(digest)
            kept.setdefault(digest, out)
    counts = collections.Counter(digests)
    result.digest = max(counts, key=lambda d: (counts[d], d == digests[0]))
    result.distinct = len(counts)
    reference = kept[result.digest]
    for rep, digest in enumerate(digests):
        if digest != result.digest:
            against = f"the majority of its {cfg.reps} repetitions"
            result.mismatches.append(first_difference(kept[digest], reference, rep, against))
    result.mismatches += _across_gpus(device, result.digest, reference)
    return result


def _across_gpus(device: torch.device, digest: str, mine: torch.Tensor) -> list[Mismatch]:
    """This GPU's result against the majority of the host's GPUs of its model (every rank calls it)."""
    if not dist.is_initialized() or dist.get_world_size() < 2:
        return []
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    seen = _gather_digests(device, name, digest)
    out: list[Mismatch] = []
    for model in sorted({m for m, _ in seen}):
        ranks = [r for r, (m, _) in enumerate(seen) if m == model]
        counts = collections.Counter(seen[r][1] for r in ranks)
        if len(counts) < 2:
            continue
        top = counts.most_common()
        tie = len(top) > 1 and top[0][1] == top[1][1]
        # Without a majority the lowest rank's result is the yardstick, and the reason says so.
        majority = seen[ranks[0]][1] if tie else top[0][0]
        source = next(r for r in ranks if seen[r][1] == majority)
        buffer = mine.clone() if dist.get_rank() == source else torch.empty_like(mine)
        dist.broadcast(buffer, src=source)
        me = dist.get_rank()
        if me in ranks and seen[me][1] != majority:
            # A test's CPU flavour runs a rank per CPU process: its peers are CPU ranks, no GPUs.
            each, peers = ("CPU rank", "CPU ranks") if model == "cpu" else ("GPU of rank", f"{model} GPUs")
            if tie:
                against = f"{each} {source} (no majority among the host's {len(ranks)} {peers})"
            else:
                against = f"the majority of the host's {len(ranks)} {peers} (rank {source})"
            out.append(first_difference(mine, buffer, None, against))
    return out


def _gather_digests(device: torch.device, name: str, digest: str) -> list[tuple[str, str]]:
    """(model, digest) of every rank. As int64 words in a tensor: all_gather_object needs numpy, which
    the payload's hosts need not have. The model travels as its own digest's first word."""
    words = [_word(hashlib.sha256(name.encode()).digest()[:8])]
    words += [_word(bytes.fromhex(digest)[i : i + 8]) for i in range(0, 32, 8)]
    mine = torch.tensor(words, dtype=torch.int64, device=device)
    gathered = [torch.empty_like(mine) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, mine)
    rows = [[int(v) for v in t.cpu().tolist()] for t in gathered]
    return [(f"model-{row[0]:x}" if row[0] != words[0] else name, _hex(row[1:])) for row in rows]


def _word(chunk: bytes) -> int:
    return int.from_bytes(chunk, "big", signed=True)


def _hex(words: list[int]) -> str:
    return b"".join(w.to_bytes(8, "big", signed=True) for w in words).hex()


def first_difference(got: torch.Tensor, want: torch.Tensor, rep: int | None, against: str) -> Mismatch:
    differs = (_bits(got) != _bits(want)).flatten().nonzero()
    index = int(differs[0].item()) if differs.numel() else 0
    flat_got, flat_want = got.flatten(), want.flatten()
    return Mismatch(rep, index, float(flat_got[index].item()), float(flat_want[index].item()), against)


def digest_of(tensor: torch.Tensor) -> str:
    """sha256 of the tensor's bytes (no numpy: the payload's hosts need not have it)."""
    host = tensor.detach().contiguous().cpu()
    return hashlib.sha256(ctypes.string_at(host.data_ptr(), host.numel() * host.element_size())).hexdigest()


def _bits(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.contiguous().view(_INT_VIEW[tensor.element_size()])


def _inputs(cfg: SdcConfig, device: torch.device) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Made on the CPU from the seed, so every GPU starts from the same bytes; scaled by 1/sqrt(n) so the
    chain's values stay near unit size through every layer."""
    gen = torch.Generator().manual_seed(cfg.seed)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    x = torch.randn(cfg.n, cfg.n, generator=gen)
    weights = [torch.randn(cfg.n, cfg.n, generator=gen) / math.sqrt(cfg.n) for _ in range(cfg.layers)]
    return x.to(device=device, dtype=dtype), [w.to(device=device, dtype=dtype) for w in weights]


def _chain(x: torch.Tensor, weights: list[torch.Tensor]) -> torch.Tensor:
    for w in weights:
        x = torch.matmul(x, w)
    return x


def _flip_one(out: torch.Tensor) -> None:
    """FOR TESTING: the lowest bit of one element in the middle, as a marginal cell or a flaky SM would."""
    bits = out.view(_INT_VIEW[out.element_size()]).view(-1)
    index = bits.numel() // 2 + 7
    bits[index] ^= 1


@contextmanager
def _deterministic() -> Iterator[None]:
    """Deterministic algorithms and no TF32 for the check alone: a suite's later tests get theirs back."""
    before = (torch.are_deterministic_algorithms_enabled(), _tf32())
    _set_deterministic(True)
    _set_tf32(False)
    try:
        yield
    finally:
        _set_deterministic(before[0])
        _set_tf32(before[1])


def _set_deterministic(on: bool) -> None:
    """torch.use_deterministic_algorithms, without its import of torch._inductor (seconds of a CPU per rank,
    and only compiled code reads inductor's flag: this runs none). The C flag is the one eager ops obey."""
    setter = getattr(torch._C, "_set_deterministic_algorithms", None)
    if setter is None:
        torch.use_deterministic_algorithms(on)
    else:
        setter(on)


def _tf32() -> bool:
    return bool(getattr(torch.backends.cuda.matmul, "allow_tf32", False))


def _set_tf32(on: bool) -> None:
    # A torch that retired the flag for fp32_precision keeps TF32 off by default: nothing to undo then.
    with contextlib.suppress(AttributeError, RuntimeError):
        torch.backends.cuda.matmul.allow_tf32 = on
