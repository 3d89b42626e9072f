"""nccl-tests results: parse a log (parse.py), grade it (grade.py); -J JSON redaction is pav.secrets.redact.

record() is the stable per-log JSON object that check-nccl prints and scripts read; docs/check-nccl.md
documents every field. Add fields if needed; never rename or drop one.
"""

from __future__ import annotations

from typing import Any

from pav.nccl_tests.grade import Grade
from pav.nccl_tests.parse import NcclLog, Placement


def record(path: str, log: NcclLog | None, grade: Grade) -> dict[str, Any]:
    """One log's result; log is None for a file that could not be read (status "error").

    A single rank moves no data between GPUs: its bus bandwidth is null ("busbw_applicable": false),
    never the copy-to-itself figure nccl-tests prints (hundreds of TB/s).
    """
    single = log is not None and log.ranks == 1
    return {
        "file": path,
        "op": log.op if log else None,
        "status": grade.status,
        "reason": grade.reason,
        "rows": [
            {
                "size_bytes": row.size_bytes,
                "count": row.count,
                "type": row.type,
                "wrong": row.wrong,
                "out_of_place": _placement(row.out_of_place, single),
                "in_place": _placement(row.in_place, single),
            }
            for row in (log.rows if log else [])
        ],
        "avg_busbw_gbps": log.avg_busbw_gbps if log and not single else None,
        "busbw_applicable": not single,
        "devices": [
            {"rank": d.rank, "host": d.host, "device": d.device, "name": d.name}
            for d in (log.devices if log else [])
        ],
    }


def _placement(placement: Placement | None, single: bool) -> dict[str, float | None] | None:
    if placement is None:
        return None
    return {
        "time_us": placement.time_us,
        "algbw_gbps": placement.algbw_gbps,
        "busbw_gbps": None if single else placement.busbw_gbps,
    }
