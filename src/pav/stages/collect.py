"""Collect: fetch every host's results and logs into run_dir/hosts/NAME/."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any

from pav.context import RunContext
from pav.hostlist import compress
from pav.stages.playbook import play, record_hosts


def run(ctx: RunContext) -> str:
    # The role fetches each host's archive (validate's playbook may have for some or all hosts already:
    # ctx.collected); unpacking here costs no module run per host.
    left = [name for name in ctx.host_names if name not in ctx.collected]
    ctx.collected = set()  # used once: a later round (isolation's re-runs) collects anew
    failed: set[str] = set()
    if left:
        outcome = play(ctx, "collect", "collect.yml", {"collect_unpack": False}, hosts=left)
        record_hosts(ctx, outcome, "collect")
        failed = outcome.failed_hosts
    broken = {host.name: error for host in ctx.hosts if (error := unpack(ctx.run_dir / "hosts" / host.name))}
    for name in broken:
        ctx.results.hosts[name].status = "failed"
    for host in ctx.hosts:
        after = counters_after(ctx.run_dir / "hosts" / host.name)
        if after is not None and host.name in ctx.results.hosts:
            ctx.results.hosts[host.name].facts["gpus_after"] = after
    missing = sorted(failed | set(broken))
    # A host that cannot be collected from keeps its tests as errors; the run goes on to the report.
    return (
        f"collected from {len(ctx.hosts) - len(missing)} host(s)"
        + (f"; missing: {compress(missing)}" if missing else "")
        + "".join(f"; {error}" for error in broken.values())
    )


def unpack(host_dir: Path) -> str | None:
    """results.tgz beside the host's facts, then the archive removed (as the role's own unpack would); the
    error, if it cannot be unpacked."""
    archive = host_dir / "results.tgz"
    if not archive.is_file():
        return None
    try:
        with tarfile.open(archive) as tar:
            tar.extractall(host_dir, filter="data")  # a host's archive cannot write outside its folder
    except (tarfile.TarError, OSError) as exc:
        return f"could not unpack {archive} ({exc}); that host's results stay in the archive"
    archive.unlink()
    return None


# The facts read again after the tests (roles/run_tests): the error counters' second reading.
AFTER = "results/gpu-facts-after.json"


def counters_after(host_dir: Path) -> dict[str, Any] | None:
    """The host's second facts read, or None where it made none (no counters to read) or it is unreadable
    (error_counters is then not judged for the host: the facts say why nothing was compared)."""
    try:
        data = json.loads((host_dir / AFTER).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
