"""Teardown: destroy what this env provisioned, or remove the run's work dir from static hosts."""

from __future__ import annotations

import re

from pav.context import RunContext
from pav.hostlist import compress
from pav.stages.playbook import play, torn_down
from pav.stages.provision import terraform_env


def run(ctx: RunContext) -> str:
    if ctx.options.keep:
        return kept(ctx)
    if ctx.env.provisions:
        destroyed = terraform_env(ctx).destroy()
        ctx.results.destroyed = destroyed
        said = f"destroyed {len(destroyed)} resource(s)" if destroyed else "nothing to destroy"
        return said + whose(ctx)
    if not ctx.hosts:
        return "no hosts: nothing to remove"
    # Validate's playbook may have done it already for some or all hosts (ctx.torn_down).
    done = dict(ctx.torn_down)
    rest = [name for name in ctx.host_names if name not in done]
    failed: set[str] = set()
    if rest:
        outcome = play(ctx, "teardown", "teardown.yml", hosts=rest)
        failed = outcome.failed_hosts
        done |= torn_down(outcome)
    left = sorted(failed)
    # The task changes a host when it removed the run's folder, or killed what the run left, or both.
    removed = sorted(h for h, changed in done.items() if changed)
    # A folder templated per host (pav_remote_dir with {{ inventory_hostname }}) reads as HOST here.
    where = re.sub(r"\{\{\s*inventory_hostname\s*\}\}", "HOST", ctx.remote_run_dir)
    said = (
        f"removed {where} on {len(removed)} of {len(ctx.hosts)} host(s)"
        if removed
        else f"{where} was on no host"
    )
    if not removed and "validate" not in ctx.options.stages:
        said += " (a kept run's work goes with --stages teardown --run-dir ITS_RUN_DIR)"
    return said + (f"; failed on {compress(left)}" if left else "")


def kept(ctx: RunContext) -> str:
    later = f"--stages teardown --run-dir {ctx.run_dir} removes it"
    if ctx.env.provisions:
        later += f", --reuse {ctx.results.reused or ctx.results.run_id} runs on it (other runs refuse it)"
    return f"kept (--keep): nothing removed; {later}"


def whose(ctx: RunContext) -> str:
    """Whose hosts a destroy took, where they were not this run's own."""
    if ctx.results.kept_run:
        return f" of kept run {ctx.results.kept_run['run_id']}"
    if ctx.results.reused:
        return f" kept by run {ctx.results.reused}"
    if ctx.leftover and not ctx.wants("provision"):
        return f": what {ctx.leftover}"
    return ""
