"""--dry-run: the stages, hosts and tests a run would take, with nothing changed anywhere."""

from __future__ import annotations

from pav import catalog
from pav.context import STAGES, RunContext
from pav.errors import PavError
from pav.provisioning.declared import declared_resources
from pav.provisioning.terraform_env import TerraformEnv
from pav.slurm.plan import with_checks


def render(ctx: RunContext) -> str:
    lines = [f"env: {ctx.env.name}", f"run dir: {ctx.run_dir}", "stages:"]
    for stage in STAGES:
        mark = "run " if ctx.wants(stage) or stage == "report" else "skip"
        lines.append(f"  [{mark}] {stage}{_stage_note(ctx, stage)}")
    lines.append("hosts:")
    if ctx.hosts:
        lines += [f"  {h.name} ({h.address})" for h in ctx.hosts]
    else:
        lines += _terraform_plan(ctx)
    specs = catalog.select(ctx.settings.tests)
    if ctx.settings.launcher == "slurm":
        specs = with_checks(specs)
    settings = ctx.settings
    lines.append(f"tests (threshold profile {settings.threshold_profile}, launcher {settings.launcher}):")
    for spec in specs:
        needs = "GPU" if spec.needs_gpu else "CPU"
        lines.append(f"  {spec.name:<30} {spec.scope:<8} {needs:<4} {spec.description}")
    return "\n".join(lines) + "\n"


def _terraform_plan(ctx: RunContext) -> list[str]:
    """The root, the variables and the resources a provisioning run would use: offline, nothing created."""
    assert ctx.env.terraform_dir is not None
    env = TerraformEnv.for_env(ctx.env.name, ctx.env.terraform_dir, ctx.options.max_hours)
    hosts = ctx.options.hosts or ctx.settings.hosts
    lines = [f"  {hosts} host(s), created by Terraform root {ctx.env.terraform_dir}"]
    lines.append(f"  state dir: {env.state}")
    try:
        variables = env.preview_variables(hosts)
        lines.append("  variables:")
        lines += [f"    {k} = {v}" for k, v in sorted(variables.items())]
    except PavError as exc:
        lines.append(f"  variables: cannot be set yet: {exc}")
    lines.append("  resources declared:")
    lines += [f"    {r}" for r in declared_resources(ctx.env.terraform_dir)]
    return lines


def _stage_note(ctx: RunContext, stage: str) -> str:
    if stage == "provision":
        return f": terraform apply in {ctx.env.terraform_dir}" if ctx.env.provisions else ": static inventory"
    if stage == "configure":
        return ": tuning applied" if ctx.apply_tuning else ": tuning in check mode (diff only)"
    if stage == "isolate":
        return ": a failing multi-host test re-runs on pairs of hosts" if ctx.settings.isolate else ": off"
    if stage == "teardown" and ctx.options.keep:
        return ": --keep"
    return ""
