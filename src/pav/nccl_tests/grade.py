"""Grade one parsed nccl-tests log: correctness always, bus bandwidth where a profile sets gates.

A log that cannot prove every row was measured and correct fails: no rows, a crash, a cut-off table,
wrong elements, out-of-bounds values, a missing size. Nothing is skipped silently.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pav.nccl_tests.parse import NcclLog, Row
from pav.thresholds.gate import Gate
from pav.units import size_label

# nccl-tests rounds a size down to whole elements per rank; a gate matches a row this close to it.
_SIZE_TOLERANCE = 1e-3


@dataclass(frozen=True)
class Grade:
    status: str  # "pass" or "fail"; "error" is for logs that could not be read at all
    reason: str


def grade(log: NcclLog, profile_gates: Mapping[str, Sequence[Gate]] | None = None) -> Grade:
    """Correctness first; then the gates the profile sets for this log's collective."""
    problems = correctness_problems(log)
    gates: Sequence[Gate] = ()
    if profile_gates:
        if log.op is None:
            problems.append(
                "cannot tell which collective this log measured, so the profile's gates cannot apply; "
                "keep the binary's name in the file name (e.g. all_reduce_perf.log)"
            )
        else:
            gates = profile_gates.get(log.op, ())
    gate_fails, gate_notes = _gate_results(log, gates)
    problems += gate_fails
    if problems:
        return Grade("fail", "; ".join(problems))
    return Grade("pass", "; ".join([_pass_note(log), *gate_notes]))


def correctness_problems(log: NcclLog) -> list[str]:
    if log.malformed:
        return [f"{log.malformed}: the run crashed or the file is not nccl-tests output"]
    problems: list[str] = []
    if log.crash_lines:
        more = f" (+{len(log.crash_lines) - 1} more)" if len(log.crash_lines) > 1 else ""
        problems.append(f"crashed: {log.crash_lines[0][:200]}{more}")
    if log.headers > 1:
        problems.append(
            f"{log.headers} test headers in one log: each rank ran its own test (nccl-tests built "
            "without MPI=1 but launched by mpirun; rebuild with MPI=1) or several runs were concatenated "
            "(give one log per run)"
        )
    if log.validation == 0:
        problems.append("results were not checked (validation: 0, i.e. -c 0): rerun with -c 1")
    problems += _row_problems(log)
    if log.oob_count:
        problems.append(f"out-of-bounds values: {log.oob_count} FAILED")
    if log.avg_busbw_check == "FAILED":
        problems.append(f"nccl-tests' own NCCL_TESTS_MIN_BW check FAILED (avg busbw {log.avg_busbw_gbps})")
    return problems


def _row_problems(log: NcclLog) -> list[str]:
    if not log.rows:
        trailer = "" if log.finished else " and no '# Avg bus bandwidth' trailer"
        return [f"no result rows{trailer}: the run ended before measuring anything"]
    problems: list[str] = []
    if log.bad_lines:
        problems.append(
            f"{len(log.bad_lines)} result line(s) could not be read (first: {log.bad_lines[0][:100]!r}): "
            "the output was cut off or interleaved with other messages"
        )
    wrong = [r for r in log.rows if r.wrong]
    if wrong:
        first = wrong[0]
        problems.append(
            f"wrong elements in {len(wrong)} of {len(log.rows)} rows "
            f"(first: {size_label(first.size_bytes)} #wrong={first.wrong})"
        )
    if not log.finished:
        last = size_label(log.rows[-1].size_bytes)
        problems.append(
            f"output ends after {len(log.rows)} rows (last {last}) without the '# Avg bus bandwidth' "
            "trailer: the run was cut off or crashed"
        )
    else:
        problems += _missing_sizes(log)
    return problems


def _missing_sizes(log: NcclLog) -> list[str]:
    """Each (type, redop, root) sweep must hold every size from minBytes to maxBytes, once per cycle."""
    expected = _sweep_length(log)
    if not expected:
        return []
    groups = Counter((r.type, r.redop, r.root) for r in log.rows)
    short = [(key, n) for key, n in groups.items() if n % expected]
    if not short:
        return []
    (dtype, redop, _), got = short[0]
    span = f"{size_label(log.min_bytes or 0)}..{size_label(log.max_bytes or 0)}"
    return [f"missing rows: a {span} sweep has {expected} sizes, the {dtype}/{redop} table has {got}"]


def _sweep_length(log: NcclLog) -> int | None:
    low, high = log.min_bytes, log.max_bytes
    if not low or not high or high < low:
        return None
    if log.step_factor and log.step_factor > 1:
        count, size = 0, low
        while size <= high:
            count, size = count + 1, size * log.step_factor
        return count
    if log.step_bytes:
        return (high - low) // log.step_bytes + 1
    return None


def _gate_results(log: NcclLog, gates: Sequence[Gate]) -> tuple[list[str], list[str]]:
    fails: list[str] = []
    notes: list[str] = []
    for gate in gates:
        label = f"{log.op} {size_label(gate.size_bytes)}"
        measured = measured_busbw(log.rows, gate.size_bytes)
        if measured is None:
            sizes = sorted({r.size_bytes for r in log.rows})
            span = f"{size_label(sizes[0])}..{size_label(sizes[-1])}" if sizes else "none"
            fails.append(f"{label}: not measured (the log's sizes: {span}); run with -e at least that size")
        elif measured < (gate.min or 0.0):
            fails.append(
                f"{label}: busbw {measured:.2f} GB/s below the required {(gate.min or 0.0):.2f} GB/s"
            )
        else:
            notes.append(f"{label}: busbw {measured:.2f} >= {(gate.min or 0.0):.2f} GB/s")
    return fails, notes


def measured_busbw(rows: Sequence[Row], size_bytes: int) -> float | None:
    """Out-of-place busbw (in-place where only that exists) at a size; the worst row where several match."""
    near = [row for row in rows if abs(row.size_bytes - size_bytes) <= size_bytes * _SIZE_TOLERANCE]
    values = [bw for row in near if (bw := _busbw(row)) is not None]
    return min(values) if values else None


def _busbw(row: Row) -> float | None:
    for placement in (row.out_of_place, row.in_place):
        if placement is not None and placement.busbw_gbps is not None:
            return placement.busbw_gbps
    return None


def _pass_note(log: NcclLog) -> str:
    checked = "no wrong elements" if any(r.wrong is not None for r in log.rows) else "out-of-bounds check OK"
    note = f"{len(log.rows)} row{'' if len(log.rows) == 1 else 's'}, {checked}"
    if log.nccl_errors:
        note += f"; NCCL's last message: {log.nccl_errors[-1][:120]}"
    return note
