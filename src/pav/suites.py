"""Fold a host's torchrun tests of one world shape into suites run by one launch per host, so torchrun, the
torch import, CUDA and the process group start once per suite, and a suite's start-up overlaps the one
before it (pav_payload.suite_launch runs them; issue 20).

Each test keeps its own Launch: evaluation, results, timeouts and artifacts are per test as before. What
changes is only what the run_tests role is handed: one launch for a host's suites instead of one per test.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from pav.launch import Launch
from pav.launches import PYTHON

# Seconds the launch gets on top of its tests' own limits: its watchdog kills a test at its limit, so this
# only covers starting a suite again after a test that hung or died.
RESTART_GRACE_S = 60


def fold(launches: list[Launch]) -> list[Launch]:
    """The launches to run: a host set's foldable launches (two or more) become one launch of suites, in the
    place of the first of them; the rest stay as they are."""
    return [run for run, _ in fold_with_members(launches)]


def fold_with_members(launches: list[Launch]) -> list[tuple[Launch, list[Launch]]]:
    """fold's launches, each with the launches of the tests it runs (itself, where it was not folded)."""
    keyed = [(launch, _key(launch)) for launch in launches]
    by_hosts: dict[tuple[str, ...], list[tuple[tuple[Any, ...], Launch]]] = {}
    for launch, key in keyed:
        if key is not None:
            by_hosts.setdefault(tuple(sorted(launch.argv_by_host)), []).append((key, launch))
    out: list[tuple[Launch, list[Launch]]] = []
    for launch, key in keyed:
        group = by_hosts[tuple(sorted(launch.argv_by_host))] if key is not None else []
        if len(group) < 2:
            out.append((launch, [launch]))
        elif launch is group[0][1]:
            number = sum(run.test.startswith("pav_suites") for run, _ in out) + 1
            out.append((suites_launch(group, number), [member for _, member in group]))
    return out


def _key(launch: Launch) -> tuple[Any, ...] | None:
    """What must be equal for two tests to share a process group; None: this launch runs alone. Read from
    the launch's fields (pav.launches sets payload_args on a payload test each host runs alone)."""
    if launch.launcher != "torchrun" or launch.scope != "host" or not launch.payload_args:
        return None
    # A GPU test's backend (nccl, or auto: nccl wherever CUDA is) and a CPU test's gloo cannot share one.
    group = "gloo" if launch.cpu_only else "nccl-or-auto"
    return (tuple(sorted(launch.ranks_by_host.items())), tuple(sorted(launch.env.items())), group)


def suites_launch(keyed: list[tuple[tuple[Any, ...], Launch]], number: int) -> Launch:
    """One launch of a host set's suites (each test with its _key): GPU suites first, CPU-only (gloo) ones
    last, so a CPU suite's start-up overlaps GPU tests instead of CPU tests taking CPUs from another suite's
    start-up."""
    tests = [launch for _, launch in keyed]
    suites: dict[tuple[Any, ...], list[Launch]] = {}
    for key, launch in keyed:
        suites.setdefault(key, []).append(launch)
    ordered = sorted(suites.items(), key=lambda item: item[0][2] == "gloo")
    argv_by_host = {}
    for host in tests[0].argv_by_host:
        plan = [
            {
                "nproc": group[0].ranks_by_host[host],
                "env": group[0].env,
                "cpu_only": key[2] == "gloo",
                "tests": [{"test": t.test, "timeout_s": t.timeout_s, "args": t.payload_args} for t in group],
            }
            for key, group in ordered
        ]
        argv_by_host[host] = [PYTHON, "-m", "pav_payload.suite_launch", "--plan-json", json.dumps(plan)]
    timeout = sum(t.timeout_s for t in tests) + RESTART_GRACE_S * len(tests)
    first = tests[0]
    return replace(
        first, test=f"pav_suites_{number}", timeout_s=timeout, argv_by_host=argv_by_host, ranks_by_host={},
        env={}, payload_args=[],
    )  # fmt: skip
