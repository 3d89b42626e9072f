"""FOR TESTING ONLY: ``python -m pav_payload.plain --nproc N [options] --out DIR --test-id NAME``, a launch
whose ranks are plain Python processes. Nothing here imports torch: the fault tests of a run's lifecycle (a
launch that hangs, a host that dies under it, a signal, a killed driver, secrets, kept hosts) run through
the run's real launch on real hosts without paying torch's start-up (1-3 CPU-s a rank and a torchrun agent)
where torch is not what they test (issue 49). Tests of torch itself keep torchrun.

What those tests lean on in a torchrun launch, this launch does the same way:

- This process is the agent: it starts --nproc ranks (``--as-rank``), each in a session of its own, with
  torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT).
  `timeout` does not reach them there: only the launch's PAV_LAUNCH cleanup (roles/run_tests) does.
- When a rank exits non-zero the agent SIGTERMs the others; a SIGTERM to the agent goes on to every rank;
  either way what is left after 30 s (torchrun's grace) is SIGKILLed. It exits 0 when every rank exited 0,
  else 1.
- Each rank writes ``<out>/<test-id>.rank<R>.json`` (pav_payload.report's schema, ``kind`` plain, no torch or
  device) as it starts, with the "did not finish" reason, and again when it ends; a SIGTERM ends it `error`.
- The ranks of every node meet in one collective: each sends a vector to node 0's agent (on --master, or on
  a free loopback port when there is one node), which answers every rank with the elementwise sum once all
  ranks of the world sent theirs; each rank checks that sum (``metrics.wrong``, summed over the ranks into
  ``wrong_total``). A rank that never sends holds all the others in it, as a torch collective does.

Faults: ``--hang R``: rank R ignores SIGTERM and stops before the collective (only SIGKILL ends it);
``--exit R``: rank R exits with code 3 after connecting to the collective, once its node's other ranks have
written their first report; ``--wrong-host NAME``: every rank on the host of that name sends a wrong vector,
so the whole world's sum is wrong, as a bad GPU or link spoils a collective for every rank in it (bad-node
isolation re-runs the launch on subsets of hosts to find it; NAME may be a comma-separated list);
``--step-s S --slow-host NAME``: each rank works S seconds (a sleep) before the collective, and every rank on
the hosts named (comma-separated) works ``--slow-factor`` times as long, a straggler: each rank records its
own step time (``metrics.step_s``, not the collective's wait, which the straggler imposes on every rank of
the world), the figure the driver compares across the hosts of the test (pav.thresholds.fleet);
``--count-errors FILE``: the agent adds 1 to the number in FILE (a counter of a sysfs tree a test planted:
tests/faults/test_error_counters.py), as a link erring under the collective's traffic would. Only the
standard library.
"""

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from contextlib import suppress
from pathlib import Path
from typing import Any

from pav_payload.env import RankInfo
from pav_payload.report import UNFINISHED, Report, write_report
from pav_payload.terminate import sigterm_raises

KIND = "plain"
EXIT_CODES = {"pass": 0, "fail": 1, "error": 2}  # pav_payload.runner's
GRACE_S = 30.0  # torchrun's: between the SIGTERM to its ranks and the SIGKILL of those left
ELEMENTS = 64  # of each rank's vector in the collective
POLL_S = 0.1
EXIT_RC = 3
SLOW_FACTOR = 10.0  # a straggler's step against its peers': far beyond a loaded machine's sleep jitter


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pav_payload.plain", description=__doc__.split("\n\n")[0])
    parser.add_argument("--nproc", type=int, default=1, help="ranks on this node")
    parser.add_argument("--nnodes", type=int, default=1)
    parser.add_argument("--node-rank", type=int, default=0)
    parser.add_argument("--master", default="", help="HOST:PORT of node 0's agent (needed with --nnodes > 1)")
    parser.add_argument("--hang", type=int, default=-1, metavar="RANK", help="this rank hangs, deaf to TERM")
    parser.add_argument("--exit", type=int, default=-1, metavar="RANK", help="this rank exits with code 3")
    parser.add_argument("--wrong-host", default="", metavar="NAME", help="its ranks send wrong values")
    parser.add_argument("--step-s", type=float, default=0.0, help="each rank's work before the collective")
    parser.add_argument("--slow-host", default="", metavar="NAME", help="its ranks' step takes longer")
    parser.add_argument("--slow-factor", type=float, default=SLOW_FACTOR, help="how much longer (default 10)")
    parser.add_argument("--count-errors", default="", metavar="FILE", help="add 1 to the counter in FILE")
    parser.add_argument("--timeout-s", type=float, default=300.0, help="a rank's wait for the collective")
    parser.add_argument("--out", default=".", help="directory for <test-id>.rank<R>.json (default: .)")
    parser.add_argument("--test-id", default=KIND)
    parser.add_argument("--as-rank", action="store_true", help=argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)
    if args.as_rank:
        return run_rank(args)
    if args.nnodes > 1 and not args.master:
        print("pav_payload.plain: --nnodes > 1 needs --master HOST:PORT", file=sys.stderr)
        return 2
    return run_agent(args, argv)


