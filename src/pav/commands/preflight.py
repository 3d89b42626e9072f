"""preflight [--expect-gpus N] [--gpu-state KEY=VALUE] [--expect-version COMPONENT=VERSION] [--timeout-s S]
[--facts FILE] [--json]: this node's state in about a second, no test (issue 50): the GPUs another process
holds (gpu_leftovers: a user problem), what gpu_health names from the facts alone (an NVLink link or RDMA
port down or slow, a PCIe link trained narrow, ECC errors, row remapping, fatal Xids, clocks held back, a
capped power limit, an InfoROM, recovery action or NVSwitch fabric fault; a setting not as pav_gpu_state's
defaults or --gpu-state say: a configuration problem), and software other than --expect-version pins. One
`FAIL:` line per problem. The error counters need a run between two reads: the run judges them.

For a Slurm Prolog or HealthCheckProgram, and a Kubernetes init container (docs/preflight.md): exit 0 the
node is fit (one `OK:` line), 1 a problem, 2 the state could not be read (one `error:` line).

It reads what configure's facts read does (`python -m pav_payload facts`: NVML, else nvidia-smi, and the
kernel log's Xid lines; no torch), in a child process with a hard time limit: NVML can hang on a GPU that
fell off the bus. --facts judges that command's saved output instead (another node's, a recorded one).
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from pav import paths
from pav.errors import PavError
from pav.printable import printable
from pav.results import HostRecord
from pav.thresholds import health, leftovers, versions
from pav.thresholds.node_policy import NodePolicy, node_policy

EXIT_OK, EXIT_FAIL, EXIT_UNREAD = 0, 1, 2
WHOSE = {"config": "configuration"}  # how a FAIL line names a category
# `python -I -c RUN_PAYLOAD DIR ARGS...` runs `python -m pav_payload ARGS...` with DIR first on sys.path and
# nothing of the working dir or the environment on it (roles/torch_payload/tasks/facts_start.yml: the same).
RUN_PAYLOAD = (
    "import runpy, sys; sys.path.insert(0, sys.argv.pop(1)); "
    "runpy.run_module('pav_payload', run_name='__main__', alter_sys=True)"
)
TIMEOUT_S = 30.0  # NVML init alone can take seconds a GPU without persistence mode


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--expect-gpus", type=_count, metavar="N",
        help="the GPUs this node must show (8 on an HGX node); fewer or more is a FAIL. Default: any number",
    )  # fmt: skip
    parser.add_argument(
        "--timeout-s", type=float, default=TIMEOUT_S, metavar="S",
        help=f"how long reading the GPUs may take before the node counts as unreadable ({TIMEOUT_S:g})",
    )  # fmt: skip
    parser.add_argument(
        "--facts", type=Path, metavar="FILE",
        help="judge this saved output of `python -m pav_payload facts` instead of reading this node",
    )  # fmt: skip
    parser.add_argument(
        "--gpu-state", action="append", default=[], metavar="KEY=VALUE",
        help="what a GPU setting must be, as pav_gpu_state's keys (persistence_mode, mig_mode, ecc_mode, "
        "app_clocks; e.g. mig_mode=enabled); the others keep their defaults",
    )  # fmt: skip
    parser.add_argument(
        "--expect-version", action="append", default=[], metavar="COMPONENT=VERSION",
        help="a version this node must have, as pav_expected_versions' components (driver, cuda_driver, "
        "vbios, kernel, hca_fw; e.g. driver=580.159.04)",
    )  # fmt: skip
    parser.add_argument("--json", action="store_true", help="one JSON object: host, ok, problems, seconds")


def _count(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} is not a count of GPUs (0 or more)")
    return value


def run(args: argparse.Namespace) -> int:
    started, host = time.monotonic(), socket.gethostname()
    try:
        state, pins = _pairs(args.gpu_state, "--gpu-state"), _pairs(args.expect_version, "--expect-version")
        policy = node_policy(state, pins, "preflight")
        gpus = _saved(args.facts) if args.facts else _read(args.timeout_s)
    except PavError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_UNREAD
    problems = judge(host, gpus, args.expect_gpus, policy)
    seconds = time.monotonic() - started
    count = len(gpus.get("devices") or [])
    if args.json:
        print(json.dumps({"host": host, "ok": not problems, "gpus": count, "problems": problems,
                          "seconds": round(seconds, 3)}))  # fmt: skip
    else:
        for p in problems:
            whose = WHOSE.get(p["category"], p["category"])
            print(printable(f"FAIL: {host} {p['part']}: {p['problem']} ({whose} problem{_fix(p)})"))
        if not problems:
            fit = "none held by another process, no health problem"
            print(f"OK: {host}: {count} GPU(s), {fit} ({seconds:.2f} s)")
    return EXIT_FAIL if problems else EXIT_OK


def _pairs(items: list[str], flag: str) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key or not value:
            raise PavError(f"{flag} {item!r}: give KEY=VALUE")
        out[key] = value
    return out


def judge(
    host: str, gpus: dict[str, Any], expect: int | None, policy: NodePolicy | None = None
) -> list[dict[str, str]]:
    """The node's problems: part, problem, category (user, config, hardware), and how to clear a leftover."""
    policy = policy or NodePolicy()
    out: list[dict[str, str]] = []
    count = len(gpus.get("devices") or [])
    if expect is not None and count != expect:
        why = "; ".join(str(m) for m in gpus.get("missing") or []) or f"{gpus.get('source')} listed {count}"
        part = f"{count} GPU(s) of {expect} expected"
        out.append({"part": "GPUs", "problem": f"{part} ({why})", "category": "hardware", "fix": ""})
    record = HostRecord(host, facts={"gpus": gpus})
    for held in leftovers.find({host: record}).get(host, []):
        out.append({"part": held.gpu, "problem": held.problem, "category": leftovers.CATEGORY,
                    "fix": held.fix()})  # fmt: skip
    found = []
    if gpus.get("devices"):
        found += health.judge_host(host, gpus, record.facts, policy).threshold.get("problems") or []
    [drift] = versions.versions_results({host: record}, policy) or [None]
    found += drift.threshold.get("problems") or [] if drift else []
    out += [{"part": str(p["part"]), "problem": str(p["problem"]),
             "category": str(p.get("category") or "hardware"), "fix": ""} for p in found]  # fmt: skip
    return out


