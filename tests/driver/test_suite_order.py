"""The suite's own order (tests/conftest.py): files that hold a slow test go first, so that xdist hands out
the long end-to-end tests before the sub-second ones and no long test is left to run alone at the end."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.conftest import slow_files_first


@dataclass
class Item:
    """What slow_files_first reads of a pytest item: its file and its slow mark."""

    path: Path
    name: str
    slow: bool = False

    def get_closest_marker(self, name: str) -> Any:
        return True if name == "slow" and self.slow else None


def test_files_with_a_slow_test_go_first_each_in_its_own_order() -> None:
    fast_a = [Item(Path("a.py"), "a1"), Item(Path("a.py"), "a2")]
    mixed_b = [Item(Path("b.py"), "b1"), Item(Path("b.py"), "b2", slow=True), Item(Path("b.py"), "b3")]
    fast_c = [Item(Path("c.py"), "c1")]
    slow_d = [Item(Path("d.py"), "d1", slow=True), Item(Path("d.py"), "d2", slow=True)]
    ordered = slow_files_first([*fast_a, *mixed_b, *fast_c, *slow_d])  # type: ignore[list-item]
    # b's fast tests stay with it and before its slow one: a shared cluster's group relies on file order.
    assert [i.name for i in ordered] == ["b1", "b2", "b3", "d1", "d2", "a1", "a2", "c1"]
