"""FOR TESTING ONLY: pav_payload.plain, the torch-free launch the lifecycle faults run (tests/faults), for
real: its agent, ranks in sessions of their own, the reports they leave, the collective across nodes, and
that nothing of it imports torch (a torch that raises when imported stands first on the path)."""

from __future__ import annotations

import ast
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from pav_payload.plain import ELEMENTS, UNFINISHED, SumServer

from tests.conftest import PAYLOAD


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    blocker = tmp_path / "no-torch" / "torch"
    blocker.mkdir(parents=True, exist_ok=True)
    (blocker / "__init__.py").write_text("raise ImportError('pav_payload.plain imported torch')\n")
    path = [str(blocker.parent), str(PAYLOAD), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, path)), "PYTHONSAFEPATH": "1", **extra}


def agent(tmp_path: Path, *args: str, group: int = -1, **env: str) -> subprocess.Popen[str]:
    """The agent, its output (and its ranks') in a file: a hung rank would hold a pipe open for good."""
    argv = [sys.executable, "-m", "pav_payload.plain", *args, "--out", "results/t", "--test-id", "t"]
    with (tmp_path / "agent.log").open("a") as log:
        return subprocess.Popen(
            argv,
            cwd=tmp_path,
            env=_env(tmp_path, **env),
            text=True,
            stdout=log,
            stderr=log,
            process_group=group,
        )


def ended(proc: subprocess.Popen[str], tmp_path: Path) -> str:
    proc.wait(timeout=60)
    return (tmp_path / "agent.log").read_text()


def reports(tmp_path: Path) -> dict[int, dict[str, Any]]:
    found = [json.loads(p.read_text()) for p in (tmp_path / "results" / "t").glob("t.rank*.json")]
    return {r["rank"]: r for r in found}


