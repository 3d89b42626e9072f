"""--dry-run: the stages, hosts and tests a run would take, with nothing changed anywhere."""

from __future__ import annotations

from pav import ownership, paths
from pav.context import STAGES, RunContext
from pav.errors import PavError
from pav.hostlist import compress
from pav.provisioning import keeper
from pav.provisioning.terraform_env import TerraformEnv
from pav.reporting import metrics_export, pushgateway
from pav.terraform_declared import declared_resources
from pav.thresholds.profiles import planned_profile
from pav.yamlfile import load_mapping


def render(ctx: RunContext) -> str:
    lines = [f"env: {ctx.env.name}", f"run dir: {ctx.run_dir}", "stages:"]
    for stage in STAGES:
        mark = "run " if ctx.wants(stage) or stage == "report" else "skip"
        lines.append(f"  [{mark}] {stage}{_stage_note(ctx, stage)}")
    lines.append("hosts:")
    if ctx.hosts:
        for h in ctx.hosts:
            gone = f": the run goes on without it: it {ctx.missing[h.name]}" if h.name in ctx.missing else ""
            lines.append(f"  {h.name} ({h.address}){gone}")
    elif ctx.env.provisions and (ctx.options.reuse or not ctx.wants("provision")):
        lines += _existing_hosts(ctx)
    else:
        lines += _terraform_plan(ctx)
    if ctx.env.provisions and (said := ownership.preview(ctx)):
        lines.append(f"  {said}")
    inputs = ctx.inputs
    lines.append(f"threshold profile: {planned_profile(inputs.profile)}")
    lines.append(f"tests (launcher {inputs.launcher}):")
    for spec in inputs.tests:
        needs = "GPU" if spec.needs_gpu else "CPU"
        lines.append(f"  {spec.name:<30} {spec.scope:<8} {needs:<4} {spec.description}")
    lines += after_report(ctx)
    return "\n".join(lines) + "\n"


# What each flag that acts beyond the run dir would do, on either platform (the k8s dry run prints it too).
ACTS = {
    "drain": "after a FAIL, drain each Slurm node its bad parts name (scontrol update State=DRAIN "
    'Reason="pav RUN_ID: ...")',
    "taint": "after a FAIL, cordon each node its bad parts name, taint it pav.io/unhealthy=TEST:NoSchedule "
    "and annotate it with the run and the part",
}
RECHECK = {
    "hosts": "only the Slurm nodes this tool drained, each with the tests it failed; RESUME those that pass",
    "k8s": "only the nodes this tool tainted, each with the tests it failed; untaint and uncordon those that "
    "pass",
}


def check_exports(ctx: RunContext) -> None:
    """What the run's end would need beyond the run dir, checked before the run starts, as by --dry-run (a
    failed export is only a summary line at the run's end, hours on): a folder the textfile cannot go to
    stops the run, or the dry run, before any run dir is made."""
    textfile = ctx.options.metrics_textfile
    if textfile is not None and (problem := metrics_export.textfile_dir_problem(textfile)):
        raise PavError(problem)


def after_report(ctx: RunContext) -> list[str]:
    """Where the run's verdict goes beyond the run dir, flag by flag; a line saying none where none."""
    options, lines = ctx.options, []
    if options.metrics_textfile is not None:
        where = options.metrics_textfile / metrics_export.textfile_name(ctx.env.name)
        lines.append(f"  metrics textfile: {where} (written, then renamed)")
    if options.pushgateway is not None:
        url = pushgateway.public_url(options.pushgateway)
        auth = options.pushgateway_auth
        how = f"; basic auth as {auth.user}, from {auth.source}" if auth is not None else ""
        lines.append(f"  pushgateway: {url} (job pav, one group per env and host{how})")
    step = options.after_report  # the run's own rule: --recheck wins over --on-fail
    if step == "recheck":
        lines.append(f"  --recheck: {RECHECK[ctx.inputs.platform]}")
    elif step is not None:
        lines.append(f"  --on-fail {step}: {ACTS[step]}")
    if not lines:
        lines.append("  nothing beyond the run dir (--metrics-textfile, --pushgateway, --on-fail, --recheck)")
    return ["after the report:", *lines]


def _existing_hosts(ctx: RunContext) -> list[str]:
    """Without provision (or with --reuse) the run acts on what the env's Terraform state holds now (a kept
    cluster): read from the state file, no Terraform run."""
    state = ctx.env.state_dir
    found = keeper.host_names(state)
    if not found:
        return [f"  none: the env's state ({state}) holds no hosts"]
    return [f"  {len(found)} host(s) in the env's state ({state}):"] + [f"    {name}" for name in found]


def _terraform_plan(ctx: RunContext) -> list[str]:
    """The root, the variables and the resources a provisioning run would use: offline, nothing created."""
    assert ctx.env.terraform_dir is not None
    env = TerraformEnv.for_env(ctx.env, ctx.options.max_hours)
    hosts = ctx.inputs.host_count
    lines = [f"  {hosts} host(s), created by Terraform root {ctx.env.terraform_dir}"]
    lines.append(f"  state dir: {env.state}")
    if ctx.env.terraform_values:
        fixed = ", ".join(f"{k}: {v}" for k, v in sorted(ctx.env.terraform_values.items()))
        lines.append(f"  fixed by {ctx.env.inventory_dir / 'provision.yml'}: {fixed}")
    try:
        variables = env.preview_variables(hosts)
        lines.append("  variables:")
        lines += [f"    {k} = {v}" for k, v in sorted(variables.items())]
    except PavError as exc:
        lines.append(f"  variables: cannot be set yet: {exc}")
    lines.append("  resources declared:")
    lines += [f"    {r}" for r in declared_resources(ctx.env.terraform_dir)]
    return lines


# The files the tuning roles write, by the variable that names each (role defaults, or the env's group_vars).
TUNING_FILES = {
    "host_tuning_limits_file": "host_tuning",
    "host_tuning_sysctl_file": "host_tuning",
    "nccl_env_file": "nccl_env",
    "nccl_env_profile_script": "nccl_env",
}


def tuning_files(ctx: RunContext) -> list[str]:
    """What tuning changes on a host: its files, and /etc/fstab for the /dev/shm size."""
    chosen = ctx.settings.role_vars  # the env's files, then -e
    defaults = {
        role: load_mapping(paths.ROLES / role / "defaults" / "main.yml")
        for role in set(TUNING_FILES.values())
    }
    found = [
        str(ctx.options.extra_vars.get(key) or chosen.get(key) or defaults[role].get(key))
        for key, role in TUNING_FILES.items()
    ]
    return [*found, "/etc/fstab (/dev/shm)"]


def _stage_note(ctx: RunContext, stage: str) -> str:
    if stage == "provision":
        if ctx.options.reuse:
            return f": --reuse {ctx.options.reuse}: the hosts that run kept, as they are"
        return f": terraform apply in {ctx.env.terraform_dir}" if ctx.env.provisions else ": static inventory"
    if stage == "configure":
        files = f"{', '.join(tuning_files(ctx))} on {compress(ctx.host_names) or 'every host'}"
        if ctx.inputs.apply_tuning:
            return f": tuning applied: writes {files}"
        told = "" if ctx.env.provisions else "; hosts it did not create change with --apply-tuning only"
        return f": tuning in check mode (diff only{told}): would write {files}"
    if stage == "isolate":
        off = ctx.inputs.no_pair_reruns
        return f": off ({off})" if off else ": a failing multi-host test re-runs on pairs of hosts"
    if stage == "teardown" and ctx.options.keep:
        return ": --keep"
    return ""
