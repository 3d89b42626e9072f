"""--dry-run: the stages, hosts and tests a run would take, with nothing changed anywhere."""

from __future__ import annotations

from pav import catalog
from pav.context import STAGES, RunContext


def render(ctx: RunContext) -> str:
    lines = [f"env: {ctx.env.name}", f"run dir: {ctx.run_dir}", "stages:"]
    for stage in STAGES:
        mark = "run " if ctx.wants(stage) or stage == "report" else "skip"
        lines.append(f"  [{mark}] {stage}{_stage_note(ctx, stage)}")
    lines.append("hosts:")
    if ctx.hosts:
        lines += [f"  {h.name} ({h.address})" for h in ctx.hosts]
    else:
        lines.append(f"  (created by Terraform in {ctx.env.terraform_dir})")
    lines.append(f"tests (threshold profile {ctx.settings.threshold_profile}):")
    for spec in catalog.select(ctx.settings.tests):
        needs = "GPU" if spec.needs_gpu else "CPU"
        lines.append(f"  {spec.name:<24} {spec.scope:<8} {needs:<4} {spec.description}")
    return "\n".join(lines) + "\n"


def _stage_note(ctx: RunContext, stage: str) -> str:
    if stage == "provision":
        return f": terraform apply in {ctx.env.terraform_dir}" if ctx.env.provisions else ": static inventory"
    if stage == "configure":
        return ": tuning applied" if ctx.apply_tuning else ": tuning in check mode (diff only)"
    if stage == "teardown" and ctx.options.keep:
        return ": --keep"
    return ""
