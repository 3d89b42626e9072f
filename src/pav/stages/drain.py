"""--on-fail drain, after the report: drain the Slurm nodes the run's bad parts name (pav.slurm.drain),
through playbooks/slurm_drain.yml (scontrol on the Slurm controller). Never raises: each host's outcome is
an entry of results.json `actions` and a summary line; the verdict and the exit code stay the run's."""

from __future__ import annotations

from dataclasses import replace

from pav.context import RunContext
from pav.errors import PavError
from pav.reporting import marks
from pav.slurm import drain
from pav.stages.playbook import play

FIX = (
    "fix: check that the Ansible user may run scontrol update on the controller (root or a Slurm operator) "
    "and that the host is a Slurm node named by its short hostname"
)


def run(ctx: RunContext) -> None:
    if ctx.options.on_fail != "drain" or ctx.options.recheck:  # a recheck keeps its nodes' drains
        return
    step = lambda: ctx.results.actions.extend(drain.records(act(ctx)))  # noqa: E731
    marks.guarded(ctx.run_dir, ctx.results.actions, "slurm drain", step, "no node was drained by it")


def act(ctx: RunContext) -> list[drain.Drain]:
    planned = drain.plan(ctx.results.to_dict())
    if not planned:
        return []
    if ctx.inventory_file is None or ctx.inputs.platform != "hosts":
        return [replace(d, ok=False, detail="no inventory of Slurm nodes (drain needs --platform hosts)")
                for d in planned]  # fmt: skip
    hosts = [d.host for d in planned]
    try:
        outcome = play(ctx, "drain", "slurm_drain.yml", {"pav_slurm_drains": drain.asked(planned)}, hosts)
    except PavError as exc:
        return [replace(d, ok=False, detail=f"{exc}; {FIX}") for d in planned]
    out = []
    for d in planned:
        failed = outcome.unreachable.get(d.host) or "; ".join(outcome.failures.get(d.host, []))
        ran = d.host in outcome.stats
        if failed or not ran:
            out.append(replace(d, ok=False, detail=f"{failed or 'not run'}; {FIX}"))
        else:
            out.append(replace(d, ok=True, detail=f'reason "{d.reason}"'))
    return out
