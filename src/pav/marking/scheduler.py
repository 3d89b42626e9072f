"""What a scheduler gives pav.marking.flow: its names, and find, narrow, mark and unmark its nodes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from pav.context import RunContext
from pav.marking.decide import Mark
from pav.options import Options
from pav.results import Action


@dataclass
class Found:
    """What a recheck finds on the scheduler's nodes: each as the `actions` entry the run records."""

    rechecking: list[Action] = field(default_factory=list)  # the tool's marked nodes, each with its tests
    listed: list[Action] = field(default_factory=list)  # nodes marked by someone else: left alone, listed
    looked: list[str] = field(default_factory=list)  # every node looked at, as a refused recheck names it

    @property
    def tests(self) -> dict[str, tuple[str, ...]]:
        """The tool's marked hosts -> the tests their marks name."""
        return {a.host: a.tests for a in self.rechecking}


def rechecking(
    action: str, host: str, reason: str, tests: tuple[str, ...], cordoned: bool | None = None
) -> Action:
    """A node a recheck re-tests, before it ran: its mark's reason and tests, no change made yet."""
    return Action(
        action, host, reason, tests, None, f"rechecking {', '.join(tests)}", cordoned_by_pav=cordoned
    )


class Scheduler(Protocol):
    flag: str  # --on-fail's value that marks on it: drain, taint
    action: str  # results.json action of a mark: "slurm drain"
    recheck_action: str  # and of a recheck's node: "slurm recheck"
    mark_text: str  # the mark, as a refused recheck names it
    verb: str  # draining, tainting
    kept: str  # "kept drained": a rechecked node that did not pass
    left_marking: str  # what a failed marking step did not change
    left_returning: str  # what a failed return step did not change

    def find(self, ctx: RunContext) -> Found | None:
        """The tool's marked nodes and the tests each failed; None where there is nothing to look at."""
        ...

    def narrow(self, ctx: RunContext, found: Found) -> Options:
        """The options a recheck of the found nodes runs with (the run's hosts narrowed where it has them)."""
        ...

    def stop(self, ctx: RunContext) -> None:
        """Nothing to recheck: what the run must no longer touch."""
        ...

    def mark(self, ctx: RunContext, marks: list[Mark]) -> list[Action]:
        """Mark each host; each outcome an Action, never raised."""
        ...

    def unmark(self, ctx: RunContext, passed: list[tuple[Action, str]]) -> None:
        """Return each rechecked node that passed (its recheck Action and why): its ok and detail set."""
        ...
