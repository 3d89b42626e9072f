"""What configure changed on a host, counted one way for summary.txt, report.html and results.json."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

# The roles that tune the host (limits, sysctl, /dev/shm, NCCL env): what --check-tuning holds back.
TUNING_ROLES = ("host_tuning", "nccl_env")


def role_of(label: str) -> str:
    """The role of a "role : task" label (ansible_exec's); a playbook's own task is "(play)"."""
    return label.split(" : ")[0] if " : " in label else "(play)"


def by_role(changes: list[str]) -> dict[str, int]:
    """Changed tasks per role."""
    return dict(Counter(role_of(c) for c in changes))


def still_changed(changes: list[str]) -> list[str]:
    """What a run changed outside tuning: the roles that install what the tests run (payload, MPI program,
    nccl-tests) still act in check mode, inside the run's own folder then."""
    return [c for c in changes if role_of(c) not in TUNING_ROLES]


def tuning_line(
    status: str, changes: list[str], applied: bool, configure: Mapping[str, int] | None = None
) -> str:
    """A host's tuning in one phrase, and what other roles changed beside it (results.json's host status,
    changes, tuning_applied and Ansible's configure counts for it)."""
    stopped = configure_stopped(status, configure or {})
    if not changes and status in ("unknown", "unreachable"):
        return "not configured"
    if not changes and stopped:
        return f"no change made before {stopped}"
    counts = by_role(changes)
    tuning = sum(n for role, n in counts.items() if role in TUNING_ROLES)
    other = sum(n for role, n in counts.items() if role not in TUNING_ROLES)
    said = f"{tuning} change(s) {'applied' if applied else 'would apply (check mode)'}"
    said = said if tuning else ("no tuning change" if stopped else "no changes needed")
    said += f"; {other} by other roles" if other else ""
    return said + (f" before {stopped}" if stopped else "")


def configure_stopped(status: str, configure: Mapping[str, int]) -> str:
    """How configure ended short of its end on a host, or "": a signal cut it, a task failed, the host
    went away. Only a host configure ran through can be said to need no changes."""
    if status == "interrupted":
        return "configure was interrupted on it"
    if configure.get("failures"):
        return "configure failed on it"
    return "it became unreachable during configure" if configure.get("dark") else ""
