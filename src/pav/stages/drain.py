"""--on-fail drain, after the report: drain the Slurm nodes the run's bad parts name (pav.slurm.drain),
through playbooks/slurm_drain.yml (scontrol on the Slurm controller). The hosts of a test across hosts that
named none of them (2 hosts, no pair re-runs) are not drained: one line, printed and in the summary, names
them and why (pav.reporting.marks decides, for Kubernetes' taint too). Never raises: each host's outcome is
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


ACTION = "slurm drain"


def run(ctx: RunContext) -> None:
    if ctx.options.on_fail != "drain" or ctx.options.recheck:  # a recheck keeps its nodes' drains
        return
    marks.guarded(ctx.run_dir, ctx.results.actions, ACTION, lambda: _step(ctx), "no node was drained by it")


def _step(ctx: RunContext) -> None:
    decided = marks.decide(ctx.results.to_dict())
    if decided.unnamed is not None:  # said as the run goes, and in the summary
        print(f"{ACTION}: {decided.unnamed.line('draining')}", flush=True)
        ctx.results.actions.append(decided.unnamed.entry(ACTION, "draining"))
    ctx.results.actions.extend(drain.records(act(ctx, drain.from_marks(decided.marks))))


def act(ctx: RunContext, planned: list[drain.Drain]) -> list[drain.Drain]:
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
