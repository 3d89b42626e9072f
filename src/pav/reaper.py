"""A driver's work dies with it: `python -m pav.reaper RUN_ID [--scrub RUN_DIR] [PATH...]`, started beside
the driver, ends every process marked PAV_DRIVER=RUN_ID once the driver is gone without saying it finished
(SIGKILL, the OOM killer, a lost CI runner), as its own teardown would have, and removes the paths (globs)
the driver would have removed after them (Ansible's temp dirs, the run's SSH control sockets), killing
first what names one of them in its command line (an SSH master, whose rewritten title hides its
environment). Then it scrubs RUN_DIR of secrets, as the driver's end would have
(pav.secrets.files.scrub_dead_run): ansible-runner's artifacts hold the environment Ansible ran with.

The driver holds the write end of a pipe to the reaper's stdin; the kernel closes it when the driver dies,
however it dies. A driver that finishes writes "done" first: the reaper then exits and kills nothing (a
kept run's SSH masters and hosts stay; the driver scrubbed its run dir itself). Terraform does not carry
the marker: a stopped apply loses track of what it was making (pav.terraform), so it finishes.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path

from pav.processes import DRIVER_MARKER, kill, kill_marked, named

DONE = b"done"
SWEEPS = 20  # a process being forked while a sweep ran is found by the next one


@contextmanager
def watching(run_id: str, paths: tuple[str, ...] = (), scrub: Path | None = None) -> Iterator[None]:
    """Mark what the driver starts from here with the run's id, and have it killed (and paths removed, and
    the run dir `scrub` scrubbed of secrets) if the driver dies."""
    # The driver's environment, secrets and all: the reaper scrubs their values from a dead run's files.
    env = {k: v for k, v in os.environ.items() if k != DRIVER_MARKER}
    scrubbed = ["--scrub", str(scrub.resolve())] if scrub is not None else []
    reaper = subprocess.Popen(
        [sys.executable, "-m", "pav.reaper", run_id, *scrubbed, *paths],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        start_new_session=True,  # not in the driver's process group: a Ctrl-C or a group kill misses it
    )
    os.environ[DRIVER_MARKER] = run_id
    try:
        yield
    finally:
        os.environ.pop(DRIVER_MARKER, None)
        assert reaper.stdin is not None
        try:
            reaper.stdin.write(DONE)
            reaper.stdin.close()
            reaper.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            pass


def sweep(run_id: str) -> None:
    """Kill what carries the run's marker until nothing does (what a killed parent was forking shows late)."""
    for _ in range(SWEEPS):
        if not kill_marked(f"{DRIVER_MARKER}={run_id}"):
            return
        time.sleep(0.1)


def reap(run_id: str, paths: list[str], run_dir: Path | None) -> None:
    """What a dead driver's end would have done: its processes killed, its temp paths removed, and its run
    dir scrubbed once nothing of it writes there any more."""
    sweep(run_id)
    for pattern in paths:
        for path in glob.glob(pattern):
            kill(named(path))
            shutil.rmtree(path, ignore_errors=True)
    if run_dir is not None:
        from pav.secrets.files import scrub_dead_run  # only for a dead driver: a finished one scrubbed itself

        with suppress(OSError):  # a full or read-only disk: nothing more the reaper could do
            scrub_dead_run(run_dir, os.environ)
            record_killed(run_dir)


KILLED = (
    "killed: the driver ended without finishing (SIGKILL, the OOM killer, a lost CI runner); its reaper "
    "ended what it had started on this machine; its hosts are the next run's to clean up "
    "(docs/reliability.md)"
)


def record_killed(run_dir: Path) -> None:
    """The run's record says it was killed, in which stage, and when (issue 48: it said ERROR with an empty
    error and no end; issue 64: and not where): written beside it and renamed over it, never half-written,
    readable as the run left it (0644 under the usual umask; mkstemp's 0600 made it the one file of the run
    dir others could not read, for no secret: the scrub before this took them out)."""
    path = run_dir / "results.json"
    try:
        record = json.loads(path.read_text())
        mode = path.stat().st_mode & 0o7777
    except (OSError, ValueError):
        return
    if not isinstance(record, dict) or record.get("ended"):
        return  # it finished (its end was recorded), or it is not a run's record
    stage = record.get("stage_in_progress")
    for entry in record.get("stages") or []:
        if isinstance(entry, dict) and entry.get("name") == stage and entry.get("status") == "running":
            entry["status"] = "killed"
    where = f" during stage {stage}" if isinstance(stage, str) and stage else ""
    record["error"] = record.get("error") or KILLED.replace("killed:", f"killed{where}:", 1)
    record["ended"] = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    record["verdict"] = "ERROR"
    fd, tmp = tempfile.mkstemp(dir=run_dir, prefix=".results.json.")
    with os.fdopen(fd, "w") as out:
        json.dump(record, out, indent=2)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def main(argv: list[str]) -> int:
    run_id, *paths = argv
    run_dir = None
    if paths[:1] == ["--scrub"]:
        run_dir, paths = Path(paths[1]), paths[2:]
    said = sys.stdin.buffer.read()  # until the driver closes its end: it finished, or it died
    if said != DONE:
        reap(run_id, paths, run_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
