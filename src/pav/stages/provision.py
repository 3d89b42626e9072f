"""Provision: create the hosts (Terraform envs) or take them from a static inventory."""

from __future__ import annotations

from pav.context import RunContext
from pav.errors import PavError
from pav.inventory import resolve_hosts, stage_inventory
from pav.results import HostRecord


def run(ctx: RunContext) -> str:
    if ctx.env.provisions:
        raise PavError(f"env {ctx.env.name} provisions through Terraform, which this version cannot run yet")
    return "static inventory: nothing to provision"


def resolve(ctx: RunContext) -> None:
    """Hosts for the later stages: the staged static inventory, or what provision wrote."""
    if ctx.inventory_file is None:
        if ctx.env.hosts_file is None:
            raise PavError(f"env {ctx.env.name} has no hosts yet; run the provision stage first")
        ctx.inventory_file = stage_inventory(
            ctx.env.hosts_file, ctx.env.inventory_dir, ctx.run_dir / "inventory"
        )
    ctx.hosts = resolve_hosts(ctx.inventory_file, label=ctx.env.hosts_file)
    for host in ctx.hosts:
        ctx.results.hosts.setdefault(host.name, HostRecord(host.name)).address = host.address
