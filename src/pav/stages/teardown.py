"""Teardown: destroy what this env provisioned, or remove the run's work dir from static hosts."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

from pav import rundir
from pav.context import RunContext
from pav.hostlist import compress
from pav.provisioning import keeper
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
    return f"kept (--keep): nothing removed; {KEPT_LINES}"


KEPT_LINES = "the summary's kept: lines remove it or run on it, as printed"
COMMAND = "provision-and-validate"


def left_up(ctx: RunContext) -> dict[str, Any]:
    """What the run leaves up for later (results.json's `kept`), with the commands that act on it as they run
    pasted into any shell: the teardown takes env and state from the run's record; the reuse names both, so
    it needs no record either. {} where nothing is left: torn down, or nothing made."""
    if not ctx.env.provisions:  # the run's work on static hosts stays only with --keep
        return {"teardown": shlex.join(_teardown(ctx))} if ctx.options.keep else {}
    state = ctx.env.state_dir
    left = keeper.resources(state)
    # As pav.ownership.settle keeps them: --keep, or no teardown among --stages.
    if not left or not (ctx.options.keep or not ctx.wants("teardown")):
        return {}
    ctx.results.state_dir = ctx.results.state_dir or str(state)  # where a later teardown must look
    reuse = [COMMAND, "--env", ctx.env.name, "--reuse", _keeper(ctx), "--keep"]
    return {
        "state_dir": str(state),
        "resources": left,
        "hosts": keeper.host_names(state),
        "teardown": shlex.join(_teardown(ctx)),
        # PAV_STATE_DIR named: the hosts are found wherever the run's record is and whatever the shell sets.
        "reuse": f"PAV_STATE_DIR={shlex.quote(str(state))} {shlex.join(reuse)}",
    }


def _teardown(ctx: RunContext) -> list[str]:
    kept_dir = ctx.results.kept_run.get("run_dir")
    run_dir = Path(kept_dir) if kept_dir else ctx.run_dir
    return [COMMAND, "--stages", "teardown", "--run-dir", str(run_dir.absolute())]


def _keeper(ctx: RunContext) -> str:
    """The run the env's record keeps the hosts for: the one --reuse must name."""
    kept = ctx.results.kept_run
    if ctx.results.reused or not kept:
        return ctx.results.reused or ctx.results.run_id
    return rundir.reused_by(Path(kept["run_dir"])) or kept["run_id"]


def whose(ctx: RunContext) -> str:
    """Whose hosts a destroy took, where they were not this run's own."""
    if ctx.results.kept_run:
        return f" of kept run {ctx.results.kept_run['run_id']}"
    if ctx.results.reused:
        return f" kept by run {ctx.results.reused}"
    if ctx.leftover and not ctx.wants("provision"):
        return f": what {ctx.leftover}"
    return ""
