"""Read what nccl-tests' *_perf binaries write: their stdout table (old and new layouts) or their -J JSON.

Parsing records what the log says and never judges it; grade.py decides pass or fail. Formats follow
nccl-tests' own printf/JSON writers (src/common.cu, src/util.cu), from the 2018 layout to JSON version 3.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pav.errors import PavError
from pav.nccl_ops import KNOWN_OPS

# mpirun --tag-output prefixes every line with [job,rank]<stdout>:.
_TAG = re.compile(r"^\[\d+,\d+\]<std(?:out|err)>:")
_ROW_START = re.compile(r"^\s*\d+\s")
_PERF_NAME = re.compile(r"([A-Za-z0-9_]+)_perf")
_VERSION = re.compile(r"#\s*nccl-tests version (\S+)")
_STARTING = re.compile(r"#\s*Collective test starting:\s*(\S+)")
_SWEEP = re.compile(
    r"#\s*nThread\s+(\d+)\s+nGpus\s+(\d+)\s+minBytes\s+(\d+)\s+maxBytes\s+(\d+)\s+step:\s*(\d+)\((factor|bytes)\)"
)
_VALIDATION = re.compile(r"\bvalidation:\s*(\d+)")
_REDUCED_MAX = re.compile(r"#\s*Reducing maxBytes to (\d+)")
_DEVICE = re.compile(
    r"#\s+Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?(?:Pid\s+\d+\s+)?on\s+(\S+)\s+device\s+(\d+)\s+\[[^\]]*\]\s+(.+?)\s*$"
)
_OOB = re.compile(r"#\s*Out of bounds values\s*:\s*(\d+)")
_AVG = re.compile(r"#\s*Avg bus bandwidth\s*:\s*(\S+)\s*(OK|FAILED)?")
_NCCL_ERROR = re.compile(r"#\s*error:\s*(.+)")
# Lines a dying run leaves: nccl-tests' own CUDACHECK/NCCLCHECK/TESTCHECK, timeouts, signals, launchers.
_CRASH = re.compile(
    r"Test (?:NCCL|CUDA) failure|\bNCCL failure\b|\bCuda failure\b|\bTest failure\b|Test timeout"
    r"|Segmentation fault|\bBus error\b|core dumped|exited on signal|terminate called after throwing"
    r"|Invalid number of GPUs",
    re.IGNORECASE,
)
# Without a column header (a pasted fragment) the layout follows from the token count.
_DEFAULT_COLUMNS = {
    13: "size count type redop root time algbw busbw #wrong time algbw busbw #wrong",
    11: "size count type time algbw busbw error time algbw busbw error",
}


@dataclass(frozen=True)
class Placement:
    """One of a row's two measurements, out-of-place or in-place."""

    time_us: float | None
    algbw_gbps: float | None
    busbw_gbps: float | None
    wrong: int | None = None  # #wrong; None where the layout has no such column or prints N/A
    error: float | None = None  # the old layout's max-error column instead of #wrong


@dataclass(frozen=True)
class Row:
    size_bytes: int
    count: int
    type: str
    redop: str | None
    root: int | None
    out_of_place: Placement | None
    in_place: Placement | None

    @property
    def wrong(self) -> int | None:
        placements = (self.out_of_place, self.in_place)
        counts = [p.wrong for p in placements if p is not None and p.wrong is not None]
        return sum(counts) if counts else None


@dataclass(frozen=True)
class Device:
    rank: int
    host: str
    device: int
    name: str


