"""Bad-node isolation: which host (or link) makes a multi-host test fail.

A multi-host test that fails says only that something in the cluster is wrong. Re-running it on smaller
groups names the culprit: rounds of disjoint pairs (all pairs of a round run at once, so a round costs one
launch however many hosts there are) until every host is tied to every other by tested pairs and each host
passed in a pair or failed next to one that did (a known-good partner). A host that fails with a known-good
partner is a suspect, unless the failing pairs are exactly those across two sets of hosts that each pass
alone: a bad link between the sets (docs/isolation.md). Hosts whose own single-host tests failed are
suspects from the start.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from pav.hostlist import compress, natural_key
from pav.isolation_pairs import Components, Round, by_rack, fill, link

MIN_HOSTS = 3  # two hosts that fail together cannot be told apart by pairing


@dataclass
class Step:
    """One group's run of a test during isolation."""

    test: str
    hosts: list[str]
    status: str  # pass, fail or error, as the test's own result
    detail: str = ""
    round: int = 0


@dataclass
class Suspect:
    host: str
    reason: str
    evidence: list[Step] = field(default_factory=list)


@dataclass
class Link:
    """A fault between two sets of hosts that each pass alone and fail together: a link between them (a rack's
    uplink, a spine, a cable), not a host."""

    sides: list[list[str]]
    reason: str
    evidence: list[Step] = field(default_factory=list)
    test: str = ""  # the test that fails across the sides
    racks: list[list[str]] = field(default_factory=list)  # each side's racks (pav_rack); [] where none is set


@dataclass
class Found:
    suspects: list[Suspect]
    links: list[Link]
    steps: list[Step]


RunRound = Callable[[str, int, list[list[str]]], list[Step]]


def round_budget(hosts: int) -> int:
    """The most rounds a search of one bad host, two, or a bad link between two sets takes (the tests hold
    it to this for 3 to 64 hosts, racks or none)."""
    return math.ceil(math.log2(hosts)) + 2


def isolate(
    test: str, members: list[str], run_round: RunRound, racks: Mapping[str, str] | None = None
) -> Found:
    """Name the hosts (or the link) that make ``test`` fail; ``run_round`` runs it on each group at once and
    judges it. ``racks``: host -> its rack or leaf switch, where the inventory says (pav_rack)."""
    return _Search(test, members, run_round, racks or {}).run()


