"""Configure: preflight facts, host tuning (or its check-mode diff), NCCL env, payload deploy."""

from __future__ import annotations

import json
from pathlib import Path

from pav import catalog, paths
from pav.ansible_exec import PlaybookOutcome
from pav.context import RunContext
from pav.payload_installer import write_installer
from pav.stages.playbook import play, raise_for_hosts, record_hosts


def run(ctx: RunContext) -> str:
    # Inside the run's folder: a run cancelled mid-deploy leaves no controller temp file behind.
    script = (ctx.run_dir / "ansible" / "payload.sh").resolve()
    installer = write_installer(script, paths.PAYLOAD / "pav_payload")
    try:
        outcome = play(ctx, "configure", "configure.yml", payload_vars(ctx, installer) | mpi_vars(ctx))
    finally:
        installer.unlink(missing_ok=True)
    record_hosts(ctx, outcome, "configure")
    save_facts(ctx, outcome)
    raise_for_hosts(ctx, outcome, "configure")
    mode = "applied" if ctx.apply_tuning else "check mode (nothing changed; see hosts.*.changes)"
    dropped = f"; went on without {', '.join(ctx.missing)} (--allow-missing)" if ctx.missing else ""
    return f"{len(ctx.hosts)} host(s) configured; tuning {mode}{_mpi(ctx)}{dropped}{_pythons(ctx)}"


def payload_vars(ctx: RunContext, installer: Path) -> dict[str, object]:
    # The facts read's job file goes into the run's folder on the host: a teardown removes it with the
    # folder, a kept run keeps it with the rest of its work for a later teardown.
    goes_with_the_run = ctx.wants("teardown") or ctx.options.keep
    return {
        "torch_payload_installer": str(installer),
        "torch_payload_async_dir": f"{ctx.remote_run_dir}/.async",
        "torch_payload_async_cleanup": not goes_with_the_run,
    }


# What starts MPI programs: mpirun, and nccl-tests (its cluster form runs under mpirun; an MPI build of its
# host form needs MPI's headers and libraries).
MPI_LAUNCHERS = ("mpirun", "nccl_tests")


def mpi_needed(ctx: RunContext) -> bool:
    """Whether the mpi role runs: a run that validates sets up MPI only for tests that start MPI programs
    (on each host that is ~20 module runs and a compile); a configure without validate sets it up, since
    the hosts are being readied for whatever runs on them next."""
    if not ctx.wants("validate"):
        return True
    return any(spec.launcher in MPI_LAUNCHERS for spec in catalog.select(ctx.settings.tests))


def mpi_vars(ctx: RunContext) -> dict[str, object]:
    return {"pav_mpi_needed": mpi_needed(ctx)}


def _mpi(ctx: RunContext) -> str:
    return "" if mpi_needed(ctx) else "; MPI not set up (no planned test starts an MPI program)"


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
