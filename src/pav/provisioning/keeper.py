"""Who an env's provisioned state belongs to, kept beside it (STATE/owner.json): the run using it now (or
that used it last and never tore it down), and the run that kept it (--keep), when and until when.

What the state holds is read from Terraform's own state file (no Terraform run): a record whose state is
empty means nothing."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pav.hostlist import compress
from pav.locks import Holder

RECORD = "owner.json"
DEFAULT_KEEP_HOURS = 12  # as the cloud envs' pav-expires-at label without --max-hours


@dataclass(frozen=True)
class Keep:
    run_id: str
    run_dir: str
    by: str  # user@host
    since: str  # UTC, when it was first kept
    until: str  # UTC: past it, the next run may destroy what is kept

    def expired(self, now: datetime) -> bool:
        try:
            return _parse(self.until) <= now
        except ValueError:
            return False

    def describe(self, now: datetime) -> str:
        return (
            f"run {self.run_id} ({self.by}, kept {age(self.since, now)} ago, until {self.until}; "
            f"its run dir {self.run_dir})"
        )


@dataclass(frozen=True)
class StateRecord:
    running: Holder | None = None  # the run on it now; found with the lock free: a run that is gone
    ended: str = ""  # when that run ended without tearing down ("": its driver died)
    kept: Keep | None = None


def read(state: Path) -> StateRecord:
    try:
        data = json.loads((state / RECORD).read_text())
    except (OSError, ValueError):
        return StateRecord()
    if not isinstance(data, dict):
        return StateRecord()
    kept = data.get("kept")
    try:
        keep = Keep(**kept) if isinstance(kept, dict) else None
    except TypeError:
        keep = None
    return StateRecord(Holder.parse(data.get("running")), str(data.get("ended") or ""), keep)


def write(state: Path, record: StateRecord) -> None:
    """Atomically: a driver killed mid-write leaves the record before it, never half of one."""
    path = state / RECORD
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(asdict(record), indent=2) + "\n")
    os.replace(tmp, path)


def clear(state: Path) -> None:
    (state / RECORD).unlink(missing_ok=True)


def _tfstate(state: Path) -> dict[str, Any]:
    try:
        data = json.loads((state / "terraform.tfstate").read_text() or "{}")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def resources(state: Path) -> list[str]:
    """What Terraform's state holds (what `terraform state list` prints, without running Terraform)."""
    found = [r for r in _tfstate(state).get("resources") or [] if isinstance(r, dict)]
    return [
        f"{r.get('type')}.{r.get('name')}" + (f"[{i['index_key']}]" if "index_key" in i else "")
        for r in found
        for i in r.get("instances") or []
        if isinstance(i, dict)
    ]


def host_names(state: Path) -> list[str]:
    hosts = ((_tfstate(state).get("outputs") or {}).get("hosts") or {}).get("value")
    return sorted(hosts) if isinstance(hosts, dict) else []


def left(state: Path) -> str:
    """What the state holds, in words: "3 resource(s): hosts sim-x-0, sim-x-1"."""
    names = host_names(state)
    hosts = f": hosts {compress(names)}" if names else ""
    return f"{len(resources(state))} resource(s){hosts}"


def keep_hours(state: Path, max_hours: int | None) -> int:
    """--max-hours, else the lifetime the cloud resources were labelled with, else the default."""
    if max_hours is not None:
        return max_hours
    try:
        hours = json.loads((state / "vars.tfvars.json").read_text()).get("max_lifetime_hours")
    except (OSError, ValueError, AttributeError):
        hours = None
    return hours if isinstance(hours, int) and hours > 0 else DEFAULT_KEEP_HOURS


def age(stamp: str, now: datetime) -> str:
    try:
        seconds = max(0, int((now - _parse(stamp)).total_seconds()))
    except ValueError:
        return "?"
    hours, minutes = seconds // 3600, seconds % 3600 // 60
    if hours:
        return f"{hours}h {minutes}m"
    return f"{minutes}m" if minutes else f"{seconds}s"


def _parse(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).astimezone(UTC)
