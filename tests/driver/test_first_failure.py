"""The rank that failed first, from its launcher's own record (issue 64): torchrun's Root Cause block and
mpirun's messages, read from real output of this project's fault tests (fixtures/first_failure/README.md),
and judged so that the reason and the bad part name that rank and its host, not a peer it took down."""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict
from pathlib import Path

from pav import first_failure
from pav.evaluate import RankHosts, evaluate_launch
from pav.launch import Launch
from pav.marking import decide
from pav.reporting import bad_parts
from pav.thresholds.gate import Gate

FIXTURES = Path(__file__).parent / "fixtures" / "first_failure"
GATE = Gate("wrong_total", max=0)


def test_torchruns_root_cause_is_the_rank_that_exited_not_the_one_it_stopped() -> None:
    [found] = first_failure.read((FIXTURES / "torchrun_host" / "launcher.log").read_text())
    assert (found.rank, found.host, found.exitcode, found.signal) == (1, "localhost", 3, "")
    assert (found.time, found.error, found.source) == ("2026-11-29_06:09:08", "", "torchrun")
    assert found.what() == "exited with code 3"


def test_each_torchrun_agent_names_its_own_nodes_first_failure() -> None:
    node0 = first_failure.read((FIXTURES / "torchrun_two_nodes" / "node0" / "launcher.log").read_text())
    node1 = first_failure.read((FIXTURES / "torchrun_two_nodes" / "node1" / "launcher.log").read_text())
    assert [(f.rank, f.exitcode) for f in node0] == [(1, 3)]
    assert [(f.rank, f.exitcode) for f in node1] == [(2, 2)]
    assert node0[0].time == node1[0].time  # one-second steps: the time alone cannot order them


def test_a_signal_is_named_as_torchrun_records_it() -> None:
    text = (FIXTURES / "torchrun_host" / "launcher.log").read_text()
    # The same block as torchrun writes it for a rank a signal ended (its "Failures:" entry for rank 0).
    killed = text.replace("exitcode  : 3 (pid: 17173) ", "exitcode  : -9 (pid: 17173)  (SIGKILL)").replace(
        "traceback : To enable", "traceback : Signal 9 (SIGKILL) received by PID 17173\n  x : To enable"
    )
    [found] = first_failure.read(killed)
    assert (found.rank, found.exitcode, found.signal) == (1, None, "SIGKILL")
    assert found.what() == "was killed by SIGKILL"


def test_torchruns_error_file_gives_the_exception(tmp_path: Path) -> None:
    """A rank under @record writes its exception to the error file torchrun names; where the file is
    readable here (one host, or a shared folder), the reason gives it."""
    error = tmp_path / "error.json"
    error.write_text(json.dumps({"message": {"message": "ValueError: bad size", "extraInfo": {}}}))
    text = (FIXTURES / "torchrun_host" / "launcher.log").read_text()
    [found] = first_failure.read(
        text.replace("error_file: <N/A>\n  traceback : To", f"error_file: {error}\n  traceback : To")
    )
    assert found.error == "ValueError: bad size"
    assert found.what() == "exited with code 3: ValueError: bad size"
    assert first_failure.error_file(str(tmp_path / "gone.json")) == ""


def test_mpiruns_first_process_and_the_signal_it_noticed() -> None:
    [exited] = first_failure.read((FIXTURES / "mpirun" / "exit.log").read_text())
    assert (exited.rank, exited.exitcode, exited.host, exited.source) == (1, 3, "", "mpirun")
    [killed] = first_failure.read((FIXTURES / "mpirun" / "signal.log").read_text())
    assert (killed.rank, killed.host, killed.signal) == (1, "vm", "SIGKILL")
    assert first_failure.read("Primary job  terminated normally, but 1 process returned") == []


def place(run_dir: Path, host: str, capture: Path, test: str) -> None:
    """A capture as collect leaves a host's results: its log, its ranks' reports and torchrun's rc (1)."""
    folder = run_dir / "hosts" / host / "results" / test
    folder.mkdir(parents=True)
    shutil.copy(capture / "launcher.log", folder / "launcher.log")
    for path in capture.glob("*.rank*.json"):  # the report's name: TEST.rankN.json
        shutil.copy(path, folder / f"{test}.{path.name.split('.')[-2]}.json")
    (folder / "launcher.rc").write_text("1\n")


def launch(test: str, scope: str, hosts: tuple[str, ...]) -> Launch:
    return Launch(test, "torchrun", scope, 60, argv_by_host={h: ["x"] for h in hosts},
                  ranks_by_host=dict.fromkeys(hosts, 2), members=list(hosts))  # fmt: skip


def test_a_crash_on_one_host_names_the_rank_that_exited_and_its_victim(tmp_path: Path) -> None:
    """Today's reason was rank 0's "Connection reset by peer": the victim, read as the cause."""
    place(tmp_path, "h0", FIXTURES / "torchrun_host", "t")
    [res] = evaluate_launch(launch("t", "host", ("h0",)), tmp_path, [GATE])
    assert res.status == "error"
    assert res.reason.startswith(
        "rank 1 on h0 exited with code 3 (the first to fail); rank 0 on h0 lost its peer: RuntimeError: "
    ), res.reason
    assert "Connection reset by peer" in res.reason
    first = {"rank": 1, "host": "h0", "exitcode": 3, "signal": "", "time": "2026-11-29_06:09:08", "error": "",
             "source": "torchrun", "hung": False}  # fmt: skip
    assert res.metrics["first_failure"] == first