def marked(value: str) -> list[int]:
    """Live processes whose environment holds value (a launch's PAV_LAUNCH marker)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if not proc.name.isdigit() or value.encode() not in (proc / "environ").read_bytes().split(b"\0"):
                continue
            if (proc / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                found.append(int(proc.name))
        except (OSError, IndexError):
            continue
    return found


def test_ranks_sum_their_vectors_and_report_pass_without_torch(tmp_path: Path) -> None:
    proc = agent(tmp_path, "--nproc", "2")
    err = ended(proc, tmp_path)
    assert proc.returncode == 0, err
    got = reports(tmp_path)
    assert sorted(got) == [0, 1]
    for rank, report in got.items():
        assert (report["status"], report["reason"], report["kind"]) == ("pass", "", "plain"), report
        assert report["metrics"]["wrong"] == 0 and report["metrics"]["elements"] == ELEMENTS
        assert (report["world_size"], report["local_rank"], report["torch_version"]) == (2, rank, None)
        assert report["ended"]


def test_a_report_has_every_field_of_the_payloads_report(tmp_path: Path) -> None:
    """The driver reads both alike: the keys of pav_payload.report.Report (read from its source, so this
    test imports no torch)."""
    tree = ast.parse((PAYLOAD / "pav_payload" / "report.py").read_text())
    report = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Report")
    fields = {
        n.target.id for n in report.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
    }
    proc = agent(tmp_path, "--nproc", "1")
    ended(proc, tmp_path)
    assert set(reports(tmp_path)[0]) == fields


def test_a_wrong_sum_fails_the_rank(tmp_path: Path) -> None:
    """The check is not vacuous: rank 1 is this test, sending zeros; rank 0 gets its own vector back."""
    server = SumServer("127.0.0.1", 0, 2)
    env = {"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(server.port)}
    rank0 = agent(tmp_path, "--nproc", "2", "--as-rank", **env)
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as conn:
        conn.sendall((json.dumps({"rank": 1, "values": [0] * ELEMENTS}) + "\n").encode())
        conn.makefile("r").readline()
    err = ended(rank0, tmp_path)
    assert rank0.returncode == 1, err
    report = reports(tmp_path)[0]
    assert report["status"] == "fail" and report["metrics"]["wrong"] == ELEMENTS
    assert report["reason"] == f"{ELEMENTS} of {ELEMENTS} elements of the sum over 2 ranks wrong"


def test_a_hung_rank_outlives_the_agent_in_a_session_of_its_own(tmp_path: Path) -> None:
    """As torchrun's: `timeout` SIGTERMs the agent's process group, the agent passes it on, and SIGKILLs
    the group later; the hung rank is deaf to SIGTERM and in another session, so only its launch marker finds
    it (roles/run_tests kills what carries it)."""
    marker = f"PAV_LAUNCH=test/{tmp_path.name}/t"
    # A process group of its own, as timeout makes for what it runs (a session is what the ranks make).
    proc = agent(tmp_path, "--nproc", "2", "--hang", "1", group=0, PAV_LAUNCH=marker.split("=", 1)[1])
    deadline = time.monotonic() + 60
    while len(reports(tmp_path)) < 2 and time.monotonic() < deadline:  # both ranks up, rank 1 in its hang
        time.sleep(0.1)
    time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGTERM)
    time.sleep(2)
    os.killpg(proc.pid, signal.SIGKILL)
    ended(proc, tmp_path)
    left = marked(marker)
    try:
        assert len(left) == 1, left  # the hung rank: its peer ended on the SIGTERM, the agent by SIGKILL
        stat = Path(f"/proc/{left[0]}/stat").read_text().rsplit(")", 1)[1].split()
        assert int(stat[3]) == left[0]  # its session's leader: out of the reach of its agent's group
    finally:
        for pid in left:
            os.kill(pid, signal.SIGKILL)
    got = reports(tmp_path)
    assert (got[1]["status"], got[1]["reason"]) == ("error", UNFINISHED)  # killed before it ended
    assert (got[0]["status"], got[0]["reason"]) == ("error", "Terminated: received SIGTERM")


def test_a_rank_that_exits_ends_the_others_and_the_agent_fails(tmp_path: Path) -> None:
    proc = agent(tmp_path, "--nproc", "2", "--exit", "1")
    err = ended(proc, tmp_path)
    assert proc.returncode == 1, err
    got = reports(tmp_path)
    assert (got[1]["status"], got[1]["reason"], got[1]["ended"]) == ("error", UNFINISHED, None)
    assert (got[0]["status"], got[0]["reason"]) == ("error", "Terminated: received SIGTERM")


def test_ranks_on_the_wrong_host_spoil_the_sum_for_every_rank(tmp_path: Path) -> None:
    """--wrong-host names this machine: both ranks send wrong vectors and both fail, as a bad GPU spoils a
    collective for the whole world (bad-node isolation, tests/faults/test_bad_node.py)."""
    proc = agent(tmp_path, "--nproc", "2", "--wrong-host", socket.gethostname())
    err = ended(proc, tmp_path)
    assert proc.returncode == 1, err
    got = reports(tmp_path)
    assert {r: (g["status"], g["metrics"]["wrong"]) for r, g in got.items()} == {
        0: ("fail", ELEMENTS), 1: ("fail", ELEMENTS),
    }  # fmt: skip


def test_another_hosts_name_leaves_the_sum_right(tmp_path: Path) -> None:
    proc = agent(tmp_path, "--nproc", "2", "--wrong-host", socket.gethostname() + "-not")
    err = ended(proc, tmp_path)
    assert proc.returncode == 0, err
    assert {g["status"] for g in reports(tmp_path).values()} == {"pass"}


def test_two_nodes_meet_in_one_collective(tmp_path: Path) -> None:
    """Node 1 starts first and waits for node 0's agent; the ranks are numbered across nodes."""
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    world = ("--nproc", "2", "--nnodes", "2", "--master", f"127.0.0.1:{port}")
    node1 = agent(tmp_path, *world, "--node-rank", "1")
    time.sleep(1)
    node0 = agent(tmp_path, *world, "--node-rank", "0")
    for proc in (node0, node1):
        err = ended(proc, tmp_path)
        assert proc.returncode == 0, err
    got = reports(tmp_path)
    assert sorted(got) == [0, 1, 2, 3]
    assert {r: (g["node_rank"], g["local_rank"], g["world_size"]) for r, g in got.items()} == {
        0: (0, 0, 4), 1: (0, 1, 4), 2: (1, 0, 4), 3: (1, 1, 4),
    }  # fmt: skip
    assert all(g["status"] == "pass" for g in got.values())


def test_a_slow_host_s_ranks_take_their_step_10_times_as_long(tmp_path: Path) -> None:
    """--slow-host names this machine, or another: each rank records its own step, the figure the driver
    holds each host to against the others (a straggler, pav.thresholds.fleet)."""
    steps = {}
    for slow in (socket.gethostname(), f"not-{socket.gethostname()}"):
        out = tmp_path / slow
        out.mkdir()
        proc = agent(out, "--nproc", "1", "--step-s", "0.05", "--slow-host", f"x,{slow}")
        err = ended(proc, out)
        assert proc.returncode == 0, err
        steps[slow] = reports(out)[0]["metrics"]["step_s"]
    assert steps[socket.gethostname()] >= 0.5 > steps[f"not-{socket.gethostname()}"] >= 0.05
