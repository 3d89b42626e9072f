"""Configure: preflight facts, host tuning (or its check-mode diff), NCCL env, payload deploy."""

from __future__ import annotations

import json

from pav.ansible_exec import PlaybookOutcome
from pav.context import RunContext
from pav.stages.playbook import play, raise_for_hosts, record_hosts


def run(ctx: RunContext) -> str:
    outcome = play(ctx, "configure", "configure.yml")
    record_hosts(ctx, outcome, "configure")
    save_facts(ctx, outcome)
    raise_for_hosts(ctx, outcome, "configure")
    mode = "applied" if ctx.apply_tuning else "check mode (nothing changed; see hosts.*.changes)"
    dropped = f"; went on without {', '.join(ctx.missing)} (--allow-missing)" if ctx.missing else ""
    return f"{len(ctx.hosts)} host(s) configured; tuning {mode}{dropped}{_pythons(ctx)}"


def _pythons(ctx: RunContext) -> str:
    """Which Python runs the payload: the local env chooses one itself, a wrong one costs a whole run."""
    found = {str(h.facts["torch"]["python"]) for h in ctx.results.hosts.values() if "torch" in h.facts}
    return f"; payload Python {', '.join(sorted(found))}" if found else ""


def save_facts(ctx: RunContext, outcome: PlaybookOutcome) -> None:
    """preflight_facts plus what the other roles recorded, saved as hosts/NAME/facts.json."""
    extras = {
        "torch_payload_info": "torch",
        "torch_payload_gpu_facts": "gpus",  # NVML per-GPU facts and Xid lines (pav_payload facts)
        "nccl_tests_info": "nccl_tests",
        "mpi_info": "mpi",
        "nccl_env_info": "nccl_env",
    }
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
