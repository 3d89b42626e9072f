"""Submit one job script with sbatch, wait for its end, and leave what the driver judges in --out.

``python -m pav_payload.slurm_job --script S --out results/TEST [--gather DIR]``, run on a node of the
cluster by the run_tests role like any launch. It writes, in --out:

- slurm.json: job id, state, exit code, node list, the paths of the script and log (schema in
  docs/results.md, test field ``slurm``)
- job.log (the job's output, also echoed to stdout: the launcher log) and job.sbatch (the script)
- with --gather: the rank reports the job's tasks wrote in DIR (on the shared filesystem), which is
  removed afterwards
- with --record-to DIR (repeatable): slurm.json, job.log and job.sbatch in DIR too, for a job that runs
  several tests (a host's suites): each test's results carry the job it ran in

Exit code: the job's (scontrol's ExitCode), 1 when it ended in a failed state with code 0, 124 when this
process was told to stop (the launch's timeout): the job is cancelled first.
Only the standard library: it runs before and apart from torch.
"""

import argparse
import contextlib
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType

TERMINAL = {
    "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE",
    "PREEMPTED", "SPECIAL_EXIT",
}  # fmt: skip
EXIT_STOPPED = 124


class Stop(Exception):
    pass


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def show_job(job_id: str) -> dict[str, str]:
    """scontrol's one-line record of the job as key=value pairs; empty when the job is unknown."""
    proc = subprocess.run(
        ["scontrol", "show", "job", "--oneliner", job_id], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        return {}
    fields: dict[str, str] = {}
    for token in proc.stdout.split():
        key, sep, value = token.partition("=")
        if sep:
            fields[key] = value
    return fields


def submit(script: Path) -> str:
    proc = subprocess.run(["sbatch", "--parsable", str(script)], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"sbatch {script} failed (rc={proc.returncode}): {proc.stderr.strip()}")
    return proc.stdout.strip().split(";")[0]


def wait(job_id: str, poll_s: float) -> dict[str, str]:
    while True:
        job = show_job(job_id)
        if job.get("JobState") in TERMINAL:
            return job
        time.sleep(poll_s)


def cancel(job_id: str) -> dict[str, str]:
    """Within the 10 seconds the launch's `timeout -k 10` leaves; KillWait decides when Slurm SIGKILLs."""
    subprocess.run(["scancel", job_id], capture_output=True, check=False)
    deadline = time.monotonic() + 8
    job = show_job(job_id)
    while job.get("JobState") not in TERMINAL and time.monotonic() < deadline:
        time.sleep(0.5)
        job = show_job(job_id)
    return job


def exit_code(job: dict[str, str]) -> tuple[int, int]:
    """ExitCode=CODE:SIGNAL of the batch script."""
    code, _, sig = job.get("ExitCode", "0:0").partition(":")
    try:
        return int(code), int(sig or 0)
    except ValueError:
        return 0, 0


def record(out: Path, script: Path, job_id: str, job: dict[str, str], submitted: str, stopped: bool) -> int:
    code, sig = exit_code(job)
    state = job.get("JobState", "UNKNOWN")
    log_src = Path(job.get("StdOut", ""))
    if log_src.is_file():
        shutil.copyfile(log_src, out / "job.log")
        sys.stdout.write((out / "job.log").read_text(errors="replace"))
    shutil.copyfile(script, out / "job.sbatch")
    info = {
        "job_id": job_id,
        "state": state,
        "exit_code": code,
        "signal": sig,
        "reason": job.get("Reason", ""),
        "nodes": job.get("NodeList", ""),
        "batch_host": job.get("BatchHost", ""),
        "submitted": submitted,
        "start_time": job.get("StartTime", ""),
        "end_time": job.get("EndTime", ""),
        "script": str(out / "job.sbatch"),
        "log": str(out / "job.log"),
        "stopped_by_timeout": stopped,
    }
    (out / "slurm.json").write_text(json.dumps(info, indent=2) + "\n")
    print(f"pav: slurm job {job_id} {state} exit code {code}:{sig}", flush=True)
    if stopped:
        return EXIT_STOPPED
    if code == 0 and (state != "COMPLETED" or sig):
        return 1
    return code


def gather(src: Path, out: Path) -> None:
    if not src.is_dir():
        return
    for report in src.glob("*.rank*.json"):
        shutil.copyfile(report, out / report.name)
    shutil.rmtree(src, ignore_errors=True)
    # The run's folder on the shared filesystem goes with its last job.
    with contextlib.suppress(OSError):
        src.parent.rmdir()


def copy_record(out: Path, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("slurm.json", "job.log", "job.sbatch"):
        if (out / name).is_file():
            shutil.copyfile(out / name, folder / name)


def private_dir(folder: Path) -> None:
    """The run's folder on the shared filesystem, where every node's tasks start Python (issue 47): made
    0700 by this user, or, made already by an earlier job of the run, still this user's and closed to others.
    Anyone else's folder there is refused, never used."""
    with contextlib.suppress(FileExistsError):
        folder.mkdir(mode=0o700)
    found = folder.lstat()
    if stat.S_ISLNK(found.st_mode) or found.st_uid != os.geteuid() or found.st_mode & 0o077:
        raise SystemExit(
            f"pav: the run's shared folder {folder} is not this user's private folder (uid {found.st_uid}, "
            f"mode {stat.S_IMODE(found.st_mode):o}); someone else made it: remove it and run again"
        )


def _raise_stop(signum: int, frame: FrameType | None) -> None:
    raise Stop(signal.Signals(signum).name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pav_payload.slurm_job", description=__doc__.split("\n")[0])
    parser.add_argument("--script", type=Path, required=True, help="the job script to sbatch")
    parser.add_argument("--out", type=Path, required=True, help="folder for slurm.json, job.log, reports")
    parser.add_argument("--gather", type=Path, help="folder whose rank reports are moved into --out")
    parser.add_argument("--mkdir", type=Path, action="append", default=[], help="folder to make first")
    parser.add_argument("--private-dir", type=Path, help="the run's shared folder: made 0700, or refused")
    parser.add_argument("--record-to", type=Path, action="append", default=[], help="another test's folder")
    parser.add_argument("--poll-s", type=float, default=1.0)
    args = parser.parse_args(argv)
    if args.private_dir is not None:
        private_dir(args.private_dir)
    for folder in [args.out, *args.mkdir]:
        folder.mkdir(parents=True, exist_ok=True)
    # The job's tasks run this Python too (the job script calls "$PAV_PYTHON"), wherever they land.
    os.environ["PAV_PYTHON"] = sys.executable
    signal.signal(signal.SIGTERM, _raise_stop)
    signal.signal(signal.SIGINT, _raise_stop)
    submitted = utc_now()
    job_id = ""
    try:
        job_id = submit(args.script)
        print(f"pav: submitted {args.script} as slurm job {job_id}", flush=True)
        job, stopped = wait(job_id, args.poll_s), False
    except Stop:
        if not job_id:
            return EXIT_STOPPED
        job, stopped = cancel(job_id), True
    except RuntimeError as exc:
        print(f"pav: {exc}", file=sys.stderr)
        return 1
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    code = record(args.out, args.script, job_id, job, submitted, stopped)
    if args.gather:
        gather(args.gather, args.out)
    for folder in args.record_to:
        copy_record(args.out, folder)
    return code


if __name__ == "__main__":
    sys.exit(main())
