"""Host lists as people read them (issue 65): natural order and Slurm's hostlist ranges, one module that every
printed list of hosts goes through."""

from __future__ import annotations

from pav.hostlist import compress, describe, natural


def test_natural_order_puts_2_before_10() -> None:
    names = [f"sim-x-{i}" for i in (1, 10, 11, 2, 0)]
    assert natural(names) == ["sim-x-0", "sim-x-1", "sim-x-2", "sim-x-10", "sim-x-11"]


def test_64_hosts_are_one_range() -> None:
    assert compress(f"sim-x-{i}" for i in reversed(range(64))) == "sim-x-[0-63]"
    assert describe(f"sim-x-{i}" for i in range(64)) == "64 hosts sim-x-[0-63]"


def test_gaps_make_several_spans_in_one_bracket() -> None:
    names = ["node-12", "node-1", "node-2", "node-3", "node-7", "node-9", "node-10", "node-11"]
    assert compress(names) == "node-[1-3,7,9-12]"


def test_a_name_without_a_number_stays_as_it_is_in_natural_order() -> None:
    assert (
        compress(["login", "gpu-b", "node-2", "node-1", "gpu-a", "node-10"])
        == "gpu-a,gpu-b,login,node-[1-2,10]"
    )
    assert compress(["localhost"]) == describe(["localhost"]) == "localhost"


def test_a_lone_numbered_name_and_prefixes_apart() -> None:
    assert (
        compress(["node-7", "rack1-gpu3", "rack2-gpu3", "rack1-gpu4"]) == "node-7,rack1-gpu[3-4],rack2-gpu3"
    )


def test_zero_padded_names_keep_their_width() -> None:
    assert compress(["n08", "n09", "n10", "n11", "n007"]) == "n007,n[08-11]"


def test_each_name_once() -> None:
    assert describe(["h1", "h2", "h1"]) == "2 hosts h[1-2]"
