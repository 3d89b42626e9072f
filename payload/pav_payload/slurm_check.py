"""Checks of Slurm itself, one report per task like every payload rank: ``<out>/<test-id>.rank<R>.json``.

``python -m pav_payload.slurm_check CHECK --out DIR --test-id NAME [options]``:

- cluster-state --expect-nodes N: run on the submit host before any job; every node of the cluster must be
  idle, none drained or down, and at least N of them
- cpu-binding --cpus-per-task C: in each task of an srun step; the task may run on exactly C CPUs (its
  affinity mask), and its CPUs are not shared with the other tasks of its node (compared through --out)
- gpu-binding --gpus-per-task G: in each task; CUDA_VISIBLE_DEVICES names exactly G devices, which
  nvidia-smi inside the step lists, none of them another task's on the node
- shared-fs --token-file F --token T: in one task per node; F, written by the batch script on the first
  node, holds T here too

metrics.mismatches counts what failed (the profile gates it at 0). Only the standard library.
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def _env_int(name: str, default: int = 0) -> int:
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        return default


def _run(argv: list[str]) -> tuple[int, str]:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 127, str(exc)
    return proc.returncode, proc.stdout + proc.stderr


def cluster_state(args: argparse.Namespace) -> tuple[list[str], dict[str, Any]]:
    rc, out = _run(["sinfo", "--noheader", "--Node", "--format=%N %T"])
    if rc != 0:
        return [f"sinfo failed (rc={rc}): {out.strip()}"], {"mismatches": 1}
    states = dict(line.split()[:2] for line in out.splitlines() if len(line.split()) >= 2)
    _, detail = _run(["scontrol", "show", "node", "--oneliner"])
    not_ready = {node: state for node, state in states.items() if state != "idle"}
    problems = [f"node {node} is {state}" for node, state in sorted(not_ready.items())]
    if len(states) < args.expect_nodes:
        problems.append(f"{len(states)} node(s) in the cluster, {args.expect_nodes} expected")
    metrics = {
        "nodes": states,
        "nodes_total": len(states),
        "nodes_idle": len(states) - len(not_ready),
        "drained": sorted(n for n, s in states.items() if "drain" in s),
        "scontrol": detail.strip().splitlines(),
        "mismatches": len(problems),
    }
    return problems, metrics


def _peers(args: argparse.Namespace, key: str, mine: list[str]) -> dict[str, list[str]]:
    """Publish what this task holds and read what the other tasks of the node hold (through --out)."""
    node = socket.gethostname()
    rank = _env_int("SLURM_PROCID")
    local_tasks = _env_int("SLURM_NTASKS_PER_NODE", 0) or _env_int("SLURM_TASKS_PER_NODE", 1)
    mark = Path(args.out) / f".{args.test_id}.{key}.{node}.{rank}"
    # Written aside, then renamed: a peer's glob must never meet the file created but not yet written (an
    # empty read failed slurm_cpu_binding once with a JSONDecodeError in the suite).
    aside = mark.with_name(f".writing{mark.name}")
    aside.write_text(json.dumps(mine))
    os.replace(aside, mark)
    deadline = time.monotonic() + 30
    pattern = f".{args.test_id}.{key}.{node}.*"
    while len(list(Path(args.out).glob(pattern))) < local_tasks and time.monotonic() < deadline:
        time.sleep(0.2)
    return {
        p.name.rsplit(".", 1)[1]: json.loads(p.read_text()) for p in Path(args.out).glob(pattern) if p != mark
    }


def cpu_binding(args: argparse.Namespace) -> tuple[list[str], dict[str, Any]]:
    cpus = sorted(os.sched_getaffinity(0))
    problems = []
    if len(cpus) != args.cpus_per_task:
        problems.append(f"task may run on {len(cpus)} CPU(s) {cpus}, {args.cpus_per_task} requested")
    others = _peers(args, "cpus", [str(c) for c in cpus])
    shared = {rank: sorted(set(map(str, cpus)) & set(theirs)) for rank, theirs in others.items()}
    problems += [f"CPUs {c} also bound to task {rank}" for rank, c in sorted(shared.items()) if c]
    metrics = {
        "cpus_allowed": cpus,
        "cpus_per_task": args.cpus_per_task,
        "slurm_cpu_bind": os.environ.get("SLURM_CPU_BIND", ""),
        "mismatches": len(problems),
    }
    return problems, metrics


def gpu_binding(args: argparse.Namespace) -> tuple[list[str], dict[str, Any]]:
    visible = [d for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d]
    problems = []
    if len(visible) != args.gpus_per_task:
        problems.append(
            f"CUDA_VISIBLE_DEVICES={','.join(visible) or '(unset)'}, {args.gpus_per_task} GPU(s) asked"
        )
    rc, out = _run(["nvidia-smi", "--query-gpu=index,uuid", "--format=csv,noheader"])
    listed = [line.split(",")[0].strip() for line in out.splitlines() if line.strip()] if rc == 0 else []
    if rc != 0:
        problems.append(f"nvidia-smi failed inside the step (rc={rc})")
    missing = [d for d in visible if d.isdigit() and d not in listed and len(listed) > len(visible)]
    problems += [f"GPU {d} is not listed by nvidia-smi in the step" for d in missing]
    others = _peers(args, "gpus", visible)
    problems += [
        f"GPU(s) {sorted(set(visible) & set(theirs))} also given to task {rank}"
        for rank, theirs in sorted(others.items())
        if len(listed) > len(visible) and set(visible) & set(theirs)  # constrained steps renumber from 0
    ]
    metrics = {
        "cuda_visible_devices": visible,
        "nvidia_smi_gpus": len(listed),
        "gpus_per_task": args.gpus_per_task,
        "mismatches": len(problems),
    }
    return problems, metrics


def shared_fs(args: argparse.Namespace) -> tuple[list[str], dict[str, Any]]:
    try:
        seen = Path(args.token_file).read_text().strip()
    except OSError as exc:
        seen, error = "", f"cannot read {args.token_file}: {exc.strerror}"
    else:
        error = (
            "" if seen == args.token else f"{args.token_file} holds {seen!r}, the writer wrote {args.token!r}"
        )
    metrics = {"token_file": args.token_file, "read_ok": int(not error), "mismatches": int(bool(error))}
    return ([error] if error else []), metrics


CHECKS = {
    "cluster-state": cluster_state,
    "cpu-binding": cpu_binding,
    "gpu-binding": gpu_binding,
    "shared-fs": shared_fs,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pav_payload.slurm_check", description=__doc__.split("\n")[0])
    parser.add_argument("check", choices=tuple(CHECKS))
    parser.add_argument("--out", default=".")
    parser.add_argument("--test-id", required=True)
    parser.add_argument("--expect-nodes", type=int, default=1)
    parser.add_argument("--cpus-per-task", type=int, default=1)
    parser.add_argument("--gpus-per-task", type=int, default=1)
    parser.add_argument("--token-file", default="")
    parser.add_argument("--token", default="")
    args = parser.parse_args(argv)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    rank = _env_int("SLURM_PROCID")
    try:
        problems, metrics = CHECKS[args.check](args)
        status = "fail" if problems else "pass"
    except Exception as exc:  # the report must be written whatever happened
        problems, metrics, status = [f"{type(exc).__name__}: {exc}"], {}, "error"
    report = {
        "test_id": args.test_id,
        "kind": "slurm_check",
        "check": args.check,
        "rank": rank,
        "world_size": _env_int("SLURM_NTASKS", 1),
        "hostname": socket.gethostname(),
        "slurm_job_id": os.environ.get("SLURM_JOB_ID", ""),
        "status": status,
        "reason": "; ".join(problems),
        "metrics": metrics,
        "schema_version": 1,
    }
    path = Path(args.out) / f"{args.test_id}.rank{rank}.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    print(f"{args.check} rank {rank} on {report['hostname']}: {status} {report['reason']}", flush=True)
    return 0 if status == "pass" else 1


if __name__ == "__main__":
    sys.exit(main())