class _Search:
    """Rounds of disjoint pairs until every host is tied to every other by tested pairs and each host either
    passed in a pair or failed next to one that did; then, where the failing pairs split the hosts into two
    sets that could be two sides of a link, one round runs each set alone."""

    def __init__(self, test: str, members: list[str], run_round: RunRound, racks: Mapping[str, str]) -> None:
        self.test, self.run_round, self.racks = test, run_round, racks
        self.hosts = by_rack(members, racks)
        self.steps: list[Step] = []
        self.rounds = 0
        self.tested: set[frozenset[str]] = set()
        self.parts = Components(self.hosts)
        self.cleared: set[str] = set()

    def run(self) -> Found:
        limit = 2 * round_budget(len(self.hosts))  # a guard: each round ties two parts or clears a host
        while self.rounds < limit and not (self.steps and self._settled()):
            pairs = self._next_pairs()
            if not pairs:
                break
            self._run(pairs)
        return self._conclude()

    def _run(self, groups: list[list[str]]) -> list[Step]:
        self.rounds += 1
        ran = self.run_round(self.test, self.rounds, groups)
        self.steps += ran
        for step in ran:
            if len(step.hosts) == 2:
                self.tested.add(frozenset(step.hosts))
                self.parts.union(*step.hosts)
            if step.status == "pass":
                self.cleared |= set(step.hosts)
        return ran

    def _settled(self) -> bool:
        root = self.parts.find(self.hosts[0])
        return all(self.parts.find(h) == root for h in self.hosts) and not self._unresolved()

    def _unresolved(self) -> list[str]:
        """Hosts that neither passed in a pair nor failed next to a host that passed in one."""
        return [h for h in self.hosts if h not in self.cleared and self._failed_with_cleared(h) is None]

    def _failed_with_cleared(self, host: str) -> Step | None:
        return next(
            (
                s
                for s in self.steps
                if host in s.hosts and len(s.hosts) == 2 and s.status != "pass"
                and all(h in self.cleared for h in s.hosts if h != host)
            ),
            None,
        )  # fmt: skip

    def _next_pairs(self) -> list[list[str]]:
        round_ = Round(self.racks, self.tested)
        cleared = [h for h in self.hosts if h in self.cleared]
        parts = self.parts.copy()  # as this round's pairs will tie them
        for host in self._unresolved():
            partner = self._partner(round_, parts, host, cleared)
            if partner:
                round_.add(host, partner)
                parts.union(host, partner)
        link(round_, self.hosts, parts)
        fill(round_, [h for h in self.hosts if h not in self.cleared], self.hosts)
        return round_.pairs

    def _partner(self, round_: Round, parts: Components, host: str, cleared: list[str]) -> str | None:
        """A cleared host for ``host``: of its own rack first (no uplink), not yet tied to it first (the pair
        then also ties two parts)."""
        rack = self.racks.get(host, "")
        for same_rack in (True, False):
            for untied in (True, False):
                for other in cleared:
                    if (
                        (self.racks.get(other, "") == rack) == same_rack
                        and (parts.find(other) != parts.find(host)) == untied
                        and round_.fits(host, other)
                    ):
                        return other
        return None

    def _conclude(self) -> Found:
        left = [h for h in self.hosts if h not in self.cleared]
        if not self.cleared:
            return Found(
                self._suspects(left, "failed in every group (no passing pair to compare with)"),
                [],
                self.steps,
            )
        sides = self._sides()
        if sides is None or min(len(s) for s in sides) <= 1:  # a host failing with each partner is the fault
            return Found(self._suspects(left), [], self.steps)
        checks = self._run(sides)
        if all(s.status == "pass" for s in checks):
            return Found([], [self._link(sides, checks)], self.steps)
        return Found(self._suspects(left), [], self.steps)

    def _sides(self) -> list[list[str]] | None:
        """The two sets the pairs split the hosts into, if a pair fails exactly when it spans both (what a bad
        link between them does); None where no such split fits (what bad hosts paired together do)."""
        side = {self.hosts[0]: 0}
        edges = [(s.hosts[0], s.hosts[1], int(s.status != "pass")) for s in self.steps if len(s.hosts) == 2]
        grown = True
        while grown:
            grown = False
            for a, b, differ in edges:
                if (a in side) != (b in side):
                    known, other = (a, b) if a in side else (b, a)
                    side[other] = side[known] ^ differ
                    grown = True
                elif a in side and side[a] ^ side[b] != differ:
                    return None
        split = [[h for h in self.hosts if side.get(h) == k] for k in (0, 1)]
        return split if split[1] else [split[0], []]

    def _suspects(self, hosts: list[str], why: str = "") -> list[Suspect]:
        out = []
        for host in hosts:
            evidence = [s for s in self.steps if host in s.hosts and s.status != "pass"]
            with_cleared = self._failed_with_cleared(host)
            if with_cleared is not None:
                partner = next(h for h in with_cleared.hosts if h != host)
                reason = f"{self.test} fails with known-good partner {partner}"
            else:
                reason = f"{self.test} {why}"
            out.append(Suspect(host, reason, evidence))
        return out

    def _link(self, sides: list[list[str]], checks: list[Step]) -> Link:
        across = [s for s in self.steps if len(s.hosts) == 2 and s.status != "pass"]
        a, b = sides
        reason = (
            f"{self.test} passes on {compress(a)} alone and on {compress(b)} alone and fails in every pair "
            "across them: a link between them (a rack uplink, a switch, a cable), not a host"
        )
        racks = [sorted({self.racks[h] for h in side if h in self.racks}, key=natural_key) for side in sides]
        return Link([a, b], reason, [*checks, *across], self.test, racks if any(racks) else [])


def merge(suspects: list[Suspect]) -> list[Suspect]:
    """One entry per host, reasons joined, evidence kept in order."""
    by_host: dict[str, Suspect] = {}
    for suspect in suspects:
        known = by_host.get(suspect.host)
        if known is None:
            by_host[suspect.host] = Suspect(suspect.host, suspect.reason, list(suspect.evidence))
            continue
        known.reason = f"{known.reason}; {suspect.reason}"
        known.evidence += suspect.evidence
    return list(by_host.values())


def to_record(
    suspects: list[Suspect], steps: list[Step], note: str, links: list[Link] | None = None
) -> dict[str, Any]:
    return {
        "suspects": [asdict(s) for s in suspects],
        "links": [asdict(link) for link in links or []],
        "steps": [asdict(s) for s in steps],
        "note": note,
    }
