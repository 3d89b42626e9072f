"""The sim env gives each cluster a /24 no interface on this machine holds, and keeps it until teardown."""

import hashlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from pav.provisioning import sim


def _preferred(state_dir: Path) -> int:
    digest = int(hashlib.sha256(str(state_dir).encode()).hexdigest(), 16)
    return sim.SUBNETS[(digest >> 40) % len(sim.SUBNETS)]


@pytest.fixture
def occupied(sim_deps: None, tmp_path: Path) -> Iterator[int]:
    """A bridge holding the subnet tmp_path's digest would pick, as another live cluster's would."""
    index = _preferred(tmp_path / "state")
    name = f"pavt-{index}"
    subprocess.run(["ip", "link", "add", name, "type", "bridge"], check=True)
    try:
        subprocess.run(["ip", "addr", "add", f"10.77.{index}.1/24", "dev", name], check=True)
        yield index
    finally:
        subprocess.run(["ip", "link", "del", name], check=False)


def test_an_occupied_subnet_is_skipped_and_the_choice_kept(occupied: int, tmp_path: Path) -> None:
    state = tmp_path / "state"
    assert occupied in sim.subnets_in_use()
    chosen = sim.variables(state, 2)["subnet_index"]
    assert chosen != occupied
    assert chosen not in sim.subnets_in_use()
    assert sim.subnet_file(state).read_text().strip() == str(chosen)
    # Kept: a later stage of the same state dir finds the same subnet, even once the preferred one is free.
    subprocess.run(["ip", "link", "del", f"pavt-{occupied}"], check=True)
    assert sim.preview_variables(state, 2)["subnet_index"] == chosen


def test_a_free_preferred_subnet_is_taken(sim_deps: None, tmp_path: Path) -> None:
    state = tmp_path / "state"
    if _preferred(state) in sim.subnets_in_use():
        pytest.skip("another cluster holds this path's preferred subnet right now")
    assert sim.preview_variables(state, 1)["subnet_index"] == _preferred(state)
    assert not sim.subnet_file(state).exists()  # a preview saves nothing