@dataclass
class NcclLog:
    path: str
    format: str  # "text" or "json"
    op: str | None = None
    tests_version: str | None = None
    min_bytes: int | None = None
    max_bytes: int | None = None
    step_bytes: int | None = None
    step_factor: int | None = None
    validation: int | None = None  # -c: 0 means nothing checked the results
    headers: int = 0  # '# nThread' headers: more than one means several runs in one log
    threads: int | None = None  # nThread (-t): threads per process
    gpus_per_thread: int | None = None  # nGpus (-g): GPUs each thread drives
    devices: list[Device] = field(default_factory=list)  # one per rank, in rank order
    rows: list[Row] = field(default_factory=list)
    bad_lines: list[str] = field(default_factory=list)  # result lines that did not parse
    crash_lines: list[str] = field(default_factory=list)
    oob_count: int | None = None
    avg_busbw_gbps: float | None = None
    avg_busbw_check: str | None = None  # OK/FAILED when NCCL_TESTS_MIN_BW was set
    finished: bool = False  # the '# Avg bus bandwidth' trailer (JSON: average_bus_bandwidth) is there
    nccl_errors: list[str] = field(default_factory=list)
    malformed: str = ""  # why a -J file could not be read as JSON

    @property
    def ranks(self) -> int:
        """NCCL ranks: processes x threads x GPUs per thread, as nccl-tests counts them (0: none named).

        One per GPU: the text lists every rank's GPU; a -J report names each process's first GPU only,
        and parse_json lists the process's other GPUs after it (see _process_devices).
        """
        return len(self.devices)


def read_log(path: Path) -> NcclLog:
    try:
        text = path.read_bytes().decode("utf-8", errors="replace")
    except OSError as exc:
        raise PavError(f"cannot read {path}: {exc.strerror or exc}") from None
    if text.lstrip().startswith("{"):
        return parse_json_text(text, str(path))
    return parse_text(text, str(path))


def op_from_name(name: str) -> str | None:
    """The collective a binary or file name carries: all_reduce_perf, nccl_alltoall_perf_mpi, ..."""
    for match in _PERF_NAME.finditer(name):
        stem = match.group(1)
        for op in KNOWN_OPS:
            if stem == op or stem.endswith("_" + op):
                return op
    return None


# --- stdout table -------------------------------------------------------------------------------


def parse_text(text: str, path: str = "") -> NcclLog:
    log = NcclLog(path=path, format="text")
    columns: list[str] | None = None
    for raw in text.splitlines():
        line = _TAG.sub("", raw).rstrip()
        if line.lstrip().startswith("#"):
            header = _comment_line(log, line)
            # Past a run's trailer no more rows belong to its table.
            columns = header if header is not None else (None if log.finished else columns)
        elif _CRASH.search(line):
            log.crash_lines.append(line.strip())
        elif _ROW_START.match(line):
            _row_line(log, line, columns)
    log.op = log.op or op_from_name(text) or op_from_name(Path(path).name)
    return log


def _comment_line(log: NcclLog, line: str) -> list[str] | None:
    """Header, device and trailer lines; returns the column names when the line is the column header."""
    tokens = line.lstrip("#").split()
    if tokens[:3] == ["size", "count", "type"]:
        return tokens
    if m := _VERSION.match(line):
        log.tests_version = m.group(1)
    elif m := _STARTING.match(line):
        log.op = op_from_name(m.group(1)) or log.op
    elif m := _SWEEP.match(line):
        _sweep(log, m)
    elif m := _REDUCED_MAX.match(line):
        log.max_bytes = int(m.group(1))
    elif m := _DEVICE.match(line):
        log.devices.append(Device(int(m.group(1)), m.group(2), int(m.group(3)), m.group(4)))
    elif m := _OOB.match(line):
        log.oob_count = int(m.group(1))
    elif m := _AVG.match(line):
        log.avg_busbw_gbps, log.avg_busbw_check, log.finished = _number(m.group(1)), m.group(2), True
    elif m := _NCCL_ERROR.match(line):
        log.nccl_errors.append(m.group(1).strip())
    return None


def _sweep(log: NcclLog, m: re.Match[str]) -> None:
    log.headers += 1
    log.finished = False  # a second run in the same log must reach its own trailer
    log.threads, log.gpus_per_thread = int(m.group(1)), int(m.group(2))
    log.min_bytes, log.max_bytes = int(m.group(3)), int(m.group(4))
    checks = _VALIDATION.search(m.string)
    log.validation = int(checks.group(1)) if checks else None
    step = int(m.group(5))
    log.step_factor, log.step_bytes = (step, None) if m.group(6) == "factor" else (None, step)


