"""Configure: preflight facts, host tuning (or its check-mode diff), NCCL env, payload deploy."""

from __future__ import annotations

import json

from pav.ansible_exec import PlaybookOutcome, run_playbook
from pav.context import RunContext
from pav.errors import PavError


def run(ctx: RunContext) -> str:
    outcome = run_playbook(
        "configure",
        "configure.yml",
        ctx.inventory_file,
        ctx.host_names,
        ctx.run_dir / "ansible" / "configure",
        ctx.extravars(),
        verbose=ctx.options.verbose,
    )
    record_hosts(ctx, outcome, "configure")
    save_facts(ctx, outcome)
    raise_for_hosts(ctx, outcome, "configure")
    mode = "applied" if ctx.apply_tuning else "check mode (nothing changed; see hosts.*.changes)"
    dropped = f"; went on without {', '.join(ctx.missing)} (--allow-missing)" if ctx.missing else ""
    return f"{len(ctx.hosts)} host(s) configured; tuning {mode}{dropped}"


def record_hosts(ctx: RunContext, outcome: PlaybookOutcome, stage: str) -> None:
    for name, record in ctx.results.hosts.items():
        record.ansible[stage] = outcome.stats.get(name, {})
        if name in outcome.unreachable:
            record.status = "unreachable"
        elif name in outcome.failures:
            record.status = "failed"
        elif record.status == "unknown":
            record.status = "ok"
        if stage == "configure":
            record.changes = outcome.changes.get(name, [])
            record.tuning_applied = ctx.apply_tuning


def save_facts(ctx: RunContext, outcome: PlaybookOutcome) -> None:
    """preflight_facts plus what the other roles recorded, saved as hosts/NAME/facts.json."""
    extras = {"torch_payload_info": "torch", "nccl_tests_info": "nccl_tests", "mpi_info": "mpi"}
    for name, found in outcome.facts.items():
        facts = dict(found.get("preflight_facts", {}))
        facts.update({short: found[key] for key, short in extras.items() if key in found})
        path = ctx.run_dir / "hosts" / name / "facts.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(facts, indent=2) + "\n")
    load_facts(ctx)


def load_facts(ctx: RunContext) -> None:
    for name, record in ctx.results.hosts.items():
        path = ctx.run_dir / "hosts" / name / "facts.json"
        if path.is_file():
            record.facts = json.loads(path.read_text())


def raise_for_hosts(ctx: RunContext, outcome: PlaybookOutcome, stage: str) -> None:
    """Unreachable hosts leave the run: up to --allow-missing of them it goes on without, and their tests
    are error. A task that failed on a host that answered stops the run."""
    for host, msg in outcome.unreachable.items():
        lost = "is unreachable" if stage == "configure" else f"became unreachable during {stage}"
        ctx.missing.setdefault(host, f"{lost}: {msg}")
    ctx.hosts = [h for h in ctx.hosts if h.name not in ctx.missing]
    if outcome.unreachable and (len(ctx.missing) > ctx.options.allow_missing or not ctx.hosts):
        host = next(iter(outcome.unreachable))
        others = f" (and {len(outcome.unreachable) - 1} more)" if len(outcome.unreachable) > 1 else ""
        rest = f", or pass --allow-missing {len(ctx.missing)} to go on without it" if ctx.hosts else ""
        raise PavError(f"host {host} {ctx.missing[host]}{others}; check its address, SSH user and key{rest}")
    failures = {h: msgs for h, msgs in outcome.failures.items() if h not in ctx.missing}
    if failures:
        host, msgs = next(iter(failures.items()))
        raise PavError(f"{stage} failed on {host}: {msgs[0]}")
