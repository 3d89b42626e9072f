"""--timings and results.json's ansible_time: task durations from ansible-runner's events, summed per role
and task, merged over a stage's playbooks."""

from __future__ import annotations

from pav.ansible_exec import PlaybookOutcome, _record
from pav.reporting import timings
from pav.results import RunResults


def event(name: str, host: str, role: str, task: str, duration: float) -> dict[str, object]:
    return {"event": name, "event_data": {"host": host, "role": role, "task": task, "duration": duration}}


def outcome_of(*events: dict[str, object]) -> PlaybookOutcome:
    outcome = PlaybookOutcome(rc=0, status="successful")
    for e in events:
        _record(e, outcome)
    return outcome


def test_durations_sum_per_task_and_role_over_hosts_and_playbooks() -> None:
    first = outcome_of(
        event("runner_on_ok", "h0", "torch_payload", "Unpack", 1.5),
        event("runner_on_ok", "h1", "torch_payload", "Unpack", 2.5),
        event("runner_on_skipped", "h0", "mpi", "Compile", 0.1),
        event("runner_on_failed", "h1", "mpi", "Compile", 3.0),
        event("playbook_on_task_start", "h0", "mpi", "Compile", 9.0),  # not a host's run of a task
    )
    second = outcome_of(event("runner_on_ok", "h0", "mpi", "Compile", 1.0))
    record: dict[str, object] = {}
    timings.add(record, first, 10.0)
    timings.add(record, second, 2.0)
    summary = timings.summary(record)
    assert summary["wall_s"] == 12.0
    assert summary["task_runs"] == 5 and summary["host_s"] == 8.1
    assert summary["roles"] == {"mpi": 4.1, "torch_payload": 4.0}
    assert [(t["task"], t["runs"]) for t in summary["tasks"]] == [
        ("mpi : Compile", 3),
        ("torch_payload : Unpack", 2),
    ]


def test_the_view_names_each_stage_role_and_costliest_task() -> None:
    results = RunResults("r", "sim", "inv", "/tmp/r")
    record: dict[str, object] = {}
    timings.add(record, outcome_of(event("runner_on_ok", "h0", "preflight", "Gather host facts", 4.0)), 6.0)
    results.ansible_time["configure"] = timings.summary(record)
    text = "\n".join(timings.render(results))
    assert "configure  wall 6s  tasks 4 host-s in 1 runs" in text
    assert "roles: preflight 4s" in text and "4.0s   1x  preflight : Gather host facts" in text
    assert timings.render(RunResults("r", "sim", "inv", "/tmp/r")) == []
