"""``python -m pav_payload suite --plan-json JSON``, under torchrun: several tests of one world shape in
one launch, so torchrun, the torch import, CUDA and the process group start once instead of per test.

Each test still writes its own rank reports (``--out`` of its own args) as it would alone. Local rank 0 of
node 0 marks where each test begins and ends, for pav_payload.suite_launch, which watches them: it gives
each test its own timeout, log and exit code, and starts the suite again after a test that hangs or kills
its ranks, from the test after it.

A test ending in ``error`` on a rank (an exception: its peers may be stuck in a collective) ends this
process with that rank's code, as a launch of its own would; ``pass`` and ``fail`` go on to the next test.
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from pav_payload.env import RankInfo
from pav_payload.runner import EXIT_CODES, log_outcome, run_in
from pav_payload.session import Session
from pav_payload.suite_launch import BEGIN, DONE, MARK

GATE_POLL_S = 0.05


def run_suite(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    tests: list[dict[str, Any]] = json.loads(args.plan_json)
    if args.gate:
        # Started early, beside another suite's tests: imports are done; CUDA waits for this suite's turn.
        while not Path(args.gate).exists():
            time.sleep(GATE_POLL_S)
    session = Session(RankInfo.from_env())
    marker = session.info.rank == 0
    for test in tests:
        test_args = parser.parse_args(test["args"])
        resolve = getattr(test_args, "resolve", None)
        if resolve is not None:
            resolve(test_args)
        out = Path(test_args.out)
        if marker:
            out.mkdir(parents=True, exist_ok=True)
            # One write: a pipe keeps it whole, where print's two writes may be split by another rank's line.
            sys.stdout.flush()
            os.write(sys.stdout.fileno(), f"{MARK}{test['test']}\n".encode())
            (out / BEGIN).write_text(f"{time.time()}\n")
        report = run_in(session, test_args.kind, test_args, test_args.handler)
        code = EXIT_CODES[report.status]
        if report.status == "error":
            log_outcome(report, code)
            return session.close(False, code)
        code = session.agree(code)
        log_outcome(report, code)
        if marker:
            (out / DONE).write_text(f"{code} {time.time()}\n")
    return session.close(True, 0)


def add_parser(commands: Any) -> None:
    suite = commands.add_parser("suite", help="several tests of one world shape in one launch (JSON plan)")
    suite.add_argument(
        "--plan-json",
        required=True,
        help='[{"test": NAME, "args": [SUBCOMMAND, ...]}, ...]: each test as its own launch would run it',
    )
    suite.add_argument("--gate", default="", help="wait for this file to exist before the first test")
    suite.set_defaults(suite=run_suite)
