"""A model of N hosts for isolation's search (pav.isolation): which groups of a round fail, given bad hosts (a
wrong result), slow hosts (the straggler gate compares the hosts of a group, so a group with one fails) or a
bad link between two sets of hosts (a group fails when it spans both)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from pav.isolation import Found, RunRound, Step, isolate


@dataclass
class Fleet:
    hosts: list[str]
    bad: frozenset[str] = frozenset()
    slow: frozenset[str] = frozenset()
    sides: tuple[frozenset[str], frozenset[str]] | None = None
    racks: Mapping[str, str] = field(default_factory=dict)
    rounds: list[list[list[str]]] = field(default_factory=list)

    def fails(self, group: list[str]) -> bool:
        hosts = set(group)
        if hosts & (self.bad | self.slow):
            return True
        return self.sides is not None and bool(hosts & self.sides[0]) and bool(hosts & self.sides[1])

    def run_round(self) -> RunRound:
        def run(test: str, number: int, groups: list[list[str]]) -> list[Step]:
            # A round runs its groups at once: a host may be in one group of it only.
            hosts = [h for g in groups for h in g]
            assert len(hosts) == len(set(hosts)), groups
            assert number == len(self.rounds) + 1
            self.rounds.append(groups)
            return [Step(test, g, "fail" if self.fails(g) else "pass", "", number) for g in groups]

        return run

    def search(self) -> Found:
        return isolate("t", self.hosts, self.run_round(), self.racks)


def hosts(n: int) -> list[str]:
    return [f"h{i}" for i in range(n)]


def racks_of(names: list[str], per_rack: int) -> dict[str, str]:
    return {h: f"r{i // per_rack}" for i, h in enumerate(names)}
