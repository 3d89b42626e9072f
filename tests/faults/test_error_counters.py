"""The node state across two sim hosts, end to end (issue 50): the configure read and the read after the
tests (roles/run_tests) of each host's RDMA port, from a sysfs tree planted for it where no real port is,
and the verdict. Host 0's port goes down during the tests (fault_plain_link_downed: each launch adds 1 to
its link_downed, as a link that went down under traffic would): error_counters FAILs naming host 0's port,
host 1's passes. The two HCAs run different firmware: software_versions FAILs naming both nodes.

The trees sit on the cluster's shared folder (/srv/pav-shared on every sim host), which a test can write;
each host reads its own (host variable torch_payload_infiniband_sysfs). Only the payload's facts read looks
at them: the hosts' NCCL environment (preflight's own read of the RDMA ports) stays as it was, so hosts 0
and 1 are left as found."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from pav.catalog import PLANTED_SYSFS
from tests.faults.conftest import Configured, Sandbox

pytestmark = pytest.mark.slow

COUNTERS = ("symbol_error", "link_downed", "link_error_recovery", "port_rcv_errors",
            "excessive_buffer_overrun_errors")  # fmt: skip


def plant_port(root: Path, firmware: str) -> None:
    """An InfiniBand HCA with one active NDR port, as sysfs lays it out (tests/payload/test_gpu_state_facts.py
    reads the same layout)."""
    hca = root / "infiniband" / "mlx5_0"
    port = hca / "ports" / "1"
    (port / "counters").mkdir(parents=True)
    (hca / "fw_ver").write_text(f"{firmware}\n")
    (port / "state").write_text("4: ACTIVE\n")
    (port / "rate").write_text("400 Gb/sec (4X NDR)\n")
    (port / "link_layer").write_text("InfiniBand\n")
    for name in COUNTERS:
        (port / "counters" / name).write_text("0\n")


def test_a_port_that_went_down_and_a_firmware_that_differs_are_named(
    configured: Configured, sandbox: Sandbox
) -> None:
    shared = configured.box.state / "sim" / "shared"
    planted = shared / PLANTED_SYSFS.removeprefix("/srv/pav-shared/")
    plant_port(planted, "28.39.1002")  # host 0's: the path fault_plain_link_downed counts in
    plant_port(planted / "host1", "28.36.1010")
    inventory = configured.inventory(0, 1)
    hosts = yaml.safe_load(inventory.read_text())
    host0, host1 = configured.names[:2]
    trees = {host0: f"{PLANTED_SYSFS}/infiniband", host1: f"{PLANTED_SYSFS}/host1/infiniband"}
    for name, tree in trees.items():
        hosts["all"]["hosts"][name]["torch_payload_infiniband_sysfs"] = tree
    mine = sandbox.base / "inventory"
    shutil.copytree(inventory.parent, mine)
    (mine / "hosts.yml").write_text(yaml.safe_dump(hosts, sort_keys=False))
    try:
        run = sandbox.cli(
            "--inventory", str(mine / "hosts.yml"),
            "--stages", "configure,validate,collect,report,teardown", "--tests", "fault_plain_link_downed",
        )  # fmt: skip
    finally:
        counted_at = planted / "infiniband/mlx5_0/ports/1/counters/link_downed"
        link_downed = [
            counted_at.read_text(),
            (planted / "host1" / counted_at.relative_to(planted)).read_text(),
        ]
        shutil.rmtree(planted)
    assert [n.strip() for n in link_downed] == ["2", "0"]  # each host's launch counted in host 0's tree
    assert run.rc == 1, run.stdout + run.stderr
    results = sandbox.results()
    facts = results["hosts"][host0]["facts"]
    assert [p["counters"]["link_downed"] for p in facts["gpus"]["rdma"]] == [0]
    assert [p["counters"]["link_downed"] for p in facts["gpus_after"]["rdma"]] == [2]
    tests = {(t["name"], tuple(t["hosts"])): t for t in results["tests"]}
    assert {t["status"] for (name, _), t in tests.items() if name == "fault_plain_link_downed"} == {"pass"}
    assert tests[("error_counters", (host1,))]["status"] == "pass"
    counted = tests[("error_counters", (host0,))]
    assert counted["status"] == "fail", counted
    assert counted["threshold"]["problems"] == [
        {"part": "mlx5_0 port 1", "problem": "mlx5_0 port 1: link_downed +2 during the run (any fails)"}
    ]
    drift = tests[("software_versions", (host0, host1))]
    listed = f"{host0} 28.39.1002, {host1} 28.36.1010"
    assert drift["status"] == "fail" and drift["threshold"]["problems"] == [
        {"part": h, "problem": f"{h}: hca_fw differs across the nodes ({listed})", "category": "config"}
        for h in (host0, host1)
    ]
    assert results["verdict"] == "FAIL"
    assert "mlx5_0 port 1: link_downed +2 during the run" in run.stdout
    assert f"{host0} (a configuration problem): {host0}: hca_fw differs" in run.stdout
