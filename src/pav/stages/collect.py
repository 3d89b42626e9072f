"""Collect: fetch every host's results and logs into run_dir/hosts/NAME/."""

from __future__ import annotations

from pav.ansible_exec import run_playbook
from pav.context import RunContext
from pav.stages.configure import record_hosts


def run(ctx: RunContext) -> str:
    outcome = run_playbook(
        "collect",
        "collect.yml",
        ctx.inventory_file,
        ctx.host_names,
        ctx.run_dir / "ansible" / "collect",
        ctx.extravars(),
        verbose=ctx.options.verbose,
        limit=ctx.limit,
    )
    record_hosts(ctx, outcome, "collect")
    missing = sorted(outcome.failed_hosts)
    # A host that cannot be collected from keeps its tests as errors; the run goes on to the report.
    return f"collected from {len(ctx.hosts) - len(missing)} host(s)" + (
        f"; missing: {', '.join(missing)}" if missing else ""
    )
