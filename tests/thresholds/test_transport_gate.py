"""NCCL's transport between hosts held to their fabric (thresholds/transport.py), judged as `judge` judges a
recorded run: a real 2-host run (one 4x H200 split into two inventory hosts of 2 GPUs, recorded PASS) whose
inter-node test's launcher.log gets NCCL's INFO lines from a real run elsewhere appended, its hosts' facts
set up for InfiniBand with 8 NDR ports (fixtures/nccl_info/README.md names each excerpt's source)."""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict
from pathlib import Path

import pytest

from pav.commands import gates
from pav.commands.judge import Rejudgement, rejudge
from pav.nccl_transport import read
from pav.reporting import bad_parts
from pav.results import TestResult
from pav.thresholds import transport

RUN = Path(__file__).parent / "fixtures" / "h200x4b-split-2x2-nvlink"
NCCL_INFO = Path(__file__).parents[1] / "nccl_tests" / "fixtures" / "nccl_info"
TEST = "torch_nccl_allreduce_multi"
NDR = [f"mlx5_{i} 1 4: ACTIVE|400 Gb/sec (4X NDR)|InfiniBand" for i in range(8)]
SOCKET_FALLBACK = "nccl941_container_no_ib_socket.txt"  # NET/IB : No device found, Using network Socket
# NCCL 2.28.9 on an H200 without HCAs, two NCCL_HOSTIDs on one machine: the same fallback as a whole log.
TODAYS_SOCKET_FALLBACK = "device_h200_nccl2289_two_hostids_socket.txt"
IB = "nccl1189_ib_gdrdma_cumem.txt"  # via NET/IB/N/GDRDMA between hosts, P2P/CUMEM within
IB_DISABLED = "nccltests188_ib_disabled_socket.txt"  # NCCL_IB_DISABLE set by environment to 1, then Socket


def recorded_run(tmp_path: Path, fabric: str, excerpt: str = "") -> Path:
    """The recorded run with its hosts set up for `fabric`, the excerpt appended to the first host's log."""
    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    results = run / "results.json"
    data = json.loads(results.read_text())
    for host in data["hosts"].values():
        host["facts"]["nccl_env"] = {"fabric": fabric}
        if fabric != "socket":
            host["facts"]["rdma"] = {"ports": NDR, "hcas": [f"mlx5_{i}" for i in range(8)]}
    results.write_text(json.dumps(data))
    if excerpt:
        log = run / "hosts" / "node-a" / "results" / TEST / "launcher.log"
        log.write_text(log.read_text() + (NCCL_INFO / excerpt).read_text())
    return run


def judged(found: Rejudgement, name: str = TEST) -> TestResult:
    return next(r.test for r in found.tests if r.test.name == name)


def transport_gates(test: TestResult) -> list[dict[str, object]]:
    return [g for g in test.threshold.get("gates", []) if g.get("basis") == "transport"]


@pytest.mark.parametrize("excerpt", [SOCKET_FALLBACK, TODAYS_SOCKET_FALLBACK])
def test_sockets_between_infiniband_hosts_fail_naming_the_transport(tmp_path: Path, excerpt: str) -> None:
    found = rejudge(recorded_run(tmp_path, "infiniband", excerpt))
    test = judged(found)
    assert found.verdict == "FAIL" and test.status == "fail"
    assert test.reason == (
        "fabric: NCCL used NET/Socket between the hosts, where they are set up for InfiniBand "
        "(nccl_env_fabric: infiniband): NCCL found no IB device (NET/IB : No device found): check the HCAs "
        "(ibstat), NCCL_IB_HCA, NCCL_IB_DISABLE and, in a container, /dev/infiniband"
    )
    assert test.metrics["nccl_transport"]["net"] == "Socket"
    assert test.metrics["nccl_transport"]["no_ib_device"] is True
    [gate] = transport_gates(test)
    assert (gate["part"], gate["value"], gate["expected"]) == ("fabric", "Socket", "IB")
    assert gate["status"] == "fail"
    # The bad parts lead with the fabric between the two hosts, in the reason's words.
    [part] = bad_parts.find({"tests": [asdict(r.test) for r in found.tests]})
    assert part.hosts == ("node-a", "node-b") and part.part == "fabric"
    assert part.worst.text().startswith("NCCL used NET/Socket between the hosts")
    assert "NCCL did not run over the fabric" in part.worst.cause


def test_infiniband_between_infiniband_hosts_passes(tmp_path: Path) -> None:
    run = recorded_run(tmp_path, "infiniband", IB)
    found = rejudge(run)
    test = judged(found)
    assert found.verdict == "PASS" and test.status == "pass"
    assert test.metrics["nccl_transport"]["net"] == "IB"
    assert test.metrics["nccl_transport"]["intra"] == ["P2P/CUMEM"]
    [gate] = transport_gates(test)
    assert (gate["value"], gate["status"]) == ("IB", "pass")
    # `gates` prints it among the gates judge applies, its bound the network the fabric expects.
    applied = gates.render_applied(gates.applied(run))
    assert f"{'nccl_transport.net':<40} {'= IB':<14} transport: nccl_env_fabric: infiniband" in applied


