"""Teardown: destroy what this run provisioned and remove its work dir from the hosts."""

from __future__ import annotations

from pav.ansible_exec import run_playbook
from pav.context import RunContext


def run(ctx: RunContext) -> str:
    if ctx.options.keep:
        return "kept (--keep): nothing removed"
    if not ctx.hosts:
        return "no hosts: nothing to remove"
    outcome = run_playbook(
        "teardown",
        "teardown.yml",
        ctx.inventory_file,
        ctx.host_names,
        ctx.run_dir / "ansible" / "teardown",
        ctx.extravars(),
        verbose=ctx.options.verbose,
    )
    left = sorted(outcome.failed_hosts)
    return "removed the run's work dir on every host" + (f" except {', '.join(left)}" if left else "")
