"""The rank that failed first, as its launcher recorded it: torchrun's "Root Cause (first observed failure)"
block, the error file it names and the "Failures:" it lists beside it, mpirun's "The first process to do so
was" and "mpirun noticed" messages, and NCCL's watchdog lines naming the ranks that timed out waiting.

A rank that dies (an exit, a signal) leaves no report of its own to say so, and its peers then fail too,
each with an exception of its own ("Connection reset by peer"): their reports read as the cause, though
they are its victims (issue 64). The launcher saw the order; these records are its word for it. Reading
records what the launcher wrote and judges nothing; evaluate.py names the first failure in the reason.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# torchrun (torch.distributed.elastic's ChildFailedError): the block under "Root Cause (first observed
# failure):", one "  key : value" line each, the traceback's lines after it, up to the closing "=====".
_ROOT = re.compile(r"^Root Cause \(first observed failure\):\s*$")
_FIELD = re.compile(r"^\s+(?P<key>time|host|rank|exitcode|error_file|traceback)\s*:\s?(?P<value>.*)$")
_RANK = re.compile(r"^(?P<rank>\d+)")
_EXITCODE = re.compile(r"^(?P<code>-?\d+)")
_SIGNAL = re.compile(r"^Signal \d+ \((?P<name>SIG[A-Z0-9]+)\)")
_END = re.compile(r"^={20,}\s*$")
_ENTRY = re.compile(r"^\[\d+\]:\s*$")  # "[0]:", heading each rank's entry
# mpirun (Open MPI): the process that exited non-zero first, and one a signal ended.
_MPI_FIRST = re.compile(r"^\s*Process name: \[\[\d+,\d+\],(?P<rank>\d+)\]\s*$")
_MPI_EXIT = re.compile(r"^\s*Exit code:\s+(?P<code>-?\d+)\s*$")
_MPI_SIGNAL = re.compile(
    r"mpirun noticed that process rank (?P<rank>\d+) with PID \d+ on node (?P<host>\S+) "
    r"exited on signal (?P<signal>\d+)"
)
# NCCL's watchdog in the rank that waited: "[Rank 3] Watchdog caught collective operation timeout:
# WorkNCCL(...) ran for 90 milliseconds before timing out" (behind "[PG ID 0 ... Rank 3] Process group
# watchdog thread terminated with exception: " in torch 2.2 on); the watchdog then aborts that rank.
_WATCHDOG = re.compile(r"\[Rank (?P<rank>\d+)\] Watchdog caught collective operation timeout")
SIGNALS = {1: "SIGHUP", 2: "SIGINT", 6: "SIGABRT", 7: "SIGBUS", 9: "SIGKILL", 11: "SIGSEGV", 15: "SIGTERM"}


@dataclass(frozen=True)
class Failure:
    """One rank's failure as its launcher recorded it."""

    rank: int
    host: str  # as the launcher names it: torchrun's hostname, mpirun's node; "" where it did not say
    exitcode: int | None  # None: a signal ended it
    signal: str  # "SIGKILL"; "" where it exited
    time: str  # torchrun's "2026-11-29_06:10:00" (one-second steps); "" where not said
    error: str  # the exception its error file records, "ExcType: message"; "" where none was written
    source: str  # torchrun | mpirun
    # It stopped answering, not exited: its peers timed out waiting for it (torchrun's first failure) and
    # it never finished until a signal ended it. evaluate.py names it so (stopped_answering).
    hung: bool = False

    def what(self) -> str:
        """ "exited with code 3", "was killed by SIGKILL", "exited with code 1: ValueError: bad"."""
        ended = f"was killed by {self.signal}" if self.signal else f"exited with code {self.exitcode}"
        return f"{ended}: {self.error}" if self.error else ended

    def lead(self) -> str:
        """The reason's lead: "rank 1 on sim-x-1 exited with code 3 (the first to fail)"; of a hung rank
        "rank 1 on sim-x-1 stopped answering (the first to fail: ...)"."""
        rank = f"rank {self.rank} on {self.host}" if self.host else f"rank {self.rank}"
        if self.hung:
            return (
                f"{rank} stopped answering (the first to fail: its peers timed out waiting for it; it never "
                f"finished and {self.what()})"
            )
        return f"{rank} {self.what()} (the first to fail)"

    @classmethod
    def from_record(cls, record: Any) -> Failure | None:
        """A record() read back from results.json; None where there is none."""
        if not isinstance(record, dict) or not isinstance(record.get("rank"), int):
            return None
        code = record.get("exitcode")
        return cls(
            rank=record["rank"],
            host=str(record.get("host") or ""),
            exitcode=code if isinstance(code, int) else None,
            signal=str(record.get("signal") or ""),
            time=str(record.get("time") or ""),
            error=str(record.get("error") or ""),
            source=str(record.get("source") or ""),
            hung=record.get("hung") is True,
        )

    def record(self) -> dict[str, Any]:
        """results.json's metrics.first_failure (docs/results.md)."""
        return {"rank": self.rank, "host": self.host, "exitcode": self.exitcode, "signal": self.signal,
                "time": self.time, "error": self.error, "source": self.source, "hung": self.hung}  # fmt: skip


