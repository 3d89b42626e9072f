"""Collect: fetch every host's results and logs into run_dir/hosts/NAME/."""

from __future__ import annotations

from pav.context import RunContext
from pav.stages.playbook import play, record_hosts


def run(ctx: RunContext) -> str:
    outcome = play(ctx, "collect", "collect.yml")
    record_hosts(ctx, outcome, "collect")
    missing = sorted(outcome.failed_hosts)
    # A host that cannot be collected from keeps its tests as errors; the run goes on to the report.
    return f"collected from {len(ctx.hosts) - len(missing)} host(s)" + (
        f"; missing: {', '.join(missing)}" if missing else ""
    )
