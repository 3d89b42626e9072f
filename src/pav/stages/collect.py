"""Collect: fetch every host's results and logs into run_dir/hosts/NAME/."""

from __future__ import annotations

import tarfile
from pathlib import Path

from pav.context import RunContext
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
    missing = sorted(failed | set(broken))
    # A host that cannot be collected from keeps its tests as errors; the run goes on to the report.
    return (
        f"collected from {len(ctx.hosts) - len(missing)} host(s)"
        + (f"; missing: {', '.join(missing)}" if missing else "")
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