def test_a_crash_across_hosts_names_the_first_rank_and_its_host_as_the_bad_part(tmp_path: Path) -> None:
    """Two agents each name their own node's first failure at the same second: the rank that died (no
    report of its own) is the cause, not rank 2, which reported its lost peer and exited after it. The bad
    part is rank 1's host alone, named, where it was the two hosts' fabric, unnamed, which no drain marks."""
    place(tmp_path, "sim-x-0", FIXTURES / "torchrun_two_nodes" / "node0", "t")
    place(tmp_path, "sim-x-1", FIXTURES / "torchrun_two_nodes" / "node1", "t")
    [res] = evaluate_launch(launch("t", "cluster", ("sim-x-0", "sim-x-1")), tmp_path, [GATE])
    first = "rank 1 on sim-x-0 exited with code 3 (the first to fail)"
    assert res.reason.startswith(f"{first}; rank "), res.reason
    assert " lost its peer: RuntimeError: " in res.reason
    assert res.metrics["first_failure"]["host"] == "sim-x-0"
    results = {"verdict": "FAIL", "tests": [asdict(res)]}
    [part] = bad_parts.find(results)
    assert (part.hosts, part.kind, part.named) == (("sim-x-0",), "host", True)
    assert part.line().startswith(f"sim-x-0: {first} [t]; likely cause: a rank died first"), part.line()
    # --on-fail drain (and taint) mark that host alone, the reason naming the rank that failed first.
    [mark] = decide.decide({"run_id": "20261129-1", **results}).marks
    assert mark.host == "sim-x-0"
    assert mark.reason == f"pav 20261129-1: host {first} [t]"


def test_a_rank_that_stopped_answering_is_named_not_the_peer_that_timed_out_waiting(tmp_path: Path) -> None:
    """torchrun's first observed failure is rank 0, whose recv timed out: it is the hung rank's victim. Its
    own report says it timed out, and rank 1 never finished until its agent killed it: rank 1 is named."""
    text = (FIXTURES / "torchrun_hang" / "launcher.log").read_text()
    [root] = first_failure.read(text)
    assert (root.rank, root.exitcode) == (0, 2)
    [killed] = first_failure.stopped(text)
    assert (killed.rank, killed.signal, killed.time) == (1, "SIGKILL", "2026-11-29_06:15:34")
    place(tmp_path, "h0", FIXTURES / "torchrun_hang", "t")
    [res] = evaluate_launch(launch("t", "host", ("h0",)), tmp_path, [GATE])
    lead = (
        "rank 1 on h0 stopped answering (the first to fail: its peers timed out waiting for it; it never "
        "finished and was killed by SIGKILL); rank 0 on h0 timed out waiting for it: RuntimeError: "
    )
    assert res.reason.startswith(lead), res.reason
    assert "Timed out waiting 8000ms for recv" in res.reason
    assert (res.metrics["first_failure"]["rank"], res.metrics["first_failure"]["hung"]) == (1, True)
    [part] = bad_parts.find({"verdict": "FAIL", "tests": [asdict(res)]})
    assert "a hang or a straggler" in part.line(), part.line()  # the hang's likely cause, not a crash's


def test_nccls_watchdog_names_the_ranks_that_waited() -> None:
    """NCCL's watchdog line as a CI run printed it (instructlab/training PR 520, torch 2.6): that rank
    timed out waiting, so it is not the one that stopped answering."""
    line = (
        "  what():  [PG ID 0 PG GUID 0(default_pg) Rank 3] Process group watchdog thread terminated with "
        "exception: [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, "
        "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1) ran for 90 milliseconds before timing out."
    )
    assert first_failure.timed_out(f"noise\n{line}\n") == {3}
    assert first_failure.timed_out((FIXTURES / "torchrun_host" / "launcher.log").read_text()) == set()


def test_under_slurm_one_log_holds_both_nodes_records_and_each_rank_its_own_host(tmp_path: Path) -> None:
    """fault_rank_exit_multi as a Slurm job (tests/sim/test_slurm.py's run): srun's one output holds each
    node's torchrun, so both agents' Root Cause blocks, and every report lands in the submitting host's
    (shared) folder. The first is rank 1, which died; each rank's host is the one its report names."""
    capture = FIXTURES / "slurm_two_nodes"
    found = first_failure.read((capture / "launcher.log").read_text())
    assert [(f.rank, f.host, f.exitcode) for f in found] == [(3, "sim-k762k-1", 2), (1, "sim-k762k-0", 3)]
    place(tmp_path, "sim-k762k-0", capture, "t")
    nodes = ("sim-k762k-0", "sim-k762k-1")
    slurm = Launch("t", "torchrun", "cluster", 60, argv_by_host={nodes[0]: ["x"]},
                   ranks_by_host={nodes[0]: 4}, members=list(nodes))  # fmt: skip
    [res] = evaluate_launch(slurm, tmp_path, [GATE])
    assert res.reason.startswith("rank 1 on sim-k762k-0 exited with code 3 (the first to fail); rank "), (
        res.reason
    )
    reports = [json.loads(p.read_text()) for p in capture.glob("*.rank*.json")]
    where = RankHosts({nodes[0]: reports}, nodes)
    assert [where.host_of(rank) for rank in range(4)] == [nodes[0], nodes[0], nodes[1], nodes[1]]


