"""A stage's playbook over the run's hosts, and what its outcome means for each host and for the run."""

from __future__ import annotations

import time
from typing import Any

from pav import interrupts
from pav.ansible_exec import PlaybookOutcome, run_playbook
from pav.context import RunContext
from pav.errors import PavError
from pav.reporting import changes, timings


def play(
    ctx: RunContext,
    stage: str,
    playbook: str,
    extravars: dict[str, Any] | None = None,
    hosts: list[str] | None = None,
) -> PlaybookOutcome:
    """Run `playbook` for `stage` on the run's hosts (or those of them given); hosts the run went on
    without are left out. A signal that stops the playbook still leaves its record on each host: what
    it changed before the signal, and that the stage was cut short there."""
    started = time.monotonic()
    outcome = PlaybookOutcome(rc=-1, status="unknown")
    targets = hosts or ctx.host_names
    if not targets:  # every host left the run (--allow-missing): an empty --limit would mean all of them
        return PlaybookOutcome(rc=0, status="successful")
    try:
        run_playbook(
            stage,
            playbook,
            ctx.inventory_file,
            targets,
            ctx.run_dir / "ansible" / stage,
            ctx.extravars() | (extravars or {}),
            verbose=ctx.options.verbose,
            limit=",".join(hosts) if hosts else ctx.limit,
            into=outcome,
        )
    except PavError:
        if interrupts.CANCEL.is_set():  # the signal stopped this playbook (not a wrap-up one: they run on)
            record_hosts(ctx, outcome, stage, cut=True)
        raise
    timings.add(ctx.playbook_time.setdefault(stage, {}), outcome, time.monotonic() - started)
    ctx.results.ansible_time[stage] = timings.summary(ctx.playbook_time[stage])
    return outcome


def record_hosts(ctx: RunContext, outcome: PlaybookOutcome, stage: str, cut: bool = False) -> None:
    """What the stage's playbook did to each host. cut: a signal stopped it; a host it ended on (its
    stats came) is recorded as any other, one it reached and had not ended on is `interrupted` where no
    earlier stage was through with it."""
    for name, record in ctx.results.hosts.items():
        record.ansible[stage] = outcome.stats.get(name, {})
        if name in outcome.unreachable:
            record.status = "unreachable"
        elif name in outcome.failures:
            record.status = "failed"
        elif cut and name not in outcome.stats:
            if record.status == "unknown" and name in outcome.reached:
                record.status = "interrupted"
        elif record.status == "unknown":
            record.status = "ok"
        if stage == "configure":
            record.changes = outcome.changes.get(name, [])
            record.change_counts = changes.by_role(record.changes)
            record.diffs = outcome.diffs.get(name, [])
            record.tuning_applied = ctx.inputs.apply_tuning


def raise_for_hosts(ctx: RunContext, outcome: PlaybookOutcome, stage: str) -> None:
    """Unreachable hosts leave the run: up to --allow-missing of them it goes on without, and their tests
    are error. A task that failed on a host that answered stops the run."""
    for host, msg in outcome.unreachable.items():
        lost = "is unreachable" if stage == "configure" else f"became unreachable during {stage}"
        ctx.missing.setdefault(host, f"{lost}: {msg}")
    ctx.hosts = [h for h in ctx.hosts if h.name not in ctx.missing]
    if outcome.unreachable and len(ctx.missing) > ctx.options.allow_missing:
        host = next(iter(outcome.unreachable))
        others = f" (and {len(outcome.unreachable) - 1} more)" if len(outcome.unreachable) > 1 else ""
        # Also where no host would be left: the run then records each test of the lost hosts as error.
        them = "them" if len(ctx.missing) > 1 else "it"
        rest = f", or pass --allow-missing {len(ctx.missing)} to go on without {them}"
        raise PavError(f"host {host} {ctx.missing[host]}{others}; check its address, SSH user and key{rest}")
    failures = {h: msgs for h, msgs in outcome.failures.items() if h not in ctx.missing}
    if failures:
        host, msgs = next(iter(failures.items()))
        raise PavError(f"{stage} failed on {host}: {msgs[0]}")


# The tasks of playbooks/collect.yml and teardown.yml whose success on a host means that stage's work there
# is done (validate's playbook may run them: pav.stages.validate.folded).
FETCHED = "collect : Fetch the archive into the run dir"
TORN_DOWN = "Remove the run folder"


def torn_down(outcome: PlaybookOutcome) -> dict[str, bool]:
    """Hosts the teardown play ran on: True where it removed the run's folder or killed what it left."""
    return {host: TORN_DOWN in outcome.changes.get(host, []) for host in outcome.ok.get(TORN_DOWN, ())}