# The agent.


class SumServer:
    """The collective's meeting point, in node 0's agent: the elementwise sum of every rank's vector, sent
    to each rank once the whole world has sent."""

    def __init__(self, host: str, port: int, world: int) -> None:
        self.world = world
        self.sock = socket.create_server((host, port))
        self.port = int(self.sock.getsockname()[1])
        self.lock = threading.Lock()
        self.sent: dict[int, list[int]] = {}
        self.waiting: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            message = json.loads(conn.makefile("r").readline())
            rank, values = int(message["rank"]), [int(v) for v in message["values"]]
        except (OSError, ValueError, KeyError, TypeError):  # a rank that died connected, or a stranger
            conn.close()
            return
        with self.lock:
            self.sent[rank] = values
            self.waiting.append(conn)
            if len(self.sent) < self.world:
                return
            total = [sum(column) for column in zip(*self.sent.values(), strict=False)]
            reply = (json.dumps({"sum": total}) + "\n").encode()
            for waiting in self.waiting:
                with suppress(OSError):  # a rank that left meanwhile
                    waiting.sendall(reply)
                waiting.close()


def run_agent(args: argparse.Namespace, argv: list[str]) -> int:
    world = args.nproc * args.nnodes
    if args.master:
        addr, _, port = args.master.rpartition(":")
        master = (addr, int(port))
        server = SumServer("", master[1], world) if args.node_rank == 0 else None
    else:
        server = SumServer("127.0.0.1", 0, world)
        master = ("127.0.0.1", server.port)
    stopping: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, _frame: stopping.append(signum))
    if args.count_errors:
        counter = Path(args.count_errors)
        counter.write_text(f"{int(counter.read_text()) + 1}\n")
    ranks = [_start_rank(argv, args, local, world, master) for local in range(args.nproc)]
    while True:
        codes = [rank.poll() for rank in ranks]
        if stopping:
            _stop(ranks)
            return 128 + stopping[0]
        if any(code not in (None, 0) for code in codes):
            _stop(ranks)
            return 1
        if all(code == 0 for code in codes):
            return 0
        time.sleep(POLL_S)


def _start_rank(
    argv: list[str], args: argparse.Namespace, local: int, world: int, master: tuple[str, int]
) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "RANK": str(args.node_rank * args.nproc + local),
        "WORLD_SIZE": str(world),
        "LOCAL_RANK": str(local),
        "LOCAL_WORLD_SIZE": str(args.nproc),
        "GROUP_RANK": str(args.node_rank),
        "MASTER_ADDR": master[0],
        "MASTER_PORT": str(master[1]),
    }
    return subprocess.Popen(
        [sys.executable, "-m", "pav_payload.plain", *argv, "--as-rank"], env=env, start_new_session=True
    )


def _stop(ranks: list[subprocess.Popen[bytes]]) -> None:
    """torchrun's way: SIGTERM every rank still running, SIGKILL what is left after the grace."""
    for rank in ranks:
        if rank.poll() is None:
            rank.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + GRACE_S
    while any(rank.poll() is None for rank in ranks) and time.monotonic() < deadline:
        time.sleep(POLL_S)
    for rank in ranks:
        if rank.poll() is None:
            rank.kill()
            rank.wait()


# A rank.


