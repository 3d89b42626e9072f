"""``collectives`` subcommand: time each op at each size, then check one run's result exactly."""

import argparse
import os
import signal
import sys
import time
from dataclasses import asdict, dataclass

import torch
import torch.distributed as dist

from pav_payload.bandwidth import OPS, algbw_gbps, busbw_gbps
from pav_payload.ops import Case, Layout, Skipped, build_case
from pav_payload.runner import Outcome
from pav_payload.session import Session
from pav_payload.sizes import parse_sizes, split_list
from pav_payload.stats import Summary, summarize
from pav_payload.timing import time_iterations

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


@dataclass(frozen=True)
class OpResult:
    op: str
    size_bytes: int
    count: int
    dtype: str
    time_us: Summary | None
    algbw_gbps: float | None
    busbw_gbps: float | None
    wrong: int
    skipped: str  # why the op did not run; empty when it ran


def run_collectives(args: argparse.Namespace, session: Session) -> Outcome:
    ops = parse_ops(args.ops)
    sizes = parse_sizes(args.sizes)
    if args.iters < 1 or args.warmup < 0:
        raise ValueError("--iters must be >= 1 and --warmup >= 0")
    device = session.start_distributed(args.backend, args.timeout_s)
    if args.dtype != "float32" and device.type != "cuda":
        raise ValueError(f"--dtype {args.dtype} is only supported on CUDA")
    layout = Layout(dist.get_rank(), dist.get_world_size(), DTYPES[args.dtype], device)
    if args.inject_hang == layout.rank:  # test-only fault injection (--inject-hang)
        _hang()
    if args.inject_exit == layout.rank:  # test-only: a rank that dies (its report stays "did not finish")
        os._exit(3)
    results = [measure(op, size, layout, args) for op in ops for size in sizes]
    if layout.rank == 0:
        _print_table(results)
    return Outcome(
        status="fail" if any(r.wrong for r in results) else "pass",
        reason=_wrong_summary(results),
        metrics={"results": [asdict(result) for result in results]},
    )


def parse_ops(text: str) -> list[str]:
    ops = split_list(text)
    unknown = sorted(set(ops) - set(OPS))
    if unknown:
        raise ValueError(f"unknown ops {unknown}; choose from {', '.join(OPS)}")
    return ops


def measure(op: str, size: int, layout: Layout, args: argparse.Namespace) -> OpResult:
    try:
        case = build_case(op, size, layout)
    except Skipped as skip:
        return OpResult(op, size, 0, args.dtype, None, None, None, 0, str(skip))
    case.parts.reset()
    for _ in range(args.warmup):
        case.parts.run()
    times = summarize(time_iterations(case.parts.run, args.iters, layout.device))
    # test-only fault injection (--inject-wrong): one rank's results
    wrong = verify(case, corrupt=args.inject_wrong == layout.rank)
    return OpResult(
        op=op,
        size_bytes=case.size_bytes,
        count=case.count,
        dtype=args.dtype,
        time_us=times,
        algbw_gbps=algbw_gbps(case.size_bytes, times.median),
        busbw_gbps=busbw_gbps(op, layout.world, case.size_bytes, times.median),
        wrong=wrong,
        skipped="",
    )


def verify(case: Case, corrupt: bool) -> int:
    """Runs the op once more on fresh data and counts elements that differ from the prediction."""
    case.parts.reset()
    case.parts.run()
    if corrupt:
        case.parts.result.view(-1)[0] += 1
    return int((case.parts.result != case.parts.expected()).sum().item())


def _hang() -> None:
    """Stop for good, deaf to SIGTERM, as a rank stuck in a driver call is: only SIGKILL ends it."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    while True:
        time.sleep(60)


def _wrong_summary(results: list[OpResult], shown: int = 3) -> str:
    failed = [f"{r.op} {r.size_bytes}B ({r.wrong} wrong)" for r in results if r.wrong]
    if not failed:
        return ""
    more = f" and {len(failed) - shown} more" if len(failed) > shown else ""
    return f"wrong results in {len(failed)} of {len(results)} checks: {', '.join(failed[:shown])}{more}"


def _print_table(results: list[OpResult]) -> None:
    print(f"{'op':>15} {'bytes':>12} {'median_us':>11} {'algbw':>8} {'busbw':>8} {'wrong':>6}")
    for r in results:
        if r.time_us is None:
            print(f"{r.op:>15} {r.size_bytes:>12} skipped: {r.skipped}")
            continue
        print(
            f"{r.op:>15} {r.size_bytes:>12} {r.time_us.median:>11.1f} "
            f"{r.algbw_gbps:>8.3f} {r.busbw_gbps:>8.3f} {r.wrong:>6}"
        )
    sys.stdout.flush()
