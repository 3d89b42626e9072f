"""A RunContext for tests of the driver's own decisions, with no env, inventory or run behind it. Its inputs
are resolved from the settings and options given, as cli.make_context resolves a run's."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from pav import run_inputs
from pav.context import Options, RunContext
from pav.envs import EnvSpec
from pav.inventory import Host
from pav.results import RunResults
from pav.settings import Settings


def context(
    hosts: int = 1, provisions: bool = False, options: Options | None = None, **settings: object
) -> RunContext:
    env = EnvSpec("t", Path("inv"), None if provisions else Path("inv/hosts.yml"),
                  Path("tf") if provisions else None)  # fmt: skip
    chosen, given = options or Options(), replace(Settings(), **settings)
    inputs = run_inputs.resolve(env, chosen, given)
    results = RunResults(
        "id", "t", "inv", "run", threshold_profile_chosen=inputs.profile
    )  # as cli.py records it
    ctx = RunContext(env, chosen, given, Path("run"), results, inputs)
    ctx.hosts = [Host(f"h{i}", f"10.0.0.{i}") for i in range(hosts)]
    return ctx
