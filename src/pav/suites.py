"""Fold host-scope torchrun launches of one world shape into one suite launch per host, so torchrun, the
torch import, CUDA and the process group start once (pav_payload.suite_launch runs them; issue 20).

Each test keeps its own Launch: evaluation, results, timeouts and artifacts are per test as before. What
changes is only what the run_tests role is handed: one launch per suite instead of one per test.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from pav.launches import PYTHON, Launch

# Seconds a suite's launch gets on top of its tests' own limits: its watchdog kills a test at its limit,
# so this only covers starting torchrun again after a test that hung or died.
RESTART_GRACE_S = 60
_STANDALONE = [PYTHON, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node"]


def fold(launches: list[Launch]) -> list[Launch]:
    """The launches to run: each group of two or more foldable launches with the same hosts, ranks per
    host, environment and backend becomes one suite launch, in the place of its first test; the rest
    stay as they are. Order within a suite is the catalog's."""
    groups: dict[tuple[Any, ...], list[Launch]] = {}
    for launch in launches:
        key = _key(launch)
        if key is not None:
            groups.setdefault(key, []).append(launch)
    out: list[Launch] = []
    emitted: set[tuple[Any, ...]] = set()
    for launch in launches:
        key = _key(launch)
        if key is None or len(groups[key]) < 2:
            out.append(launch)
        elif key not in emitted:
            emitted.add(key)
            out.append(suite_launch(groups[key], len(emitted)))
    return out


def _key(launch: Launch) -> tuple[Any, ...] | None:
    """What must be equal for two tests to share a torchrun; None: this launch runs alone."""
    if launch.launcher != "torchrun" or launch.scope != "host":
        return None
    if any(argv[: len(_STANDALONE)] != _STANDALONE for argv in launch.argv_by_host.values()):
        return None
    args = _payload_args(next(iter(launch.argv_by_host.values())))
    backend = args[args.index("--backend") + 1] if "--backend" in args else "auto"
    # auto is nccl wherever CUDA is, the only place an explicit nccl test is planned: the two may share.
    group = "gloo" if backend == "gloo" else "nccl-or-auto"
    return (tuple(sorted(launch.ranks_by_host.items())), tuple(sorted(launch.env.items())), group)


def _payload_args(argv: list[str]) -> list[str]:
    """What follows `-m pav_payload` in a torchrun argv: the test's own subcommand and options."""
    return argv[argv.index("pav_payload") + 1 :]


def suite_launch(tests: list[Launch], number: int) -> Launch:
    first = tests[0]
    name = f"pav_suite_{number}"
    argv_by_host = {}
    for host, argv in first.argv_by_host.items():
        plan = [
            {"test": t.test, "timeout_s": t.timeout_s, "args": _payload_args(t.argv_by_host[host])}
            for t in tests
        ]
        nproc = argv[len(_STANDALONE)]
        argv_by_host[host] = [
            PYTHON, "-m", "pav_payload.suite_launch", "--nproc", nproc, "--plan-json", json.dumps(plan),
        ]  # fmt: skip
    timeout = sum(t.timeout_s for t in tests) + RESTART_GRACE_S * len(tests)
    return replace(first, test=name, timeout_s=timeout, argv_by_host=argv_by_host, ranks_by_host={})
