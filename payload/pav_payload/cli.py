"""Command line: ``python -m pav_payload {collectives,train} ...``, usually under torchrun."""

import argparse
import sys

from pav_payload.bandwidth import OPS
from pav_payload.collectives import DTYPES, run_collectives
from pav_payload.models import MODELS
from pav_payload.parallel import MODES
from pav_payload.runner import run
from pav_payload.runtime import BACKENDS
from pav_payload.train import run_train

# Exit code when the report itself could not be written (e.g. an unwritable --out).
EXIT_NO_REPORT = 2


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--out", default=".", help="directory for <test-id>.rank<R>.json (default: .)")
    common.add_argument("--backend", choices=BACKENDS, default="auto", help="auto: nccl with CUDA, else gloo")
    common.add_argument("--timeout-s", type=float, default=300.0, help="process-group timeout in seconds")

    parser = argparse.ArgumentParser(prog="pav_payload", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    coll = commands.add_parser("collectives", parents=[common], help="collective bandwidth and correctness")
    coll.add_argument("--ops", default="all_reduce", help=f"comma list from: {','.join(OPS)}")
    coll.add_argument("--sizes", default="1K,64K,1M", help="comma list of bytes, K/M/G suffixes (x1024)")
    coll.add_argument("--warmup", type=int, default=2)
    coll.add_argument("--iters", type=int, default=5)
    coll.add_argument("--dtype", choices=tuple(DTYPES), default="float32", help="bfloat16 needs CUDA")
    coll.add_argument("--test-id", default="collectives")
    coll.add_argument(
        "--inject-wrong",
        type=int,
        default=-1,
        metavar="RANK",
        help="FOR TESTING ONLY: corrupt one element of every checked result on this rank",
    )
    coll.set_defaults(handler=run_collectives, kind="collectives")

    train = commands.add_parser("train", parents=[common], help="short training run that must learn")
    train.add_argument("--model", choices=tuple(MODELS), default="mlp")
    train.add_argument("--mode", choices=MODES, default="ddp", help="single: one device, no process group")
    train.add_argument("--steps", type=int, default=20)
    train.add_argument("--lr", type=float, default=None, help="default depends on the model")
    train.add_argument("--d-model", type=int, default=None, help="width (default: mlp 256, transformer 128)")
    train.add_argument("--layers", type=int, default=2)
    train.add_argument("--seq-len", type=int, default=64, help="transformer only")
    train.add_argument("--batch-size", type=int, default=32, help="per rank")
    train.add_argument("--seed", type=int, default=0)
    train.add_argument("--test-id", default="train")
    train.add_argument(
        "--inject-param-skew",
        type=int,
        default=-1,
        metavar="RANK",
        help="FOR TESTING ONLY: perturb this rank's parameters after training",
    )
    train.set_defaults(handler=run_train, kind="train")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return run(args.kind, args, args.handler)
    except Exception as exc:  # only reached when no report could be written at all
        print(f"pav_payload: cannot write report: {exc}", file=sys.stderr)
        return EXIT_NO_REPORT
