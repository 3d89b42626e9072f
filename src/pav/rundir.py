"""The run dir: made, and proven writable with room to spare, before anything is provisioned."""

from __future__ import annotations

import errno
import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pav import paths
from pav.errors import PavError

MIN_FREE_BYTES = 64 * 1024 * 1024


def new_run_id(env: str) -> str:
    """UTC to the millisecond (ISO 8601 basic): the id names the run's folder on every host and marks its
    processes, so two runs started in the same second on the same hosts (CI jobs, parallel tests) must not
    share one: one's teardown would kill the other's launches and remove its folder."""
    now = datetime.now(UTC)
    return f"{now:%Y%m%dT%H%M%S}.{now.microsecond // 1000:03d}Z-{env}"


@contextmanager
def prepared(run_dir: Path) -> Iterator[Path]:
    """The run dir made and proven usable before the run takes anything else (an env's state), and gone
    again where the run was refused before it wrote a file there (a busy or kept env): nothing is left."""
    fresh = not run_dir.exists()
    prepare(run_dir)
    try:
        yield run_dir
    except PavError:
        if fresh:
            with suppress(OSError):  # not empty: the run wrote its record, which stays
                run_dir.rmdir()
        raise


def prepare(run_dir: Path) -> Path:
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        probe = run_dir / ".write-probe"
        probe.write_text("ok")
        probe.unlink()
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            full = f"run dir {run_dir}: its disk is full; free space or pass --run-dir elsewhere"
            raise PavError(full) from None
        raise PavError(
            f"run dir {run_dir} is not writable ({exc.strerror}); pass --run-dir with a writable folder"
        ) from None
    free = shutil.disk_usage(run_dir).free
    if free < MIN_FREE_BYTES:
        mib = 1024 * 1024
        raise PavError(
            f"run dir {run_dir} has {free // mib} MiB free, under the {MIN_FREE_BYTES // mib} MiB needed; "
            "free space or pass --run-dir elsewhere"
        )
    return run_dir


def results_root(chosen: Path | None = None) -> Path:
    """Where run dirs live and `history` looks: --results-root, else PAV_RESULTS_ROOT, else the checkout's
    runs/, or installed from a wheel $XDG_DATA_HOME (~/.local/share)/provision-and-validate/runs (never the
    current folder: a run and a later `history` from another folder must meet; never site-packages)."""
    if chosen is not None:
        return chosen
    return Path(os.environ.get("PAV_RESULTS_ROOT") or os.environ.get("PAV_RUNS") or default_results_root())


def default_results_root() -> Path:
    if paths.from_checkout():
        return paths.ROOT / "runs"
    data = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return data / "provision-and-validate" / "runs"


def kept_run_id(run_dir: Path, env: str) -> str | None:
    """The id of the run whose dir this is (its results.json, same env), for a later stage subset that
    launches nothing (teardown, collect, report of a --keep run): it must act on that run's work."""
    found = recorded_run(run_dir)
    return found.run_id if found is not None and found.env == env else None


@dataclass(frozen=True)
class RecordedRun:
    run_id: str
    env: str
    inventory: str  # results.json's inventory: the hosts file, or the Terraform root
    state_dir: str = ""  # where the env's Terraform state was ("": an env that provisions nothing)
    left_hosts: bool = False  # the run provisioned (or reused) hosts and left them up: --keep, or no teardown


def recorded_run(run_dir: Path) -> RecordedRun | None:
    """The run whose record (results.json) this dir holds, or None where it holds none."""
    data = _record(run_dir)
    run_id, env, inventory = data.get("run_id"), data.get("env"), data.get("inventory")
    if not isinstance(run_id, str) or not isinstance(env, str):
        return None
    state = data.get("state_dir")
    state = state if isinstance(state, str) else ""
    return RecordedRun(
        run_id, env, inventory if isinstance(inventory, str) else "", state, _left(data, state)
    )


def _left(data: dict[str, Any], state: str) -> bool:
    """Whether the record says the run's hosts were left up. Records before issue 64 lack `kept`: there, a
    run that recorded a state dir and whose teardown did not run, or only said it kept them."""
    kept = data.get("kept")
    if isinstance(kept, dict):
        return bool(kept.get("resources"))
    if not state:
        return False
    stages = [s for s in data.get("stages") or [] if isinstance(s, dict) and s.get("name") == "teardown"]
    return not stages or str(stages[0].get("detail", "")).startswith("kept")


def reused_by(run_dir: Path) -> str:
    """The run whose kept hosts the run of this dir ran on (--reuse), or ""."""
    reused = _record(run_dir).get("reused")
    return reused if isinstance(reused, str) else ""


def _record(run_dir: Path) -> dict[str, Any]:
    try:
        data = json.loads((run_dir / "results.json").read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def default_run_dir(run_id: str, root: Path | None = None) -> Path:
    return results_root(root) / run_id
