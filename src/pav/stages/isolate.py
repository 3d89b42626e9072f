"""Isolate: name the host behind a failure. Runs after collect, before the report.

Single-host tests name their host directly. A failing multi-host test is re-run on pairs of hosts, then
each host of a failing pair with a known-good partner (pav.isolation), so results.json can say which host
to replace, with the runs that show it.
"""

from __future__ import annotations

from dataclasses import replace

from pav.context import RunContext
from pav.hostlist import compress
from pav.inventory import racks_of
from pav.isolation import MIN_HOSTS, Link, Step, Suspect, isolate, merge, to_record
from pav.judging import Judge
from pav.launch import Launch
from pav.launches import cluster_launch
from pav.results import TestResult
from pav.stages import collect, report, validate

FAILED = ("fail", "error")
# Launches whose every host runs torchrun: each pair gets its own rendezvous. mpirun tests start from one
# host over the cluster's fixed hostfile, so they are not re-run per pair. The FOR TESTING plain launch
# (pav_payload.plain) is started as torchrun's is, an agent on every host meeting at node 0's.
ISOLABLE_LAUNCHERS = ("torchrun", "plain")
ROUND_COLLECTS = {"pav_validate_collects": True, "collect_unpack": False}  # the collect stage unpacks


def run(ctx: RunContext) -> str:
    report.judge_launches(ctx)
    suspects = _from_single_host_tests(ctx, ctx.results.tests)
    steps: list[Step] = []
    if not ctx.inputs.isolate:
        ctx.results.isolation = to_record(merge(suspects), steps, ctx.inputs.no_pair_reruns)
        return _summary(ctx)
    notes = []
    failing = _failing_multi_host(ctx)
    if failing and ctx.inputs.no_pair_reruns:
        notes.append(ctx.inputs.no_pair_reruns)
        failing = []
    judging = report.run_judge(ctx)
    racks = racks_of(ctx.hosts)
    links: list[Link] = []
    for test in failing:
        members = [h for h in test.hosts if h not in ctx.missing]
        if len(members) < MIN_HOSTS:
            notes.append(f"{test.name}: {len(members)} hosts are too few to tell apart by pairs")
            continue
        found = isolate(
            test.name, members, lambda name, n, groups: _round(ctx, judging, name, n, groups), racks
        )
        suspects += found.suspects
        links += found.links
        steps += found.steps
    ctx.results.isolation = to_record(merge(suspects), steps, "; ".join(notes), links)
    return _summary(ctx)


def _summary(ctx: RunContext) -> str:
    named = [s["host"] for s in ctx.results.isolation["suspects"]]
    said = [f"suspect host(s): {compress(named)}"] if named else []
    said += [
        f"suspect link between {compress(a)} and {compress(b)}"
        for a, b in (link["sides"] for link in ctx.results.isolation.get("links", []))
    ]
    return "; ".join(said) or "no suspect host"


def _from_single_host_tests(ctx: RunContext, tests: list[TestResult]) -> list[Suspect]:
    suspects = []
    for test in tests:
        if test.status in FAILED and len(test.hosts) == 1 and _scope(ctx, test.name) == "host":
            step = Step(test.name, list(test.hosts), test.status, test.reason)
            suspects.append(Suspect(test.hosts[0], f"{test.name} {test.status}: {test.reason}", [step]))
    return suspects


def _failing_multi_host(ctx: RunContext) -> list[TestResult]:
    return [
        t
        for t in ctx.results.tests
        if t.status in FAILED
        and (spec := ctx.inputs.spec(t.name)) is not None
        and spec.scope == "cluster"
        and spec.launcher in ISOLABLE_LAUNCHERS
    ]


def _scope(ctx: RunContext, name: str) -> str:
    spec = ctx.inputs.spec(name)
    return spec.scope if spec is not None else ""  # gpu_health: no test of the run's to re-run


def _round(ctx: RunContext, judging: Judge, test: str, number: int, groups: list[list[str]]) -> list[Step]:
    """Run ``test`` once per group, all groups at once, and judge each group as the test itself is judged:
    its profile gates and the gates its hosts' facts derive (a slow GPU, the fabric between the group)."""
    spec = ctx.inputs.spec(test)
    assert spec is not None  # _failing_multi_host took it from the run's tests
    round_spec = replace(spec, name=f"{spec.name}.isolate{number}")
    views = {view.name: view for view in validate.host_views(ctx)}
    timeout_s = ctx.inputs.timeouts.for_test(spec.name)
    launch = Launch(
        round_spec.name, spec.launcher, "cluster", timeout_s, env=dict(spec.env), gates_of=spec.gates_of
    )
    for group in groups:
        views_of = [views[h] for h in group]
        part, _ = cluster_launch(round_spec, views_of, ctx.settings, ctx.results.run_id, timeout_s)
        if part is not None:
            launch.argv_by_host |= part.argv_by_host
            launch.ranks_by_host |= part.ranks_by_host
            launch.members += group
    # The round's playbook collects too (one ansible-playbook start less a round); collect.run then only
    # fetches what it could not.
    validate.launch_tests(ctx, [launch], stage="isolate", extravars=ROUND_COLLECTS)
    collect.run(ctx)
    results = [judging.group(launch, group, ctx.run_dir, spec.name) for group in groups]
    return [Step(test, group, r.status, r.reason, number) for group, r in zip(groups, results, strict=True)]
