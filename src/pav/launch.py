"""A launch: one test's command per host, as planned (pav.launches), run (roles/run_tests) and judged. Data
only, so what merely carries launches (the run's context, the judging) does not import how they are built."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Launch:
    test: str
    launcher: str
    scope: str
    timeout_s: int
    argv_by_host: dict[str, list[str]] = field(default_factory=dict)  # where a command starts
    ranks_by_host: dict[str, int] = field(default_factory=dict)  # result files each host must return
    members: list[str] = field(default_factory=list)  # hosts the test spans
    env: dict[str, str] = field(default_factory=dict)  # set for the launcher and every rank
    gates_of: str = ""  # the test whose threshold gates judge this one; empty: its own
    # A payload test each host runs alone (torchrun --standalone, ranks_by_host processes): what follows
    # `-m pav_payload` in its argv. pav.suites folds such launches from these fields, never from the argv.
    payload_args: list[str] = field(default_factory=list)
    cpu_only: bool = False  # its processes use no GPU (gloo): they cannot share a GPU test's process group

    @property
    def hosts(self) -> list[str]:
        return list(self.argv_by_host)

    def to_var(self) -> dict[str, Any]:
        return asdict(self)
