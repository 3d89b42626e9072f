"""Provision: create the hosts (Terraform envs) or take them from a static inventory."""

from __future__ import annotations

from pathlib import Path

from pav.context import RunContext
from pav.errors import PavError
from pav.hostlist import compress
from pav.inventory import check_addresses, resolve_hosts, stage_inventory, write_generated
from pav.ownership import clear_leftover
from pav.provisioning.terraform_env import TerraformEnv
from pav.results import HostRecord


def terraform_env(ctx: RunContext) -> TerraformEnv:
    assert ctx.env.terraform_dir is not None
    return TerraformEnv.for_env(ctx.env, ctx.options.max_hours)


def run(ctx: RunContext) -> str:
    if not ctx.env.provisions:
        return "static inventory: nothing to provision"
    env = terraform_env(ctx)
    ctx.results.state_dir = str(env.state)
    if ctx.options.reuse:  # the kept hosts as they are: resolve writes their inventory
        names = [h.name for h in env.current_hosts()]
        return f"reused the {len(names)} host(s) run {ctx.options.reuse} kept: {compress(names)}"
    # Recorded before apply: a create that fails midway still leaves resources teardown must destroy.
    ctx.provisioned["terraform"] = str(env.state)
    first = clear_leftover(ctx, env.destroy)
    created, silent = env.apply(ctx.inputs.host_count, ctx.settings.ssh_timeout_s, ctx.options.allow_missing)
    ctx.inventory_file = write_generated(env.inventory_hosts(created), ctx.env.inventory_dir, _inv_dir(ctx))
    # Out of the run from here: configure would only wait for them again, for its SSH timeout per host.
    for name in silent:
        ctx.missing[name] = (
            f"is unreachable: it never answered SSH within {ctx.settings.ssh_timeout_s}s of being created"
        )
    up = [h.name for h in created if h.name not in silent]
    dropped = f"; never answered SSH: {compress(silent)} (--allow-missing)" if silent else ""
    return f"{first}{len(up)} host(s) up: {compress(up)}{dropped} (state in {env.state})"


def resolve(ctx: RunContext) -> None:
    """Hosts for the later stages: the staged static inventory, or what Terraform's state holds."""
    if ctx.inventory_file is None and ctx.env.provisions:
        current = terraform_env(ctx).current_hosts()
        if not current:
            if set(ctx.options.stages) <= {"teardown", "report"}:
                return
            raise PavError(f"env {ctx.env.name} has no hosts; run with the provision stage first")
        ctx.inventory_file = write_generated(
            terraform_env(ctx).inventory_hosts(current), ctx.env.inventory_dir, _inv_dir(ctx)
        )
    if ctx.inventory_file is None:
        if ctx.env.hosts_file is None:
            raise PavError(f"env {ctx.env.name} has no hosts file; pass --inventory FILE")
        ctx.inventory_file = stage_inventory(ctx.env.hosts_file, ctx.env.inventory_dir, _inv_dir(ctx))
    if ctx.inventory_read is not None:  # read before the run dir (pav.platform.read_inventory)
        every = ctx.inventory_read.hosts
        ctx.missing |= ctx.inventory_read.missing
    else:
        every = resolve_hosts(ctx.inventory_file, label=ctx.env.hosts_file)
        # Before any SSH: a host without an address stops the run in one line (or leaves it, --allow-missing).
        left = [h for h in every if h.name not in ctx.missing]
        allowed = ctx.options.allow_missing - len(ctx.missing)
        ctx.missing |= check_addresses(left, ctx.env.hosts_file or ctx.inventory_file, allowed)
    for host in every:
        record = ctx.results.hosts.setdefault(host.name, HostRecord(host.name))
        record.address = host.address
        if host.name in ctx.missing:
            record.status = "unreachable"
    ctx.hosts = [h for h in every if h.name not in ctx.missing]


def _inv_dir(ctx: RunContext) -> Path:
    return ctx.run_dir / "inventory"
