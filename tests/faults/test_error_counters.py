"""Error counters over a run, end to end on a sim host (issue 50): the configure read and the read after the
tests (roles/run_tests) of an RDMA port's counters, from a sysfs tree planted where no real port is, and the
verdict on their change. The port's link_downed grows during the tests (fault_plain_link_downed: the launch
adds 1, as a link that went down under traffic would): error_counters FAILs naming the port.

The tree sits on the cluster's shared folder (/srv/pav-shared on every sim host), which a test can write.
Only the payload's facts read looks at it (torch_payload_infiniband_sysfs): the host's NCCL environment
(preflight's own read of the RDMA ports) stays as it was, so host 0 is left as found."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pav.catalog import PLANTED_SYSFS
from tests.faults.conftest import Configured, Sandbox

pytestmark = pytest.mark.slow

COUNTERS = ("symbol_error", "link_downed", "link_error_recovery", "port_rcv_errors",
            "excessive_buffer_overrun_errors")  # fmt: skip


def plant_port(root: Path) -> None:
    """An InfiniBand HCA with one active NDR port, as sysfs lays it out (tests/payload/test_gpu_state_facts.py
    reads the same layout)."""
    hca = root / "infiniband" / "mlx5_0"
    port = hca / "ports" / "1"
    (port / "counters").mkdir(parents=True)
    (hca / "fw_ver").write_text("28.39.1002\n")
    (port / "state").write_text("4: ACTIVE\n")
    (port / "rate").write_text("400 Gb/sec (4X NDR)\n")
    (port / "link_layer").write_text("InfiniBand\n")
    for name in COUNTERS:
        (port / "counters" / name).write_text("0\n")


def test_a_port_whose_link_went_down_during_the_tests_fails_naming_it(
    configured: Configured, sandbox: Sandbox
) -> None:
    shared = configured.box.state / "sim" / "shared"
    planted = shared / PLANTED_SYSFS.removeprefix("/srv/pav-shared/")
    plant_port(planted)
    try:
        run = sandbox.cli(
            "--inventory", str(configured.inventory(0)),
            "--stages", "configure,validate,collect,report,teardown", "--tests", "fault_plain_link_downed",
            "-e", f"torch_payload_infiniband_sysfs={PLANTED_SYSFS}/infiniband",
        )  # fmt: skip
    finally:
        link_downed = (planted / "infiniband/mlx5_0/ports/1/counters/link_downed").read_text()
        shutil.rmtree(planted)
    assert link_downed.strip() == "1"  # the launch did count it
    assert run.rc == 1, run.stdout + run.stderr
    results = sandbox.results()
    host = configured.names[0]
    facts = results["hosts"][host]["facts"]
    assert [p["counters"]["link_downed"] for p in facts["gpus"]["rdma"]] == [0]
    assert [p["counters"]["link_downed"] for p in facts["gpus_after"]["rdma"]] == [1]
    tests = {t["name"]: t for t in results["tests"]}
    assert tests["fault_plain_link_downed"]["status"] == "pass"
    counted = tests["error_counters"]
    assert counted["status"] == "fail" and counted["hosts"] == [host], counted
    assert counted["threshold"]["problems"] == [
        {"part": "mlx5_0 port 1", "problem": "mlx5_0 port 1: link_downed +1 during the run (any fails)"}
    ]
    assert results["verdict"] == "FAIL"
    assert "mlx5_0 port 1: link_downed +1 during the run" in run.stdout
