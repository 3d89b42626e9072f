"""Where a run's tests execute: each platform gives the one pipeline (pav.pipeline) its stage functions, and
says what --dry-run prints.

`hosts`: Ansible over SSH (or the local connection), torchrun/mpirun/nccl-tests on each host.
`k8s`: PyTorchJob/MPIJob on a Kubernetes cluster (its stages: pav.stages.k8s; the run's choice between
the two is pav.pipeline.platform_for, above both).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from pav import plan, role_args
from pav.context import RunContext
from pav.inventory import read_static

StageFn = Callable[[RunContext], str]
Hook = Callable[[RunContext], None]
DryRun = Callable[[RunContext], int]  # prints the plan, changes nothing outside the run dir; the exit code


@dataclass(frozen=True)
class Platform:
    name: str
    # provision, configure, validate (stopped by a signal); collect, teardown (always); isolate (optional)
    stages: Mapping[str, StageFn]
    # after a run stage, whether or not --stages asked for it (hosts resolve the inventory after provision)
    after: Mapping[str, Hook] = field(default_factory=dict)
    finish: Hook | None = None  # after the last report write (close connections); then the pipeline scrubs
    dry_run: DryRun = field(kw_only=True)  # --dry-run: instead of the stages
    # A real run's checks of its input before its run dir exists, the dry run's own: bad input is one line,
    # exit 2, and no run dir left behind.
    check: Hook | None = field(default=None, kw_only=True)


def hosts_platform() -> Platform:
    from pav.ansible_exec import close_connections
    from pav.stages import cleanup, collect, configure, isolate, provision, teardown, validate

    def hosts_resolved(ctx: RunContext) -> None:
        provision.resolve(ctx)
        cleanup.run(ctx)  # a gone run's launches end before this run's tests start beside them

    def facts_without_configure(ctx: RunContext) -> None:
        if ctx.wants("validate") and not ctx.wants("configure"):
            configure.load_facts(ctx)

    def finish(ctx: RunContext) -> None:
        close_connections(ctx.run_dir / "ansible")

    stages = {
        "provision": provision.run, "configure": configure.run, "validate": validate.run,
        "collect": collect.run, "isolate": isolate.run, "teardown": teardown.run,
    }  # fmt: skip
    after = {"provision": hosts_resolved, "configure": facts_without_configure}
    return Platform("hosts", stages, after, finish, dry_run=print_plan, check=read_inventory)


def read_inventory(ctx: RunContext) -> None:
    """A static inventory's hosts, read once before the run dir exists (pav.stages.provision.resolve takes
    them from here): a malformed file, a host name that is no plain name, or a host SSH could not find
    stops the run, or its dry run, in one line before anything is made (--allow-missing: leaves it out)."""
    if ctx.env.hosts_file is not None:
        ctx.inventory_read = read_static(ctx.env.hosts_file, ctx.options.allow_missing)


def print_plan(ctx: RunContext) -> int:
    """The hosts platform's dry run: the plan of stages, hosts (a static inventory's, read) and tests; a
    role variable its role would refuse stops it, as it stops a real run's configure."""
    role_args.check(ctx.settings.role_vars, ctx.settings.origins)
    read_inventory(ctx)
    if ctx.inventory_read is not None:
        ctx.hosts, ctx.missing = ctx.inventory_read.hosts, ctx.inventory_read.missing
    print(plan.render(ctx), end="")
    return 0


def k8s_platform() -> Platform:
    """--platform k8s in the one pipeline: jobs on a Kubernetes cluster instead of Ansible over SSH."""
    from pav.stages import k8s as stages
    from pav.stages.k8s_dry_run import dry_run

    return Platform(
        "k8s",
        {
            "provision": stages.provision_stage,
            "configure": stages.configure_stage,
            "validate": stages.validate_stage,
            "collect": stages.collect_stage,
            "report": stages.report_stage,
            "teardown": stages.teardown_stage,
        },
        dry_run=dry_run,
    )
