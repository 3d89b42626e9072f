"""Where a run's tests execute: each platform gives the one pipeline (pav.pipeline) its stage functions.

`hosts`: Ansible over SSH (or the local connection), torchrun/mpirun/nccl-tests on each host.
`k8s`: PyTorchJob/MPIJob on a Kubernetes cluster (pav.k8s.platform).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from pav.context import RunContext

StageFn = Callable[[RunContext], str]
Hook = Callable[[RunContext], None]


@dataclass(frozen=True)
class Platform:
    name: str
    # provision, configure, validate (stopped by a signal); collect, teardown (always); isolate (optional)
    stages: Mapping[str, StageFn]
    # after a run stage, whether or not --stages asked for it (hosts resolve the inventory after provision)
    after: Mapping[str, Hook] = field(default_factory=dict)
    finish: Hook | None = None  # after the last report write (close connections); then the pipeline scrubs


def hosts() -> Platform:
    from pav.ansible_exec import close_connections
    from pav.stages import collect, configure, isolate, provision, teardown, validate

    def facts_without_configure(ctx: RunContext) -> None:
        if ctx.wants("validate") and not ctx.wants("configure"):
            configure.load_facts(ctx)

    def finish(ctx: RunContext) -> None:
        close_connections(ctx.run_dir / "ansible")

    stages = {
        "provision": provision.run, "configure": configure.run, "validate": validate.run,
        "collect": collect.run, "isolate": isolate.run, "teardown": teardown.run,
    }  # fmt: skip
    after = {"provision": provision.resolve, "configure": facts_without_configure}
    return Platform("hosts", stages, after, finish)


def for_run(ctx: RunContext) -> Platform:
    if ctx.inputs.platform == "k8s":
        from pav.k8s.platform import k8s

        return k8s()
    return hosts()