def read(text: str) -> list[Failure]:
    """Every first failure a launcher log records: one per torchrun agent whose output it holds (across
    hosts under Slurm, one log holds each node's), or mpirun's one."""
    return [*torchrun(text), *mpirun(text)]


def torchrun(text: str) -> list[Failure]:
    """Each "Root Cause (first observed failure)" block of torchrun's: an agent reports the first of its own
    node's ranks to fail, so each node of a launch that failed has one."""
    lines = text.splitlines()
    out = []
    for index, line in enumerate(lines):
        if _ROOT.match(line.strip()):
            fields = _fields(lines[index + 1 :])
            if (failure := _torchrun_failure(fields)) is not None:
                out.append(failure)
    return out


def stopped(text: str) -> list[Failure]:
    """The entries of torchrun's "Failures:" lists: the ranks that failed after each agent's first, most
    of them stopped by their agent (SIGTERM, then SIGKILL where SIGTERM did not end them in 30 s)."""
    lines = text.splitlines()
    out = []
    for index, line in enumerate(lines):
        if line.strip() != "Failures:":
            continue
        for at in range(index + 1, len(lines)):
            if _END.match(lines[at]) or lines[at].startswith("-----"):
                break
            if _ENTRY.match(lines[at]) and (found := _torchrun_failure(_fields(lines[at + 1 :]))):
                out.append(found)
    return out


def _fields(lines: list[str]) -> dict[str, str]:
    """The block's "key : value" lines, up to its closing line (the first only: "[0]:" heads it)."""
    fields: dict[str, str] = {}
    for line in lines:
        if _END.match(line) or line.startswith("-----") or (fields and _ENTRY.match(line)):
            break
        if (found := _FIELD.match(line)) and found["key"] not in fields:
            fields[found["key"]] = found["value"].strip()
    return fields


def _torchrun_failure(fields: dict[str, str]) -> Failure | None:
    rank, code = _RANK.match(fields.get("rank", "")), _EXITCODE.match(fields.get("exitcode", ""))
    if rank is None or code is None:
        return None
    exitcode = int(code["code"])
    signal = ""
    if exitcode < 0:  # torchrun's exit code of a signal: its number, negated
        named = _SIGNAL.match(fields.get("traceback", ""))
        signal = named["name"] if named else SIGNALS.get(-exitcode, f"signal {-exitcode}")
    return Failure(
        rank=int(rank["rank"]),
        host=fields.get("host", ""),
        exitcode=None if signal else exitcode,
        signal=signal,
        time=fields.get("time", ""),
        error=error_file(fields.get("error_file", "")),
        source="torchrun",
    )


def error_file(path: str) -> str:
    """The exception torchrun's error file records (torch.distributed.elastic's @record writes it: JSON,
    "message": {"message": "ExcType: text", ...}), "" where there is none ("<N/A>": the rank died before it
    could write one) or it is not on this machine (the rank's host wrote it)."""
    if not path.startswith("/"):
        return ""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return ""
    message = data.get("message") if isinstance(data, dict) else None
    if isinstance(message, dict):
        message = message.get("message")
    return str(message).strip().splitlines()[0] if message else ""


def mpirun(text: str) -> list[Failure]:
    """mpirun's first process to exit non-zero ("Process name: [[JOB,1],RANK]" then "Exit code: N"), else
    the first it noticed a signal end ("... process rank 1 with PID 0 on node HOST exited on signal 9")."""
    lines = text.splitlines()
    for index, line in enumerate(lines):
        if (first := _MPI_FIRST.match(line)) is None:
            continue
        code = next((m for rest in lines[index + 1 : index + 3] if (m := _MPI_EXIT.match(rest))), None)
        if code is not None:
            return [Failure(int(first["rank"]), "", int(code["code"]), "", "", "", "mpirun")]
    for line in lines:
        if (noticed := _MPI_SIGNAL.search(line)) is not None:
            number = int(noticed["signal"])
            signal = SIGNALS.get(number, f"signal {number}")
            return [Failure(int(noticed["rank"]), noticed["host"], None, signal, "", "", "mpirun")]
    return []


def timed_out(text: str) -> set[int]:
    """The ranks whose NCCL watchdog says their collective timed out: they waited on a peer."""
    return {int(found["rank"]) for found in _WATCHDOG.finditer(text)}
