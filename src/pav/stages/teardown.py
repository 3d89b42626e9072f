"""Teardown: destroy what this env provisioned, or remove the run's work dir from static hosts."""

from __future__ import annotations

from pav.context import RunContext
from pav.stages.playbook import play
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
    outcome = play(ctx, "teardown", "teardown.yml")
    left = sorted(outcome.failed_hosts)
    return "removed the run's work dir on every host" + (f" except {', '.join(left)}" if left else "")
