"""Configure: preflight facts, host tuning (or its check-mode diff), NCCL env, payload deploy."""

from __future__ import annotations

import json
from pathlib import Path

from pav import paths
from pav.ansible_exec import ROLE_FACTS, PlaybookOutcome
from pav.context import RunContext
from pav.hostlist import compress
from pav.payload_installer import installer
from pav.stages.playbook import play, raise_for_hosts, record_hosts


def run(ctx: RunContext) -> str:
    # Inside the run's folder: a run cancelled mid-deploy leaves no controller temp file behind.
    script = (ctx.run_dir / "ansible" / "payload.sh").resolve()
    needed = installs_needed(ctx)
    with installer(script, paths.PAYLOAD / "pav_payload") as packed:
        outcome = play(ctx, "configure", "configure.yml", payload_vars(ctx, packed) | install_vars(needed))
    record_hosts(ctx, outcome, "configure")
    save_facts(ctx, outcome)
    raise_for_hosts(ctx, outcome, "configure")
    mode = "applied" if ctx.inputs.apply_tuning else "check mode (nothing changed; see hosts.*.changes)"
    dropped = f"; went on without {compress(ctx.missing)} (--allow-missing)" if ctx.missing else ""
    return f"{len(ctx.hosts)} host(s) configured; tuning {mode}{_skipped(needed)}{dropped}{_pythons(ctx)}"


def payload_vars(ctx: RunContext, installer: Path) -> dict[str, object]:
    # The facts read's job file goes into the run's folder on the host: a teardown removes it with the
    # folder, a kept run keeps it with the rest of its work for a later teardown.
    goes_with_the_run = ctx.wants("teardown") or ctx.options.keep
    return {
        "torch_payload_installer": str(installer),
        "torch_payload_async_dir": f"{ctx.remote_run_dir}/.async",
        "torch_payload_async_cleanup": not goes_with_the_run,
    }


# The install roles, each with the launchers of the tests it serves and its name in configure's line:
# nccl-tests' cluster form runs under mpirun, and an MPI build of its host form needs MPI's headers.
INSTALLS = {"mpi": (("mpirun", "nccl_tests"), "MPI"), "nccl_tests": (("nccl_tests",), "nccl-tests")}


def installs_needed(ctx: RunContext) -> dict[str, bool]:
    """Which install roles run: a run that validates installs only what its planned tests launch with (MPI
    alone is ~20 module runs and a compile per host); a configure without validate installs everything,
    since the hosts are being readied for whatever runs on them next."""
    if not ctx.wants("validate"):
        return dict.fromkeys(INSTALLS, True)
    launchers = {spec.launcher for spec in ctx.inputs.tests}
    return {role: bool(launchers & set(used_by)) for role, (used_by, _) in INSTALLS.items()}


def install_vars(needed: dict[str, bool]) -> dict[str, object]:
    return {f"pav_{role}_needed": wanted for role, wanted in needed.items()}


def _skipped(needed: dict[str, bool]) -> str:
    names = [INSTALLS[role][1] for role, wanted in needed.items() if not wanted]
    if not names:
        return ""
    return f"; {' and '.join(names)} not set up (no planned test uses {'them' if len(names) > 1 else 'it'})"


def _pythons(ctx: RunContext) -> str:
    """Which Python runs the payload: the local env chooses one itself, a wrong one costs a whole run."""
    found = {str(h.facts["torch"]["python"]) for h in ctx.results.hosts.values() if "torch" in h.facts}
    return f"; payload Python {', '.join(sorted(found))}" if found else ""


def save_facts(ctx: RunContext, outcome: PlaybookOutcome) -> None:
    """preflight_facts plus what the other roles recorded, saved as hosts/NAME/facts.json."""
    for name, found in outcome.facts.items():
        facts = dict(found.get("preflight_facts", {}))
        facts.update({short: found[key] for key, short in ROLE_FACTS.items() if key in found})
        path = ctx.run_dir / "hosts" / name / "facts.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(facts, indent=2) + "\n")
    load_facts(ctx)


def load_facts(ctx: RunContext) -> None:
    for name, record in ctx.results.hosts.items():
        path = ctx.run_dir / "hosts" / name / "facts.json"
        if path.is_file():
            record.facts = json.loads(path.read_text())
