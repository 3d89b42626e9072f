"""``train`` subcommand: a few optimiser steps that must lower the loss and keep replicas identical."""

import argparse
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from pav_payload.consistency import checksum_spread, full_parameters, param_checksum
from pav_payload.data import Task, make_task
from pav_payload.models import DEFAULT_D_MODEL, DEFAULT_LR, HEADS, SIZES, VOCAB_SIZE, ModelConfig, build_model
from pav_payload.parallel import WrapOptions, get_mode
from pav_payload.runner import Outcome
from pav_payload.runtime import peak_memory, synchronize
from pav_payload.session import Session
from pav_payload.stats import summarize

WARMUP_STEPS = 2
# The steady step time: the 20th percentile of the timed steps. On a healthy 1x H200 FSDP's steps ran at
# 152-157 ms with bursts of 160-225 ms that came and went within a run (docs/benchmarks.md, "Issue 61"): the
# median moved 9% between runs, the 20th percentile 2.4%. A slower GPU (clocks, HBM) slows every step, so
# this figure still falls with it; the median stays recorded beside it.
STEADY_PERCENTILE = 0.2
REQUIRED_LOSS_RATIO = 0.9
# Defaults of the dimension flags without --size; None where the flag's default depends on the model.
PLAIN_DEFAULTS = {
    "d_model": None,
    "layers": 2,
    "heads": HEADS,
    "vocab_size": VOCAB_SIZE,
    "seq_len": 64,
    "batch_size": 32,
    "lr": None,
}


@dataclass(frozen=True)
class Setup:
    model: nn.Module
    task: Task
    optimizer: torch.optim.Optimizer
    device: torch.device
    rank: int
    distributed: bool


@dataclass(frozen=True)
class LoopResult:
    losses: list[float]  # mean over ranks, one per step
    step_times_s: list[float]  # this rank's, warm-up steps excluded


def run_train(args: argparse.Namespace, session: Session) -> Outcome:
    if args.steps < 2:
        raise ValueError("--steps must be >= 2 to see the loss move")
    setup = _setup(args, session)
    loop = train_loop(setup, args.steps)
    metrics = _metrics(args, setup, loop)  # first: the peak memory is training's, not the check's
    params = full_parameters(setup.model)
    if args.inject_param_skew == setup.rank:  # test-only fault injection (--inject-param-skew)
        params = _skewed(params)
    checksum = param_checksum(params)
    spread = checksum_spread(checksum) if setup.distributed else 0
    # In single mode there is nothing to compare against: the spread is 0 by construction.
    metrics.update(
        param_checksum=int(checksum.item()), param_checksum_spread=spread, params_identical=spread == 0
    )
    reasons = _check(loop.losses[0], loop.losses[-1], spread)
    return Outcome("fail" if reasons else "pass", "; ".join(reasons), metrics)


