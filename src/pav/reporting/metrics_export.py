"""Where a run's metrics go (pav.reporting.metrics): node_exporter's textfile collector (--metrics-textfile
DIR) and a Prometheus pushgateway (--pushgateway URL). Neither raises: each outcome is an Export the summary
lists, so a full disk or a dead gateway never costs the run its results or changes its verdict."""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from dataclasses import asdict, dataclass
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
