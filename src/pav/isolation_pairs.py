"""The pairs of one isolation round: disjoint, and where the inventory names each host's rack (pav_rack), no
two pairs of a round over one rack's uplink.

Two hosts of one rack meet under its leaf switch: their traffic crosses no uplink, so such pairs come first.
A pair of two racks crosses both racks' uplinks, so a round holds at most one such pair per rack: a slow or
faulty uplink then shows in one pair of the round, and two pairs never share its bandwidth.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field


class Components:
    """Union-find over hosts: which hosts are tied together by the pairs tested so far."""

    def __init__(self, hosts: Iterable[str]) -> None:
        self.parent = {h: h for h in hosts}

    def find(self, host: str) -> str:
        while self.parent[host] != host:
            self.parent[host] = self.parent[self.parent[host]]
            host = self.parent[host]
        return host

    def union(self, a: str, b: str) -> None:
        self.parent[self.find(a)] = self.find(b)

    def copy(self) -> Components:
        out = Components([])
        out.parent = dict(self.parent)
        return out


@dataclass
class Round:
    """A round being filled: its pairs, the hosts in them, the racks whose uplink one of them crosses."""

    racks: Mapping[str, str]
    tested: set[frozenset[str]]
    pairs: list[list[str]] = field(default_factory=list)
    busy: set[str] = field(default_factory=set)
    uplinks: set[str] = field(default_factory=set)

    def free(self, host: str) -> bool:
        return host not in self.busy

    def fits(self, a: str, b: str) -> bool:
        """Both hosts free, the pair not tested before, and no uplink it needs already taken this round."""
        if a == b or a in self.busy or b in self.busy or frozenset((a, b)) in self.tested:
            return False
        ra, rb = self.racks.get(a, ""), self.racks.get(b, "")
        return ra == rb or not ({ra, rb} & self.uplinks)

    def add(self, a: str, b: str) -> None:
        self.pairs.append([a, b])
        self.busy |= {a, b}
        ra, rb = self.racks.get(a, ""), self.racks.get(b, "")
        if ra != rb:
            self.uplinks |= {ra, rb}


def by_rack(hosts: list[str], racks: Mapping[str, str]) -> list[str]:
    """Hosts grouped rack by rack (racks in order of first appearance), the inventory's order within one."""
    order = {rack: i for i, rack in reversed(list(enumerate(racks.get(h, "") for h in hosts)))}
    return sorted(hosts, key=lambda h: order[racks.get(h, "")])


def link(round_: Round, hosts: list[str], parts: Components) -> None:
    """Add pairs that tie together hosts not yet tied (each pair joins two parts), a rack's own hosts first,
    then across racks, one pair per rack uplink."""
    for same_rack in (True, False):
        for i, a in enumerate(hosts):
            for b in hosts[i + 1 :]:
                if not round_.free(a):
                    break
                same = round_.racks.get(a, "") == round_.racks.get(b, "")
                if same == same_rack and parts.find(a) != parts.find(b) and round_.fits(a, b):
                    round_.add(a, b)
                    parts.union(a, b)


def fill(round_: Round, subjects: list[str], hosts: list[str]) -> None:
    """Pairs of a subject (a host not cleared yet) and another host still free, untested together: more
    evidence in a round that runs anyway."""
    for a in subjects:
        for b in hosts:
            if round_.free(a) and round_.fits(a, b):
                round_.add(a, b)