def _setup(args: argparse.Namespace, session: Session) -> Setup:
    mode = get_mode(args.mode)
    if mode.distributed:
        device = session.start_distributed(args.backend, args.timeout_s)
        rank = dist.get_rank()
    else:
        device, rank = session.start_local(), 0
    config = ModelConfig(
        args.model, args.d_model, args.layers, args.seq_len, args.heads, args.vocab_size, args.image_size
    )
    torch.manual_seed(args.seed)  # same initial weights everywhere, whether or not the mode broadcasts them
    model = mode.wrap(build_model(config).to(device), device, WrapOptions(bf16=args.fsdp_bf16))
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    task = make_task(config, args.batch_size, args.seed, rank, device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    return Setup(model, task, optimizer, device, rank, mode.distributed)


def train_loop(setup: Setup, steps: int) -> LoopResult:
    losses, times = [], []
    for _ in range(steps):
        batch = setup.task.batch()
        start = time.perf_counter()
        setup.optimizer.zero_grad(set_to_none=True)
        loss = setup.task.loss(setup.model(batch.inputs), batch.targets)
        loss.backward()
        setup.optimizer.step()
        synchronize(setup.device)
        times.append(time.perf_counter() - start)
        losses.append(loss.detach())
    curve = torch.stack(losses).double()
    # Averaged over ranks once at the end: a collective per step would perturb the step times.
    if setup.distributed:
        dist.all_reduce(curve)
        curve /= dist.get_world_size()
    timed = times[WARMUP_STEPS:] if steps > WARMUP_STEPS else times
    return LoopResult(curve.tolist(), timed)


def _metrics(args: argparse.Namespace, setup: Setup, loop: LoopResult) -> dict[str, Any]:
    step_time = summarize(loop.step_times_s)
    samples_per_s = args.batch_size / step_time.median
    steady_samples_per_s = args.batch_size / steady_step_time(loop.step_times_s)
    tokens_per_sample = setup.task.tokens_per_sample
    memory, memory_source = peak_memory(setup.device)
    return {
        "model": args.model,
        "mode": args.mode,
        # A DTensor's numel is the whole parameter's, so this is the full count under FSDP too.
        "parameters": sum(param.numel() for param in setup.model.parameters()),
        "compute_dtype": "bfloat16" if args.fsdp_bf16 else "float32",
        "steps": args.steps,
        "warmup_steps": args.steps - len(loop.step_times_s),
        "batch_size": args.batch_size,
        "step_time_s": asdict(step_time),
        # Each timed step, so a reader can tell a steady figure from one a few slow steps moved.
        "step_times_s": [round(t, 6) for t in loop.step_times_s],
        "samples_per_s": samples_per_s,
        "tokens_per_s": samples_per_s * tokens_per_sample if tokens_per_sample else None,
        "samples_per_s_steady": steady_samples_per_s,
        "tokens_per_s_steady": steady_samples_per_s * tokens_per_sample if tokens_per_sample else None,
        "peak_memory_bytes": memory,
        "peak_memory_source": memory_source,
        "loss_first": loop.losses[0],
        "loss_last": loop.losses[-1],
        "losses": loop.losses,
    }


def steady_step_time(times: list[float]) -> float:
    """The STEADY_PERCENTILE-th step time (nearest rank): what the GPU does between bursts."""
    ordered = sorted(times)
    return ordered[min(int(len(ordered) * STEADY_PERCENTILE), len(ordered) - 1)]


def resolve_train_args(args: argparse.Namespace) -> None:
    """Fill in the flags left unset: from the --size preset if one is named, else the plain defaults.

    Raises ValueError for combinations that make no sense; done before the run, so that the report's
    params show the values actually used.
    """
    if args.size is not None and args.model != "transformer":
        raise ValueError(f"--size {args.size} is a transformer preset; add --model transformer")
    if args.fsdp_bf16 and args.mode != "fsdp":
        raise ValueError("--fsdp-bf16 needs --mode fsdp")
    defaults = dict(PLAIN_DEFAULTS)
    if args.size is not None:
        defaults.update(asdict(SIZES[args.size]))
    defaults["d_model"] = defaults["d_model"] or DEFAULT_D_MODEL[args.model]
    defaults["lr"] = defaults["lr"] or DEFAULT_LR[args.model]
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, value)


def _skewed(params: Iterator[torch.Tensor]) -> Iterator[torch.Tensor]:
    """This rank's copy of the first (whole) parameter, off by one in its first element."""
    first = next(params).clone()
    first.view(-1)[0] += 1.0
    yield first
    yield from params


def _check(loss_first: float, loss_last: float, spread: int) -> list[str]:
    reasons = []
    # Phrased so that a NaN loss fails too.
    if not loss_last < loss_first * REQUIRED_LOSS_RATIO:
        reasons.append(
            f"loss did not fall enough: first {loss_first:.4g}, last {loss_last:.4g} "
            f"(must end below {REQUIRED_LOSS_RATIO} x first)"
        )
    if spread != 0:
        reasons.append(f"replicas diverged: parameter checksum spread {spread}")
    return reasons
