"""What gone runs left on the hosts, ended at this run's first contact: a run whose driver died (SIGKILL, a
lost CI runner) ran no teardown, and its launches would go on beside this run's tests until their timeout.
Each of their processes carries PAV_LAUNCH=RUN_ID/HOST/TEST; teardown.yml, given that run's id, kills them
and removes its folder, as its own teardown would have (pav.ownership found the gone runs)."""

from __future__ import annotations

from pav import locks
from pav.context import RunContext
from pav.errors import PavError
from pav.ownership import registry_entry
from pav.stages.playbook import play, torn_down

# Stages that reach the hosts: a run of others (report alone) leaves gone runs to the next that does.
CONTACT = ("configure", "validate", "collect", "teardown")


def run(ctx: RunContext) -> None:
    if not ctx.dead_runs or not ctx.hosts or not any(ctx.wants(s) for s in CONTACT):
        return
    for gone in ctx.dead_runs:
        said = f"{gone.describe()} ended without a teardown"
        try:
            outcome = play(ctx, "cleanup", "teardown.yml", {"pav_run_id": gone.run_id})
        except PavError as exc:
            print(f"{said}; ending its work on the hosts failed ({exc}); the next run tries", flush=True)
            continue
        done = torn_down(outcome)
        cleaned = sorted(h for h, changed in done.items() if changed)
        print(
            f"{said}: killed its launches and removed its folder on {len(cleaned)} of {len(ctx.hosts)} "
            f"host(s){'' if cleaned else ' (nothing of it was left)'}",
            flush=True,
        )
        if len(done) == len(ctx.hosts):
            locks.release(registry_entry(ctx, gone.run_id), remove=True)
    ctx.dead_runs = []