def test_torchruns_root_cause_of_one_poll_is_its_lowest_rank_not_the_first_to_die(tmp_path: Path) -> None:
    """fault_rank_exit on one host (tests/sim/test_slurm.py's recheck run): rank 1 exited and rank 0, which
    lost it, ended within the same poll of torchrun's, which then calls rank 0 the root cause and lists rank
    1 under "Failures:". Rank 1, whose report never finished and whose exit code is its own, is named."""
    capture = FIXTURES / "torchrun_same_poll"
    text = (capture / "launcher.log").read_text()
    assert [(f.rank, f.exitcode) for f in first_failure.read(text)] == [(0, 2)]
    assert [(f.rank, f.exitcode) for f in first_failure.stopped(text)] == [(1, 3)]
    place(tmp_path, "sim-k762k-0", capture, "t")
    [res] = evaluate_launch(launch("t", "host", ("sim-k762k-0",)), tmp_path, [GATE])
    lead = (
        "rank 1 on sim-k762k-0 exited with code 3 (the first to fail); rank 0 on sim-k762k-0 lost its peer: "
    )
    assert res.reason.startswith(lead), res.reason


def test_a_check_that_fails_on_every_rank_is_judged_from_the_reports_not_the_launcher(tmp_path: Path) -> None:
    """Wrong bytes on rank 1: both ranks finish their reports and exit 1 together, which torchrun lists as
    failures; no rank died, so the reports say what failed: a `fail` naming rank 1, no crash."""
    capture = FIXTURES / "torchrun_wrong"
    assert first_failure.read((capture / "launcher.log").read_text())  # torchrun's block is there
    place(tmp_path, "h0", capture, "t")
    [res] = evaluate_launch(launch("t", "host", ("h0",)), tmp_path, [GATE])
    assert (res.status, res.reason) == (
        "fail",
        "rank 1: wrong results in 1 of 1 checks: all_reduce 1024B (1 wrong)",
    )
    assert "first_failure" not in res.metrics


def mpi_launch() -> Launch:
    """mpi_allreduce across 2 hosts: mpirun from the first, rank 0 writes the one report."""
    return Launch("t", "mpirun", "cluster", 60, argv_by_host={"h0": ["x"]}, ranks_by_host={"h0": 1},
                  members=["h0", "h1"])  # fmt: skip


def mpi_report(status: str, reason: str) -> dict[str, object]:
    """pav_mpi_allreduce's report (roles/mpi/files): no `ended`; "error", "did not finish" until it ends."""
    return {"kind": "mpi", "rank": 0, "world_size": 4, "hostname": "h0", "status": status, "reason": reason,
            "metrics": {"world_size": 4, "hosts": ["h0", "h1"], "wrong_total": 3}}  # fmt: skip


def write_mpi(run_dir: Path, log: str, report: dict[str, object]) -> None:
    folder = run_dir / "hosts" / "h0" / "results" / "t"
    folder.mkdir(parents=True)
    shutil.copy(FIXTURES / "mpirun" / log, folder / "launcher.log")
    (folder / "t.rank0.json").write_text(json.dumps(report))
    (folder / "launcher.rc").write_text("1\n")


def test_mpiruns_first_process_names_a_rank_that_died_not_a_check_every_rank_failed(tmp_path: Path) -> None:
    """Rank 1 exited with code 3 and rank 0's report never finished: mpirun's record names rank 1. Wrong
    bytes instead: rank 0 finished its report (fail) and every rank exits 1, mpirun naming rank 0 first: the
    report says what failed."""
    write_mpi(tmp_path / "died", "exit.log", mpi_report("error", "did not finish"))
    [res] = evaluate_launch(mpi_launch(), tmp_path / "died", [GATE])
    # mpirun names no host for an exit: the reason claims none, and the bad part stays the hosts' fabric.
    assert (
        res.reason
        == "rank 1 exited with code 3 (the first to fail); rank 0 on h0 lost its peer: did not finish"
    )
    assert (res.metrics["first_failure"]["source"], res.metrics["first_failure"]["host"]) == ("mpirun", "")
    [part] = bad_parts.find({"verdict": "FAIL", "tests": [asdict(res)]})
    assert (part.hosts, part.kind, part.named) == (("h0", "h1"), "fabric", False)
    write_mpi(tmp_path / "wrong", "all_exit_1.log", mpi_report("fail", "3 wrong elements"))
    [res] = evaluate_launch(mpi_launch(), tmp_path / "wrong", [GATE])
    assert (res.status, res.reason) == ("fail", "rank 0: 3 wrong elements")
