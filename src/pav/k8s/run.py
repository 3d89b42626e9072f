"""--platform k8s: the usual stages, with jobs on a Kubernetes cluster instead of Ansible over SSH."""

from __future__ import annotations

import sys

from pav import interrupts, rundir
from pav.context import STAGES, RunContext
from pav.errors import PavError
from pav.k8s import provision, stages
from pav.k8s.stages import manifests, workers
from pav.pipeline import RUN_STAGES, StageFn, _stage, exit_code, guarded, wrap_up
from pav.stages import report

STAGE_FNS: dict[str, StageFn] = {
    "provision": stages.provision_stage,
    "configure": stages.configure_stage,
    "validate": stages.validate_stage,
}


def dry_run(ctx: RunContext) -> int:
    """The plan, and the manifests the run would submit written into RUN/manifests/: nothing else changes."""
    planned, rendered = manifests(ctx)
    rundir.prepare(ctx.run_dir)
    written = stages.render.write(rendered, ctx.run_dir / "manifests")
    lines = [f"env: {ctx.env.name} (platform k8s)", f"run dir: {ctx.run_dir}", "stages:"]
    lines += [f"  [{'run ' if ctx.wants(s) or s == 'report' else 'skip'}] {s}" for s in STAGES]
    lines.append("cluster:")
    if ctx.env.provisions:
        lines.append(
            f"  Nebius Managed Kubernetes, {workers(ctx)} GPU node(s), Terraform root {ctx.env.terraform_dir}"
        )
        try:
            preview = provision.preview(ctx.env, workers(ctx))
            lines += ["  variables:", *(f"    {k} = {v}" for k, v in sorted(preview.items()))]
        except PavError as exc:
            lines.append(f"  variables: cannot be set yet: {exc}")
    lines.append(f"  kubeconfig: {provision.kubeconfig_path(ctx.env)}")
    lines.append("jobs (one at a time, each on every GPU of every node):")
    lines += [f"  {j.kind:<10} {j.name:<50} {j.workers}x{j.gpus_per_worker} GPU  {j.test}" for j in planned]
    lines.append(f"manifests ({len(written)}, policy-checked): {ctx.run_dir / 'manifests'}")
    lines += [f"  {p.name}" for p in written]
    print("\n".join(lines), flush=True)
    return 0


def run(ctx: RunContext) -> int:
    rundir.prepare(ctx.run_dir)
    print(f"run dir: {ctx.run_dir}", flush=True)
    code = execute(ctx)
    print((ctx.run_dir / "summary.txt").read_text(), end="")
    if ctx.results.error:
        print(f"error: {ctx.results.error}", file=sys.stderr)
    return code


def execute(ctx: RunContext) -> int:
    error: PavError | None = None
    try:
        error = guarded(ctx, _run_stages)
    finally:
        interrupts.wrapping_up()  # let teardown's kubectl and Terraform run after a signal
        steps: list[tuple[str, StageFn]] = [("report", report.run), ("teardown", stages.teardown_stage)]
        if ctx.launches:
            steps.insert(0, ("collect", stages.collect_stage))
        error = wrap_up(ctx, error, steps)
        report.write(ctx)
    return exit_code(ctx, error)


def _run_stages(ctx: RunContext) -> None:
    for name in RUN_STAGES:
        _stage(ctx, name, STAGE_FNS[name])
