"""Configure: preflight facts, host tuning (or its check-mode diff), NCCL env, payload deploy."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

from pav import paths
from pav.ansible_exec import PlaybookOutcome
from pav.context import RunContext
from pav.stages.playbook import play, raise_for_hosts, record_hosts


def run(ctx: RunContext) -> str:
    archive = pack_payload((ctx.run_dir / "ansible" / "payload.tar").resolve())
    try:
        outcome = play(ctx, "configure", "configure.yml", {"torch_payload_archive": str(archive)})
    finally:
        archive.unlink(missing_ok=True)
    record_hosts(ctx, outcome, "configure")
    save_facts(ctx, outcome)
    raise_for_hosts(ctx, outcome, "configure")
    mode = "applied" if ctx.apply_tuning else "check mode (nothing changed; see hosts.*.changes)"
    dropped = f"; went on without {', '.join(ctx.missing)} (--allow-missing)" if ctx.missing else ""
    return f"{len(ctx.hosts)} host(s) configured; tuning {mode}{dropped}{_pythons(ctx)}"


def pack_payload(archive: Path) -> Path:
    """payload/pav_payload as one tar inside the run's folder, which a cancelled run does not leave behind
    elsewhere (a controller temp file would outlive a signal mid-deploy)."""
    archive.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive, "w") as tar:
        tar.add(paths.PAYLOAD / "pav_payload", "pav_payload", filter=_no_cache)
    return archive


def _no_cache(member: tarfile.TarInfo) -> tarfile.TarInfo | None:
    return None if "__pycache__" in member.name.split("/") or member.name.endswith(".pyc") else member


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