def test_no_info_lines_pass_with_the_transport_unknown(tmp_path: Path) -> None:
    """As recorded (NCCL_DEBUG=WARN): nothing to judge NCCL's choice by, so it is recorded as unknown."""
    found = rejudge(recorded_run(tmp_path, "infiniband"))
    assert found.verdict == "PASS"
    for name in (TEST, "nccl_tests_all_reduce_multi"):
        test = judged(found, name)
        assert test.status == "pass" and not transport_gates(test)
        assert test.metrics["nccl_transport"]["net"] is None
        [unknown] = [n for n in test.threshold["not_applicable"] if n["metric"] == "nccl_transport.net"]
        assert "NCCL's transport is unknown" in unknown["not_applicable"]


def test_a_socket_fabric_expects_sockets(tmp_path: Path) -> None:
    passed = judged(rejudge(recorded_run(tmp_path / "socket", "socket", SOCKET_FALLBACK)))
    assert passed.status == "pass" and transport_gates(passed)[0]["status"] == "pass"
    failed = judged(rejudge(recorded_run(tmp_path / "ib", "socket", IB)))
    assert failed.status == "fail"
    assert failed.reason == (
        "fabric: NCCL used NET/IB between the hosts, where they are set up for sockets (nccl_env_fabric: "
        "socket): set nccl_env_fabric to the fabric the hosts have (infiniband or roce)"
    )


def test_a_failure_of_the_record_is_judged_again_the_same(tmp_path: Path) -> None:
    """A run recorded with the transport's failure gets it again from its results.json alone (no raw
    results: the recorded metrics and gates), as `judge` re-judges any gate's failure."""
    run = recorded_run(tmp_path, "infiniband", SOCKET_FALLBACK)
    first = rejudge(run)
    results = run / "results.json"
    data = json.loads(results.read_text())
    data["tests"] = [asdict(r.test) for r in first.tests if r.how != "facts"]
    data["verdict"] = first.verdict
    results.write_text(json.dumps(data))
    again = rejudge(results.rename(tmp_path / "results.json"))
    test = judged(again)
    assert next(r.how for r in again.tests if r.test.name == TEST) == "gates"
    assert test.status == "fail" and test.reason == judged(first).reason


def transport_of(excerpt: str) -> dict[str, object]:
    return read([NCCL_INFO / excerpt]).record()


def test_roce_hosts_where_ib_was_disabled_name_the_variable() -> None:
    """A real log where NCCL_IB_DISABLE=1 reached NCCL, on hosts set up for RoCE: the reason says so."""
    test = TestResult(TEST, ["n1", "n2"], "pass", metrics={"nccl_transport": transport_of(IB_DISABLED)})
    transport.judge(test, {"n1": "roce", "n2": "roce"})
    assert (test.status, test.reason) == (
        "fail",
        "fabric: NCCL used NET/Socket between the hosts, where they are set up for RoCE (nccl_env_fabric: "
        "roce): NCCL was told not to use it (NCCL_IB_DISABLE set by environment to 1): unset NCCL_IB_DISABLE "
        "where the launch gets it (nccl_env_extra, the job's environment)",
    )


def test_a_test_that_failed_already_gets_the_cause_after_its_reason() -> None:
    """A timeout over sockets: the timeout stays first, the transport names why it may have run so long."""
    metrics = {"nccl_transport": transport_of(SOCKET_FALLBACK)}
    test = TestResult(TEST, ["n1", "n2"], "fail", "timeout after 900s on n1; killed on the host", metrics)
    transport.judge(test, {"n1": "infiniband", "n2": "infiniband"})
    assert test.status == "fail"
    assert test.reason.startswith(
        "timeout after 900s on n1; killed on the host; fabric: NCCL used NET/Socket"
    )


@pytest.mark.parametrize("fabrics", [{"n1": "infiniband", "n2": "socket"}, {"n1": "infiniband"}])
def test_hosts_whose_fabric_is_unknown_or_differs_are_not_judged(fabrics: dict[str, str]) -> None:
    test = TestResult(TEST, ["n1", "n2"], "pass", metrics={"nccl_transport": transport_of(SOCKET_FALLBACK)})
    transport.judge(test, fabrics)
    assert test.status == "pass" and not transport_gates(test)
    why = "NCCL used NET/Socket; the hosts' fabric (facts.nccl_env.fabric) is unknown or differs"
    expected = {"metric": "nccl_transport.net", "not_applicable": why}
    assert test.threshold["not_applicable"] == [expected]
