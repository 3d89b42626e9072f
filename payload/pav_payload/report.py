"""The per-rank result file: ``<out>/<test-id>.rank<R>.json``, one stable schema for every subcommand."""

import json
import math
import os
import socket
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pav_payload.env import RankInfo

if TYPE_CHECKING:  # runtime imports torch; a report needs none (pav_payload.plain's ranks have none)
    from pav_payload.runtime import DeviceInfo

SCHEMA_VERSION = 1
STATUSES = ("pass", "fail", "error")
# A rank's first report, written as it starts: what stays if it never ends.
UNFINISHED = "rank started but did not finish (killed, crashed or hung)"


@dataclass
class Report:
    test_id: str
    kind: str
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    node_rank: int
    hostname: str
    started: str
    params: dict[str, Any]
    status: str = "error"
    reason: str = ""
    ended: str | None = None
    backend: str | None = None
    device: str | None = None
    device_name: str | None = None
    torch_version: str | None = None
    nccl_version: str | None = None
    metrics: dict[str, Any] = field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION

    @classmethod
    def begin(
        cls, test_id: str, kind: str, info: RankInfo, params: dict[str, Any], torch_version: str | None
    ) -> "Report":
        return cls(
            test_id=test_id,
            kind=kind,
            rank=info.rank,
            world_size=info.world_size,
            local_rank=info.local_rank,
            local_world_size=info.local_world_size,
            node_rank=info.node_rank,
            hostname=socket.gethostname(),
            started=utc_now(),
            params=params,
            torch_version=torch_version,
        )

    def set_device(self, info: "DeviceInfo") -> None:
        self.backend = info.backend
        self.device = info.device
        self.device_name = info.device_name
        self.nccl_version = info.nccl_version

    def finish(self, status: str, reason: str, metrics: dict[str, Any]) -> None:
        if status not in STATUSES:
            raise ValueError(f"unknown status {status!r}")
        self.status = status
        self.reason = reason
        self.metrics = metrics
        self.ended = utc_now()


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def report_path(out_dir: Path, test_id: str, rank: int) -> Path:
    return out_dir / f"{test_id}.rank{rank}.json"


def write_report(report: Report, out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = report_path(out_dir, report.test_id, report.rank)
    # Write then rename, so a reader (or a kill mid-write) never sees half a file.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(_json_safe(asdict(report)), indent=2, sort_keys=True, allow_nan=False) + "\n")
    os.replace(tmp, path)
    return path


def _json_safe(value: Any) -> Any:
    """NaN and infinity are not JSON; a diverged loss becomes null (the reason says why)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _json_safe(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(item) for item in value]
    return value
