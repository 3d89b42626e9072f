"""check-nccl LOG... [--profile NAME] [--json]: grade nccl-tests outputs (stdout logs or -J JSON files).

Exit 0 when every log passes, 1 when any fails, 2 when a file cannot be read or the profile is bad.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pav.errors import PavError
from pav.nccl_tests import record
from pav.nccl_tests.grade import Grade, grade
from pav.nccl_tests.parse import Device, NcclLog, Placement, Row, read_log
from pav.thresholds.gate import Gate
from pav.thresholds.profiles import auto_profile, known_profiles, load_gates, profile_path
from pav.units import size_label

EXIT_PASS, EXIT_FAIL, EXIT_UNREADABLE = 0, 1, 2
# Bus bandwidth (GB/s) is the number people compare with NVLink and NIC line rates, so the table shows it.
_TABLE = "   {:>6}  {:<8} {:<6} {:>10} {:>10} {:>8}"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("logs", nargs="+", type=Path, metavar="LOG", help="nccl-tests stdout log or -J JSON")
    parser.add_argument(
        "--profile", metavar="NAME", help="also gate bus bandwidth: thresholds/NAME.yml's nccl_tests section"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON list (docs/check-nccl.md)")


def run(args: argparse.Namespace) -> int:
    try:
        if args.profile and args.profile != "auto":
            profile_path(args.profile, asked_by="--profile")
        # One load per profile, however many logs it grades (auto may pick another per log).
        gates_of = functools.cache(load_gates)
        results = [_check(path, args.profile, gates_of) for path in args.logs]
    except PavError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    records = [record(str(path), log, result) for path, log, result, _ in results]
    if args.json:
        print(json.dumps(records, indent=2))
    else:
        for (path, log, result, picked), rec in zip(results, records, strict=True):
            if picked:
                print(f"{path}: profile auto picked {picked}")
            if log is not None:
                print(render(rec, log, result))
    return _exit(records)


def _check(
    path: Path, profile: str | None, gates_of: Callable[[str], Mapping[str, Sequence[Gate]]]
) -> tuple[Path, NcclLog | None, Grade, str]:
    """The log graded by the profile's gates; with `auto`, the profile its GPUs pick, which is returned."""
    try:
        log = read_log(path)
    except PavError as exc:
        return path, None, Grade("error", str(exc)), ""
    picked = auto_for_log(log) if profile == "auto" else ""
    name = picked or profile
    gates = gates_of(name) if name else {}
    return path, log, grade(log, gates), picked


def auto_for_log(log: NcclLog) -> str:
    """What `auto` picks from the GPUs the log names (its '#  Rank ... device' lines, or -J's devices)."""
    if not log.devices:
        known = ", ".join(known_profiles())
        raise PavError(
            f"{log.path}: --profile auto picks by the GPUs a log names, and this one names none; "
            f"give the profile instead (known: {known})"
        )
    per_host: dict[str, list[Device]] = {}
    for device in log.devices:
        per_host.setdefault(device.host, []).append(device)
    facts = [
        {"gpu": {"count": len(devs), "devices": [[d.device, d.name] for d in devs]}}
        for devs in per_host.values()
    ]
    return auto_profile(facts)


def _exit(records: list[dict[str, Any]]) -> int:
    unreadable = [r for r in records if r["status"] == "error"]
    if unreadable:
        more = f" (and {len(unreadable) - 1} more unreadable)" if len(unreadable) > 1 else ""
        print(f"error: {unreadable[0]['reason']}{more}; check the path", file=sys.stderr)
        return EXIT_UNREADABLE
    return EXIT_FAIL if any(r["status"] != "pass" for r in records) else EXIT_PASS


def render(rec: dict[str, Any], log: NcclLog, result: Grade) -> str:
    hosts = {d.host for d in log.devices}
    where = f", {_count(len(log.devices), 'rank')} on {_count(len(hosts), 'host')}" if log.devices else ""
    lines = [
        f"== {rec['file']}",
        f"   {log.op or 'unknown collective'}{where}: {result.status.upper()}",
        f"   {result.reason}",
    ]
    if log.rows:
        lines.append(_TABLE.format("size", "type", "redop", "oop busbw", "ip busbw", "#wrong"))
        lines += [_row_line(row) for row in log.rows]
    if log.avg_busbw_gbps is not None:
        lines.append(f"   avg busbw {log.avg_busbw_gbps:g} GB/s")
    return "\n".join(lines) + "\n"


def _row_line(row: Row) -> str:
    wrong = "-" if row.wrong is None else str(row.wrong)
    oop, ip = _bw(row.out_of_place), _bw(row.in_place)
    return _TABLE.format(size_label(row.size_bytes), row.type, row.redop or "-", oop, ip, wrong)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _bw(placement: Placement | None) -> str:
    if placement is None or placement.busbw_gbps is None:
        return "-"
    return f"{placement.busbw_gbps:.2f}"
