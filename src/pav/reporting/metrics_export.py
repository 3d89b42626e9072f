"""Where a run's metrics go (pav.reporting.metrics): node_exporter's textfile collector (--metrics-textfile
DIR) and a Prometheus pushgateway (--pushgateway URL). Neither raises: each outcome is an Export the summary
lists, so a full disk or a dead gateway never costs the run its results or changes its verdict."""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pav.reporting import metrics, pushgateway
from pav.reporting.exposition import Family, render
from pav.secrets.basic_auth import BasicAuth


@dataclass(frozen=True)
class Export:
    to: str  # textfile | pushgateway
    where: str  # the file written, or the gateway (credentials left out)
    ok: bool
    detail: str  # what was sent, or what failed and the fix

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def export(
    results: dict[str, Any], textfile: Path | None, url: str | None, auth: BasicAuth | None = None
) -> list[Export]:
    """The run's metrics to each target given: none given, nothing is built, written or sent. auth: the
    pushgateway's basic auth (pav.reporting.pushgateway.credentials)."""
    if textfile is None and url is None:
        return []
    env = str(results.get("env") or "")
    try:
        families = metrics.families(results)
    except Exception as exc:  # a bug must not cost the run's files: the summary names it instead
        why = f"internal error: {exc!r}; fix: report it with the run's results.json (nothing was exported)"
        return [Export("build", "pav.reporting.metrics", False, why)]
    out = [write_textfile(textfile, env, families)] if textfile is not None else []
    if url is not None:
        ok, detail = pushgateway.push(url, env, families, auth)
        out.append(Export("pushgateway", pushgateway.public_url(url), ok, detail))
    return out


def textfile_name(env: str) -> str:
    """pav-ENV.prom: this tool's file among node_exporter's, one per env, so envs can share a DIR."""
    return f"pav-{re.sub(r'[^A-Za-z0-9_.-]', '_', env) or 'env'}.prom"


def textfile_dir_problem(directory: Path) -> str | None:
    """Why the run could not write its textfile into `directory` (the write makes no folder: it is
    node_exporter's), as one line with the fix; None where it could. Reads only: for --dry-run."""
    flag = f"--metrics-textfile {directory}"
    if not directory.exists():
        return f"{flag} does not exist; create it (node_exporter's --collector.textfile.directory) or fix it"
    if not directory.is_dir():
        return (
            f"{flag} is not a folder; pass node_exporter's textfile folder (--collector.textfile.directory)"
        )
    if not os.access(directory, os.W_OK | os.X_OK):
        return (
            f"{flag} is not writable by this user (uid {os.getuid()}); make it writable (docs/nightly.md: "
            "chgrp USER DIR && chmod g+w DIR) or pass another folder"
        )
    return None


def write_textfile(directory: Path, env: str, families: list[Family]) -> Export:
    """Write, then rename: node_exporter never reads half a file (it reads only names ending in .prom)."""
    target = directory / textfile_name(env)
    try:
        _replace(target, render(families))
    except OSError as exc:
        why = exc.strerror or str(exc)
        fix = f"create {directory} or make it writable by this user (node_exporter's textfile directory)"
        return Export("textfile", str(target), False, f"{why}; fix: {fix}")
    return Export("textfile", str(target), True, f"{_count(families)} samples written")


# A run id starts with the UTC time the run started (pav.rundir.new_run_id): 20261124T230320.512Z-ENV.
RUN_ID_START = re.compile(r"(\d{8}T\d{6})(?:\.(\d{1,6}))?Z-")
RUN_INFO_ID = re.compile(r'^pav_run_info\{[^\n]*?\brun_id="((?:[^"\\\n]|\\.)*)"', re.M)
RUN_END = re.compile(r"^pav_run_timestamp_seconds(?:\{[^\n]*\})? (\S+)$", re.M)


@dataclass(frozen=True)
class Newer:
    """The run whose metrics a textfile holds, where it is newer than the run about to be written."""

    path: Path
    run_id: str


def newer_in_textfile(directory: Path, results: dict[str, Any]) -> Newer | None:
    """The run whose metrics DIR/pav-ENV.prom holds now, where that run is newer than the run of `results`:
    started later (both run ids begin with their start, UTC), else, where an id says no start, ended later
    (pav_run_timestamp_seconds against results.json's `ended`). None where the file is missing, unreadable,
    holds no run of ours, holds this run, or an older one: nothing newer would be lost by writing it."""
    target = directory / textfile_name(str(results.get("env") or ""))
    try:
        text = target.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    found = RUN_INFO_ID.search(text)
    if found is None:
        return None
    there = re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), found.group(1))
    mine = str(results.get("run_id") or "")
    if there == mine:
        return None
    theirs_start, my_start = _started(there), _started(mine)
    if theirs_start is not None and my_start is not None:
        return Newer(target, there) if theirs_start > my_start else None
    end = RUN_END.search(text)
    try:
        theirs_end = float(end.group(1)) if end else None
        my_end = metrics.unix_time(str(results["ended"])) if results.get("ended") else None
    except ValueError:
        return None
    if theirs_end is not None and my_end is not None and theirs_end > my_end:
        return Newer(target, there)
    return None


def _started(run_id: str) -> datetime | None:
    found = RUN_ID_START.match(run_id)
    if found is None:
        return None
    try:
        whole = datetime.strptime(found.group(1), "%Y%m%dT%H%M%S").replace(tzinfo=UTC)
    except ValueError:
        return None
    fraction = found.group(2) or "0"
    return whole.replace(microsecond=int(fraction.ljust(6, "0")))


def _replace(target: Path, text: str) -> None:
    """The textfile directory may be writable by others (node_exporter's group): a fixed temp name there
    could be a planted link, which a write and a chmod follow. mkstemp creates a new file (O_EXCL) and the
    mode is set on that file's descriptor, never through a name."""
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fchmod(out.fileno(), 0o644)  # node_exporter runs as its own user
            os.fsync(out.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _count(families: list[Family]) -> int:
    return sum(len(f.samples) for f in families)
