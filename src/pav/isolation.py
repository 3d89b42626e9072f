"""Bad-node isolation: which host (or link) makes a multi-host test fail.

A multi-host test that fails says only that something in the cluster is wrong. Re-running it on smaller
groups names the culprit: first on disjoint pairs (all pairs of a round run at once, so a round costs one
launch however many hosts there are), then each host of a failing pair with a partner from a passing
pair. A host that fails with a known-good partner is a suspect; a host that passes with one is cleared,
which pins its earlier pair's failure on the other host. Hosts whose own single-host tests failed are
suspects from the start.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

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


RunRound = Callable[[str, int, list[list[str]]], list[Step]]


def pairs_first(test: str, members: list[str], run_round: RunRound) -> tuple[list[Suspect], list[Step]]:
    """Isolate the hosts that make ``test`` fail; ``run_round`` runs it on each group and judges it."""
    steps = run_round(test, 1, _pairs(members))
    round_no = 1
    # Every pair failed (what one bad host does to 3 hosts): pair them differently until one passes.
    for other in (members[1:] + members[:1], members[::2] + members[1::2]):
        if any(s.status == "pass" for s in steps) or len(members) < 3:
            break
        round_no += 1
        steps += run_round(test, round_no, _pairs(other))
    good = {h for s in steps if s.status == "pass" for h in s.hosts}
    # The odd host out had no pair in round 1: it is checked with a good partner like the others.
    pending = [h for h in members if h not in good]
    failed_with: dict[str, list[Step]] = {h: [s for s in steps if h in s.hosts] for h in pending}
    suspects: list[Suspect] = []
    while pending and good:
        round_no += 1
        partners = sorted(good)
        batch, pending = pending[: len(partners)], pending[len(partners) :]
        groups = [[host, partner] for host, partner in zip(batch, partners, strict=False)]
        round_steps = run_round(test, round_no, groups)
        steps += round_steps
        for host, step in zip(batch, round_steps, strict=True):
            if step.status == "pass":
                good.add(host)
                continue
            evidence = [s for s in failed_with.get(host, []) if s.status != "pass"] + [step]
            partner = step.hosts[1]
            suspects.append(Suspect(host, f"{test} fails with known-good partner {partner}", evidence))
    for host in pending:  # nobody passed: no good partner to tell the hosts apart
        evidence = [s for s in failed_with.get(host, []) if s.status != "pass"]
        suspects.append(
            Suspect(host, f"{test} failed in every group (no passing pair to compare with)", evidence)
        )
    return suspects, steps


def _pairs(hosts: list[str]) -> list[list[str]]:
    return [hosts[i : i + 2] for i in range(0, len(hosts) - 1, 2)]


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


def to_record(suspects: list[Suspect], steps: list[Step], note: str) -> dict[str, Any]:
    return {
        "suspects": [asdict(s) for s in suspects],
        "steps": [asdict(s) for s in steps],
        "note": note,
    }