def _row_line(log: NcclLog, line: str, columns: list[str] | None) -> None:
    """Under a column header every numbered line is a row; a line that does not parse is kept as bad."""
    tokens = line.split()
    if columns is None:
        # A fragment without its header: only lines shaped like a known layout count, others are noise.
        guessed = None if log.finished else _guess_columns(tokens)
        row = _row(tokens, guessed) if guessed else None
        if row is not None:
            log.rows.append(row)
        return
    row = _row(tokens, columns)
    if row is None:
        log.bad_lines.append(line.strip())
    else:
        log.rows.append(row)


def _guess_columns(tokens: list[str]) -> list[str] | None:
    if len(tokens) == 12:
        # Old layout with a fourth column: redop (a word) or broadcast's root (a number).
        fourth = "root" if tokens[3].lstrip("-").isdigit() else "redop"
        return f"size count type {fourth} time algbw busbw error time algbw busbw error".split()
    known = _DEFAULT_COLUMNS.get(len(tokens))
    return known.split() if known else None


def _row(tokens: list[str], columns: list[str]) -> Row | None:
    width = len(columns) - ("timestamp" in columns)
    if len(tokens) < width or (len(tokens) > width and "timestamp" not in columns):
        return None
    try:
        fixed, groups = _split(columns, tokens)
        return Row(
            size_bytes=int(fixed["size"]),
            count=int(fixed["count"]),
            type=fixed["type"],
            redop=fixed.get("redop"),
            root=int(fixed["root"]) if "root" in fixed else None,
            out_of_place=groups[0] if groups else None,
            in_place=groups[1] if len(groups) > 1 else None,
        )
    except (KeyError, ValueError):
        return None


def _split(columns: list[str], tokens: list[str]) -> tuple[dict[str, str], list[Placement]]:
    """Fixed columns up to the first time column, then one group per time/cputime column."""
    fixed: dict[str, str] = {}
    groups: list[dict[str, str]] = []
    for name, token in zip(columns, tokens, strict=False):
        if name in ("time", "cputime"):
            groups.append({})
        if groups:
            groups[-1].setdefault(name, token)
        else:
            fixed[name] = token
    return fixed, [_placement(g) for g in groups]


def _placement(values: dict[str, str]) -> Placement:
    wrong = _number(values.get("#wrong", "N/A"))
    return Placement(
        time_us=_number(values.get("time", values.get("cputime", "N/A"))),
        algbw_gbps=_number(values["algbw"]),
        busbw_gbps=_number(values["busbw"]),
        wrong=None if wrong is None else int(wrong),
        error=_number(values.get("error", "N/A")),
    )


def _number(token: Any) -> float | None:
    """A printed number; N/A, nan and inf (a row with no valid measurement) read as None."""
    if token is None or token == "N/A":
        return None
    value = float(token)  # ValueError for anything else marks the row as unreadable
    return value if math.isfinite(value) else None


# --- -J JSON ------------------------------------------------------------------------------------


def parse_json_text(text: str, path: str = "") -> NcclLog:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        # nccl-tests closes the file on exit; a file that does not parse was cut off by a crash.
        log = NcclLog(path=path, format="json", op=op_from_name(Path(path).name))
        where = f"line {exc.lineno} column {exc.colno}"
        log.malformed = f"the -J JSON is cut off or malformed ({exc.msg} at {where})"
        return log
    if not isinstance(data, dict):
        malformed = "not an nccl-tests -J report (its top level is not an object)"
        return NcclLog(path=path, format="json", malformed=malformed)
    return parse_json(data, path)


