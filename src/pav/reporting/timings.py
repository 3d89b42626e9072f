"""Where a run's orchestration time goes: each playbook's task durations (ansible-runner's events), summed
per role and per task, for results.json's ansible_time and the --timings view."""

from __future__ import annotations

from typing import Any

from pav.ansible_exec import PlaybookOutcome
from pav.reporting.changes import role_of
from pav.results import RunResults

TOP_TASKS = 12  # kept per stage in results.json: the costly ones, not all 70
SHOWN_TASKS = 5  # printed per stage by --timings


def add(record: dict[str, Any], outcome: PlaybookOutcome, wall_s: float) -> None:
    """Merge one playbook's durations into its stage's record (validate runs several playbooks)."""
    tasks = {t["task"]: t for t in record.get("tasks_all", [])}
    for label, seconds in outcome.durations.items():
        task = tasks.setdefault(label, {"task": label, "host_s": 0.0, "runs": 0})
        task["host_s"] += sum(seconds)
        task["runs"] += len(seconds)
    record["tasks_all"] = list(tasks.values())
    record["wall_s"] = round(record.get("wall_s", 0.0) + wall_s, 1)


def summary(record: dict[str, Any]) -> dict[str, Any]:
    """The stage's record as results.json keeps it: totals, per role, the costliest tasks."""
    tasks = sorted(record.get("tasks_all", []), key=lambda t: -t["host_s"])
    roles: dict[str, float] = {}
    for task in tasks:
        role = role_of(task["task"])
        roles[role] = roles.get(role, 0.0) + task["host_s"]
    return {
        "wall_s": record.get("wall_s", 0.0),
        "host_s": round(sum(t["host_s"] for t in tasks), 1),
        "task_runs": sum(t["runs"] for t in tasks),
        "roles": {r: round(s, 1) for r, s in sorted(roles.items(), key=lambda kv: -kv[1])},
        "tasks": [t | {"host_s": round(t["host_s"], 2)} for t in tasks[:TOP_TASKS]],
    }


def render(results: RunResults) -> list[str]:
    """--timings: per playbook stage its wall time, its tasks' host-seconds, per role, the top tasks."""
    lines = ["timings (host-s: seconds summed over hosts; a task's runs: one per host it ran on)"]
    for stage, rec in results.ansible_time.items():
        tasks = f"tasks {rec['host_s']:.0f} host-s in {rec['task_runs']} runs"
        lines.append(f"  {stage:<10} wall {rec['wall_s']:.0f}s  {tasks}")
        lines.append("    roles: " + ", ".join(f"{r} {s:.0f}s" for r, s in rec["roles"].items()))
        lines += [f"    {t['host_s']:6.1f}s {t['runs']:3d}x  {t['task']}" for t in rec["tasks"][:SHOWN_TASKS]]
    return lines if results.ansible_time else []
