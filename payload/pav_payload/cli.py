"""Command line: ``python -m pav_payload {collectives,train,probe,facts,host-facts,suite} ...``, mostly
under torchrun."""

import argparse
import sys

from pav_payload import burn, sdc
from pav_payload.bandwidth import OPS
from pav_payload.collectives import DTYPES, run_collectives
from pav_payload.gpu_facts import FACTS_HELP, add_facts_arguments, print_facts
from pav_payload.host_facts import print_host_facts
from pav_payload.models import MODELS, SIZES
from pav_payload.parallel import MODES
from pav_payload.probe import run_probe
from pav_payload.runner import run
from pav_payload.runtime import BACKENDS
from pav_payload.suite import add_parser as add_suite_parser
from pav_payload.train import resolve_train_args, run_train

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
    coll.add_argument(
        "--inject-hang",
        type=int,
        default=-1,
        metavar="RANK",
        help="FOR TESTING ONLY: this rank stops before the first collective and ignores SIGTERM",
    )
    coll.add_argument(
        "--inject-exit",
        type=int,
        default=-1,
        metavar="RANK",
        help="FOR TESTING ONLY: this rank exits with code 3 after joining the process group",
    )
    coll.set_defaults(handler=run_collectives, kind="collectives")

    train = commands.add_parser("train", parents=[common], help="short training run that must learn")
    train.add_argument("--model", choices=tuple(MODELS), default="mlp")
    train.add_argument(
        "--mode",
        choices=MODES,
        default="ddp",
        help="ddp: replicas; fsdp: FSDP2 shards; single: one device, no process group",
    )
    train.add_argument("--fsdp-bf16", action="store_true", help="fsdp on CUDA: bf16 compute, fp32 reduce")
    train.add_argument(
        "--size",
        choices=tuple(SIZES),
        default=None,
        help="transformer preset (1b: d-model 2048, 20 layers, 16 heads, vocab 32000, seq-len 2048, "
        "batch-size 4, lr 3e-4); the flags below override its fields",
    )
    train.add_argument("--steps", type=int, default=20)
    train.add_argument("--lr", type=float, default=None, help="default: mlp 1e-2, transformer 3e-3")
    train.add_argument(
        "--d-model",
        type=int,
        default=None,
        help="width (default: mlp 256, transformer 128, resnet50 64 = stem channels)",
    )
    train.add_argument("--layers", type=int, default=None, help="default 2")
    train.add_argument("--heads", type=int, default=None, help="transformer only; default 4")
    train.add_argument("--vocab-size", type=int, default=None, help="transformer only; default 1000")
    train.add_argument("--seq-len", type=int, default=None, help="transformer only; default 64")
    train.add_argument("--image-size", type=int, default=224, help="resnet50 only: input height and width")
    train.add_argument("--batch-size", type=int, default=None, help="per rank; default 32")
    train.add_argument("--seed", type=int, default=0)
    train.add_argument("--test-id", default="train")
    train.add_argument(
        "--inject-param-skew",
        type=int,
        default=-1,
        metavar="RANK",
        help="FOR TESTING ONLY: perturb this rank's parameters after training",
    )
    train.set_defaults(handler=run_train, kind="train", resolve=resolve_train_args)

    probe = commands.add_parser(
        "probe",
        parents=[common],
        help="one process per host: all GPUs' bf16 GEMM, HBM and host copies at once, then each pair's copy",
    )
    probe.add_argument("--gemm-n", type=int, default=8192, help="square bf16 matmul size (default 8192)")
    probe.add_argument("--hbm-mib", type=int, default=1024, help="device-to-device copy within a GPU, MiB")
    probe.add_argument("--host-mib", type=int, default=256, help="pinned host<->device copy, MiB")
    probe.add_argument("--p2p-mib", type=int, default=256, help="copy from one GPU to another, MiB")
    probe.add_argument("--warmup", type=int, default=3)
    probe.add_argument("--iters", type=int, default=10, help="timed repeats; the median is reported")
    probe.add_argument("--test-id", default="probe")
    probe.set_defaults(handler=run_probe, kind="probe")

    burn_in = commands.add_parser(
        "burn",
        parents=[common],
        help="burn-in: sustained bf16 GEMM and HBM load per GPU, NVML sampled, SDC at start and end",
    )
    burn.add_arguments(burn_in)
    burn_in.add_argument("--test-id", default="gpu_burn")
    burn_in.set_defaults(handler=burn.run_burn, kind="burn")

    check = commands.add_parser(
        "sdc", parents=[common], help="silent data corruption: a seeded GEMM chain, bitwise equal everywhere"
    )
    sdc.add_arguments(check)
    check.add_argument("--test-id", default="sdc_check")
    check.set_defaults(handler=sdc.run_sdc, kind="sdc")

    # Not a runner subcommand: no rank report, one JSON object on stdout (the torch_payload role reads it).
    facts = commands.add_parser("facts", help=FACTS_HELP)
    add_facts_arguments(facts)
    facts.set_defaults(direct=print_facts)
    host = commands.add_parser("host-facts", help="the host's torch and GPU facts as one JSON object")
    add_facts_arguments(host)
    host.set_defaults(direct=print_host_facts)
    add_suite_parser(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    direct = getattr(args, "direct", None)
    if direct is not None:
        return int(direct(args))
    suite = getattr(args, "suite", None)
    if suite is not None:
        return int(suite(args, parser))
    resolve = getattr(args, "resolve", None)
    if resolve is not None:
        try:
            resolve(args)
        except ValueError as exc:
            parser.error(str(exc))  # exits 2, as argparse does for any bad option: no report is written
    try:
        return run(args.kind, args, args.handler)
    except Exception as exc:  # only reached when no report could be written at all
        print(f"pav_payload: cannot write report: {exc}", file=sys.stderr)
        return EXIT_NO_REPORT