def parse_json(data: dict[str, Any], path: str = "") -> NcclLog:
    log = NcclLog(path=path, format="json", headers=1)
    args = data.get("args") or []
    log.op = (op_from_name(str(args[0])) if args else None) or op_from_name(Path(path).name)
    _json_config(log, data.get("config") or {})
    for raw in data.get("results") or []:
        row = _json_row(raw) if isinstance(raw, dict) else None
        if row is None:
            log.bad_lines.append(json.dumps(raw)[:200])
        else:
            log.rows.append(row)
    _json_footer(log, data)
    return log


def _json_config(log: NcclLog, config: dict[str, Any]) -> None:
    log.min_bytes, log.max_bytes = _int(config.get("minimum_bytes")), _int(config.get("maximum_bytes"))
    log.step_factor, log.step_bytes = _int(config.get("step_factor")), _int(config.get("step_bytes"))
    log.validation = _int(config.get("validation"))
    log.threads, log.gpus_per_thread = _int(config.get("nthreads")), _int(config.get("ngpus"))
    per_process = max(log.threads or 1, 1) * max(log.gpus_per_thread or 1, 1)
    for dev in config.get("devices") or []:
        if isinstance(dev, dict):
            log.devices += _process_devices(dev, per_process)


def _process_devices(dev: dict[str, Any], per_process: int) -> list[Device]:
    """The ranks of one process of a -J report: `devices` holds one entry per process.

    nccl-tests prints a '#  Rank' line for each of a process's nthreads x ngpus GPUs, but its JSON writer
    parses only the first line of each process's block (parseRankInfo in src/util.cu). That process's
    ranks are rank..rank+per_process-1 on CUDA devices device..device+per_process-1 of its host
    (writeDeviceReport: rank = proc*nThreads*nGpus+i, cudaDev = first+i); the JSON does not name the
    other GPUs' model, so they carry the first GPU's name.
    """
    rank, index = _int(dev.get("rank")) or 0, _int(dev.get("device")) or 0
    host, name = str(dev.get("hostname", "")), str(dev.get("device_info", ""))
    return [Device(rank + i, host, index + i, name) for i in range(per_process)]


def _json_row(raw: dict[str, Any]) -> Row | None:
    try:
        return Row(
            size_bytes=int(raw["size"]),
            count=int(raw["count"]),
            type=str(raw["type"]),
            redop=None if raw.get("redop") is None else str(raw["redop"]),
            root=None if raw.get("root") is None else int(str(raw["root"]).strip()),
            out_of_place=_json_placement(raw.get("out_of_place")),
            in_place=_json_placement(raw.get("in_place")),
        )
    except (KeyError, TypeError, ValueError):
        return None


def _json_placement(raw: Any) -> Placement | None:
    if not isinstance(raw, dict):
        return None  # null: nccl-tests measured only in-place (trace replay)
    wrong = _number(raw.get("nwrong"))
    return Placement(
        time_us=_number(raw.get("time", raw.get("cpu_time"))),
        algbw_gbps=_number(raw.get("alg_bw")),
        busbw_gbps=_number(raw.get("bus_bw")),
        wrong=None if wrong is None else int(wrong),
    )


def _json_footer(log: NcclLog, data: dict[str, Any]) -> None:
    oob = data.get("out_of_bounds")
    if isinstance(oob, dict):
        log.oob_count = _int(oob.get("count"))
    avg = data.get("average_bus_bandwidth")
    if isinstance(avg, dict):
        log.finished = True
        log.avg_busbw_gbps = _number(avg.get("bandwidth"))
        # nccl-tests writes booleans as the strings "true"/"false", and "unchecked" without NCCL_TESTS_MIN_BW.
        log.avg_busbw_check = {"true": "OK", "false": "FAILED"}.get(str(avg.get("okay")).lower())
    # ncclGetLastError() is "" after a clean run, which nccl-tests still writes as one entry.
    log.nccl_errors = [str(e) for e in data.get("errors") or [] if str(e).strip()]


def _int(value: Any) -> int | None:
    try:
        return None if value is None else int(value)
    except (TypeError, ValueError):
        return None
