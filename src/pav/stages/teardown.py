"""Teardown: destroy what this env provisioned, or remove the run's work dir from static hosts."""

from __future__ import annotations

from pav.ansible_exec import run_playbook
from pav.context import RunContext
from pav.stages.provision import terraform_env


def run(ctx: RunContext) -> str:
    if ctx.options.keep:
        return "kept (--keep): nothing removed; a later --stages teardown removes it"
    if ctx.env.provisions:
        destroyed = terraform_env(ctx).destroy()
        ctx.results.destroyed = destroyed
        return f"destroyed {len(destroyed)} resource(s)" if destroyed else "nothing to destroy"
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
        limit=ctx.limit,
    )
    left = sorted(outcome.failed_hosts)
    return "removed the run's work dir on every host" + (f" except {', '.join(left)}" if left else "")