def _fix(problem: dict[str, str]) -> str:
    return f": {problem['fix']}" if problem.get("fix") else ""


def _saved(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise PavError(f"cannot read {path} as the output of `python -m pav_payload facts` ({exc})") from exc
    if not isinstance(data, dict) or not isinstance(data.get("devices"), list):
        raise PavError(f"{path} is not the output of `python -m pav_payload facts` (no 'devices' list)")
    return data


def _read(timeout_s: float) -> dict[str, Any]:
    """This node's facts, read by the payload's reader in a child process that the time limit can end."""
    # Isolated (-I: neither the working dir nor PYTHON* variables nor the user's site reach sys.path), from /,
    # with the payload put on the path by hand: run as root from a folder others can write, a planted
    # pav_payload or sitecustomize.py there is never imported (issue 62).
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-c", RUN_PAYLOAD, str(paths.PAYLOAD), "facts"],
            cwd="/", capture_output=True, text=True, timeout=timeout_s, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired as exc:
        raise PavError(
            f"the GPUs' state was not read in {timeout_s:g} s (NVML or nvidia-smi hung: a GPU off the bus?); "
            "keep the node out of service and look (nvidia-smi, dmesg)"
        ) from exc
    try:
        data = json.loads(done.stdout)
    except ValueError as exc:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise PavError(f"the GPUs' state could not be read: pav_payload facts said {tail[0]!r}") from exc
    return data if isinstance(data, dict) else {}