def run_rank(args: argparse.Namespace) -> int:
    info = RankInfo.from_env()
    params = {k: v for k, v in vars(args).items() if k != "as_rank"}
    report = Report.begin(args.test_id, KIND, info, params, torch_version=None)  # no torch, no device
    report.reason = UNFINISHED
    try:
        with sigterm_raises():
            # Written first so that a rank that dies without a Python exception still leaves an "error"
            # behind; under the SIGTERM handler, so a rank whose report exists reports a SIGTERM too.
            write_report(report, Path(args.out))
            status, reason, metrics = _collective(args, info)
    except BaseException as exc:  # even KeyboardInterrupt or SystemExit must leave a report
        status, reason, metrics = "error", f"{type(exc).__name__}: {exc}", {}
    report.finish(status, reason, metrics)
    write_report(report, Path(args.out))
    detail = f": {reason}" if reason else ""
    print(f"pav_payload.plain {args.test_id} rank {info.rank}: {status}{detail}", file=sys.stderr, flush=True)
    return EXIT_CODES[status]


def _collective(args: argparse.Namespace, info: RankInfo) -> tuple[str, str, dict[str, Any]]:
    if args.hang == info.rank:
        _hang()
    conn = _connect(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), args.timeout_s)
    if args.exit == info.rank:
        _await_local_peers(args, info)
        os._exit(EXIT_RC)
    conn.settimeout(args.timeout_s)
    step_s = _step(args)
    started = time.perf_counter()
    values = [info.rank + 1 + i for i in range(ELEMENTS)]
    if socket.gethostname() in _names(args.wrong_host):
        values = [v + 1 for v in values]
    conn.sendall((json.dumps({"rank": info.rank, "values": values}) + "\n").encode())
    line = conn.makefile("r").readline()
    elapsed_us = (time.perf_counter() - started) * 1e6
    conn.close()
    if not line:
        raise ConnectionError("the collective's server closed the connection before the sum")
    total = json.loads(line)["sum"]
    world = info.world_size
    expected = [world * (world + 1) // 2 + world * i for i in range(ELEMENTS)]
    wrong = sum(a != b for a, b in zip(total, expected, strict=False)) + abs(len(total) - len(expected))
    metrics: dict[str, Any] = {"elements": ELEMENTS, "wrong": wrong, "time_us": round(elapsed_us, 1)}
    if args.step_s > 0:
        metrics["step_s"] = round(step_s, 4)
    reason = f"{wrong} of {ELEMENTS} elements of the sum over {world} ranks wrong" if wrong else ""
    return ("fail" if wrong else "pass"), reason, metrics


def _names(given: str) -> set[str]:
    return {name for name in given.split(",") if name}


def _step(args: argparse.Namespace) -> float:
    """The rank's own work before the collective (--step-s, a sleep: deterministic, no CPU taken from the
    other ranks sharing the machine), --slow-factor times as long on a slow host; its measured time."""
    if args.step_s <= 0:
        return 0.0
    factor = args.slow_factor if socket.gethostname() in _names(args.slow_host) else 1.0
    started = time.perf_counter()
    time.sleep(args.step_s * factor)
    return time.perf_counter() - started


def _await_local_peers(args: argparse.Namespace, info: RankInfo) -> None:
    """The node's other ranks have written their first report (so each takes a SIGTERM as its report's
    reason): an exit before they started would kill them silently, a race on a loaded machine."""
    first = info.node_rank * info.local_world_size
    ranks = range(first, first + info.local_world_size)
    peers = [Path(args.out) / f"{args.test_id}.rank{r}.json" for r in ranks]
    deadline = time.monotonic() + args.timeout_s
    while not all(p.exists() for p in peers) and time.monotonic() < deadline:
        time.sleep(0.05)


def _connect(addr: str, port: int, timeout_s: float) -> socket.socket:
    """Node 0's agent may start after this node's ranks: try until the wait's limit."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return socket.create_connection((addr, port), timeout=10)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _hang() -> None:
    """Stop for good, deaf to SIGTERM, as a rank stuck in a driver call is: only SIGKILL ends it."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    while True:
        time.sleep(60)


if __name__ == "__main__":
    sys.exit(main())
