"""Bad-node isolation's search (pav.isolation) on a model of N hosts (tests/driver/isolation_model.py): it
names exactly the bad or slow hosts, or a bad link between two sets of hosts as a link, within
ceil(log2 N) + 2 rounds; where the inventory names racks, no rack uplink carries two pairs of a round.
Every N from 3 to 64 and every position: scripts/isolation-rounds (docs/benchmarks.md); here a spread of N."""

from __future__ import annotations

import itertools

import pytest

from pav.isolation import Found, isolate, merge, round_budget
from pav.isolation_pairs import Components
from tests.driver.isolation_model import Fleet, hosts, racks_of

SIZES = [3, 4, 5, 6, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64]


def named(found: Found) -> list[str]:
    return sorted(s.host for s in found.suspects)


def spread(names: list[str]) -> list[tuple[str, str]]:
    """Every two hosts of up to 10, else pairs at both ends, the middle and a stride between."""
    if len(names) <= 10:
        return list(itertools.combinations(names, 2))
    picks = sorted({0, 1, 2, len(names) // 2, len(names) - 2, len(names) - 1, *range(3, len(names), 7)})
    return [(names[i], names[j]) for i, j in itertools.combinations(picks, 2)]


@pytest.mark.parametrize("n", SIZES)
def test_one_bad_host_is_named_wherever_it_is(n: int) -> None:
    for bad in hosts(n):
        fleet = Fleet(hosts(n), bad=frozenset({bad}))
        found = fleet.search()
        assert named(found) == [bad] and not found.links
        [suspect] = found.suspects
        assert suspect.evidence and all(bad in e.hosts and e.status == "fail" for e in suspect.evidence)
        assert "known-good partner" in suspect.reason
        assert len(fleet.rounds) <= round_budget(n)
        assert len(found.steps) == sum(len(r) for r in fleet.rounds)


@pytest.mark.parametrize("n", [n for n in SIZES if n > 3])
def test_two_bad_hosts_are_both_named_wherever_they_are(n: int) -> None:
    for pair in spread(hosts(n)):
        fleet = Fleet(hosts(n), bad=frozenset(pair))
        found = fleet.search()
        assert named(found) == sorted(pair) and not found.links, pair
        assert len(fleet.rounds) <= round_budget(n), (pair, fleet.rounds)


@pytest.mark.parametrize("n", [4, 9, 32])
def test_a_slow_host_is_named(n: int) -> None:
    """A straggler fails every group it is in (the gate compares a group's hosts), like a wrong result."""
    for slow in hosts(n):
        fleet = Fleet(hosts(n), slow=frozenset({slow}))
        assert named(fleet.search()) == [slow]


@pytest.mark.parametrize("n", [n for n in SIZES if n > 3])
def test_a_bad_link_between_two_sets_that_each_pass_is_named_as_a_link(n: int) -> None:
    names = hosts(n)
    for k in range(2, n - 1):
        sides = (frozenset(names[:k]), frozenset(names[k:]))
        fleet = Fleet(names, sides=sides)
        found = fleet.search()
        assert not found.suspects, (k, found.suspects)
        [link] = found.links
        assert link.sides == [names[:k], names[k:]]
        # The last round ran each side alone and both passed: that tells a link from bad hosts.
        assert [(s.hosts, s.status) for s in link.evidence[:2]] == [(names[:k], "pass"), (names[k:], "pass")]
        assert "a link between them" in link.reason
        assert len(fleet.rounds) <= round_budget(n)


def test_a_link_between_scattered_hosts_is_found_too() -> None:
    names = hosts(12)
    odd = frozenset(names[1::2])
    found = Fleet(names, sides=(odd, frozenset(names) - odd)).search()
    assert [set(side) for side in found.links[0].sides] == [set(names[::2]), set(odd)]


def test_two_bad_hosts_are_not_taken_for_a_link() -> None:
    """Two bad hosts split the pairs as a link's two sides would (each fails with every other host); run
    alone, their side fails: hosts, not a link."""
    fleet = Fleet(hosts(8), bad=frozenset({"h1", "h4"}))
    found = fleet.search()
    assert named(found) == ["h1", "h4"] and not found.links
    assert ["h1", "h4"] in fleet.rounds[-1]


@pytest.mark.parametrize(("n", "per_rack"), [(8, 4), (16, 4), (24, 8), (33, 4), (64, 8), (64, 4)])
def test_with_racks_no_uplink_carries_two_pairs_of_a_round(n: int, per_rack: int) -> None:
    names = hosts(n)
    racks = racks_of(names, per_rack)
    cuts = range(per_rack, n - 1, per_rack)
    fleets = [Fleet(names, bad=frozenset(p), racks=racks) for p in spread(names)[::3]]
    fleets += [Fleet(names, bad=frozenset({b}), racks=racks) for b in names[:: max(1, n // 9)]]
    fleets += [Fleet(names, sides=(frozenset(names[:k]), frozenset(names[k:])), racks=racks) for k in cuts]
    for fleet in fleets:
        found = fleet.search()
        expected = sorted(fleet.bad)
        assert named(found) == expected and bool(found.links) == (fleet.sides is not None)
        assert len(fleet.rounds) <= round_budget(n)
        for number, groups in enumerate(fleet.rounds, 1):
            pairs = [g for g in groups if len(g) == 2]
            across = [{racks[a], racks[b]} for a, b in pairs if racks[a] != racks[b]]
            crossed = [rack for two in across for rack in two]
            assert len(crossed) == len(set(crossed)), (number, groups)
        # Pairs within a rack first: the first round crosses an uplink only for a rack's odd host out.
        first = [(racks[a], racks[b]) for a, b in fleet.rounds[0]]
        assert sum(ra != rb for ra, rb in first) <= sum(
            len(names[i : i + per_rack]) % 2 for i in range(0, n, per_rack)
        )


def test_a_rack_s_bad_uplink_is_a_link_between_that_rack_and_the_others() -> None:
    names = hosts(16)
    racks = racks_of(names, 4)
    rack = frozenset(h for h in names if racks[h] == "r2")
    found = Fleet(names, sides=(rack, frozenset(names) - rack), racks=racks).search()
    assert not found.suspects
    assert sorted(map(sorted, found.links[0].sides)) == sorted([sorted(rack), sorted(set(names) - rack)])


def test_without_a_passing_pair_every_host_is_suspect() -> None:
    found = Fleet(["a", "b", "c"], bad=frozenset("abc")).search()
    assert named(found) == ["a", "b", "c"]
    assert all("no passing pair" in s.reason for s in found.suspects)


def test_merge_keeps_one_entry_per_host() -> None:
    found = Fleet(["a", "b", "c", "d"], bad=frozenset("c")).search()
    again = isolate("u", ["a", "b", "c", "d"], Fleet(["a", "b", "c", "d"], bad=frozenset("c")).run_round())
    [merged] = merge(found.suspects + again.suspects)
    assert merged.host == "c" and "t fails" in merged.reason and "u fails" in merged.reason


def test_components_tie_hosts_transitively() -> None:
    parts = Components(["a", "b", "c"])
    parts.union("a", "b")
    copy = parts.copy()
    copy.union("b", "c")
    assert copy.find("a") == copy.find("c") and parts.find("a") != parts.find("c")
