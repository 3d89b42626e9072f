"""Runs one subcommand body so that every rank always leaves a report and a meaningful exit code."""

import argparse
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from pav_payload.env import RankInfo
from pav_payload.report import UNFINISHED, Report, write_report
from pav_payload.session import Session
from pav_payload.terminate import sigterm_raises

EXIT_CODES = {"pass": 0, "fail": 1, "error": 2}


@dataclass
class Outcome:
    status: str  # "pass" or "fail"; errors are exceptions
    reason: str = ""
    metrics: dict[str, Any] = field(default_factory=dict)


Body = Callable[[argparse.Namespace, Session], Outcome]


def run(kind: str, args: argparse.Namespace, body: Body) -> int:
    """One test in a launch of its own: the process group lives and ends with it."""
    session = Session(RankInfo.from_env())
    report = run_in(session, kind, args, body)
    code = session.close(report.status != "error", EXIT_CODES[report.status])
    log_outcome(report, code)
    return code


def run_in(session: Session, kind: str, args: argparse.Namespace, body: Body) -> Report:
    """Run a body in a session that may outlive it (a suite); the report is on disk when this returns."""
    out_dir = Path(args.out)
    report = Report.begin(args.test_id, kind, session.info, _params(args), torch.__version__)
    # Written first so that a rank that dies without a Python exception still leaves an "error" behind.
    report.reason = UNFINISHED
    write_report(report, out_dir)
    try:
        with sigterm_raises():
            outcome = body(args, session)
        report.finish(outcome.status, outcome.reason, outcome.metrics)
    except BaseException as exc:  # even KeyboardInterrupt or SystemExit must leave a report
        traceback.print_exc()
        report.finish("error", f"{type(exc).__name__}: {exc}", {})
    if session.device_info is not None:
        report.set_device(session.device_info)
    write_report(report, out_dir)
    return report


def _params(args: argparse.Namespace) -> dict[str, Any]:
    return {key: value for key, value in vars(args).items() if not callable(value)}


def log_outcome(report: Report, code: int) -> None:
    detail = f": {report.reason}" if report.reason else ""
    if code != EXIT_CODES[report.status]:
        detail += f" (exits {code}: another rank failed)"
    print(f"pav_payload {report.test_id} rank {report.rank}: {report.status}{detail}", file=sys.stderr)
