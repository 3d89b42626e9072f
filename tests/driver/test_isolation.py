"""Bad-node isolation's search: given which groups fail, it names exactly the bad hosts."""

from __future__ import annotations

import pytest

from pav.isolation import Step, merge, pairs_first


def runner(bad: set[str], log: list[list[list[str]]]):
    def run_round(test: str, number: int, groups: list[list[str]]) -> list[Step]:
        # Rounds run their groups at once: a host may be in one group per round only.
        hosts = [h for g in groups for h in g]
        assert len(hosts) == len(set(hosts)), groups
        log.append(groups)
        return [Step(test, g, "fail" if bad & set(g) else "pass", "", number) for g in groups]

    return run_round


@pytest.mark.parametrize("n", [3, 4, 5, 8, 16])
def test_one_bad_host_is_named_wherever_it_is(n: int) -> None:
    members = [f"h{i}" for i in range(n)]
    for bad in members:
        log: list[list[list[str]]] = []
        suspects, steps = pairs_first("t", members, runner({bad}, log))
        assert [s.host for s in suspects] == [bad]
        assert all(bad in e.hosts and e.status == "fail" for e in suspects[0].evidence)
        assert len(log) <= 4  # a few rounds, however many hosts: not a launch per host
        assert len(steps) == sum(len(r) for r in log)


def test_two_bad_hosts_are_both_named() -> None:
    members = [f"h{i}" for i in range(8)]
    suspects, _ = pairs_first("t", members, runner({"h2", "h5"}, []))
    assert sorted(s.host for s in suspects) == ["h2", "h5"]


def test_without_a_passing_pair_every_host_is_suspect() -> None:
    suspects, _ = pairs_first("t", ["a", "b", "c"], runner({"a", "b", "c"}, []))
    assert sorted(s.host for s in suspects) == ["a", "b", "c"]
    assert all("no passing pair" in s.reason for s in suspects)


def test_merge_keeps_one_entry_per_host() -> None:
    suspects, _ = pairs_first("t", ["a", "b", "c", "d"], runner({"c"}, []))
    again, _ = pairs_first("u", ["a", "b", "c", "d"], runner({"c"}, []))
    [merged] = merge(suspects + again)
    assert merged.host == "c" and "t fails" in merged.reason and "u fails" in merged.reason
