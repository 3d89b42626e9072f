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
    raise_for_hosts(outcome, "configure")
    mode = "applied" if ctx.apply_tuning else "check mode (nothing changed; see hosts.*.changes)"
    return f"{len(ctx.hosts)} host(s) configured; tuning {mode}"


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


def raise_for_hosts(outcome: PlaybookOutcome, stage: str) -> None:
    if outcome.unreachable:
        host, msg = next(iter(outcome.unreachable.items()))
        others = f" (and {len(outcome.unreachable) - 1} more)" if len(outcome.unreachable) > 1 else ""
        raise PavError(f"host {host} is unreachable{others}: {msg}; check its address, SSH user and key")
    if outcome.failures:
        host, msgs = next(iter(outcome.failures.items()))
        raise PavError(f"{stage} failed on {host}: {msgs[0]}")
