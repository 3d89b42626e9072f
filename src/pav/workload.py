"""What a test measured with: its workload (model, batch, dtype, sizes, iterations) and a fingerprint of it.

A reference figure holds for one workload only (thresholds/references/): a change of batch or sizes makes
another figure, and must never meet the old one's gate. The payload's ranks record the parameters they ran
with (`params`); nccl-tests print theirs in the log's `# nThread ... minBytes ... iters` line. Each test's
results.json entry records both the parameters and their fingerprint (`workload`).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from pav.units import parse_size

# Parameters that name where a rank writes or how long it may take, or a fault injected for testing: the
# same workload whatever they are.
NOT_WORKLOAD = frozenset({"out", "test_id", "timeout_s"})
NCCL_HEADER = re.compile(
    r"#\s*nThread\s+(?P<threads>\d+)\s+nGpus\s+(?P<gpus>\d+)\s+minBytes\s+(?P<min_bytes>\d+)\s+"
    r"maxBytes\s+(?P<max_bytes>\d+)\s+step:\s*(?P<step>\d+)\((?P<step_kind>factor|bytes)\)\s+"
    r"warmup iters:\s*(?P<warmup>\d+)\s+iters:\s*(?P<iters>\d+)"
)
NCCL_BINARY = re.compile(r"# Collective test starting: (\S+)")


@dataclass(frozen=True)
class Workload:
    fingerprint: str  # 12 hex digits of the sha256 of the parameters as canonical JSON
    params: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"fingerprint": self.fingerprint, "params": self.params}


def of_params(params: dict[str, Any]) -> Workload:
    kept = {
        k: v for k, v in sorted(params.items()) if k not in NOT_WORKLOAD and not str(k).startswith("inject_")
    }
    digest = hashlib.sha256(json.dumps(kept, sort_keys=True, default=str).encode()).hexdigest()
    return Workload(digest[:12], kept)


def of_ranks(ranks: list[dict[str, Any]]) -> Workload | None:
    """The lowest rank's parameters (every rank of a launch runs the same command)."""
    if not ranks:
        return None
    params = min(ranks, key=lambda r: r.get("rank", 0)).get("params")
    return of_params(params) if isinstance(params, dict) and params else None


def of_nccl_log(text: str) -> Workload | None:
    """nccl-tests' own statement of what it ran: the binary, the size sweep and the iterations (the GPU
    count is the host's, keyed apart: thresholds/references)."""
    header = NCCL_HEADER.search(text)
    if header is None:
        return None
    params: dict[str, Any] = {k: v for k, v in header.groupdict().items() if k != "gpus"}
    params = {k: (v if k == "step_kind" else int(v)) for k, v in params.items()}
    binary = NCCL_BINARY.search(text)
    params["binary"] = binary.group(1) if binary else ""
    return of_params(params)


def recorded(raw: Any) -> Workload | None:
    """A results.json entry's `workload`, or None where the run recorded none."""
    if not isinstance(raw, dict):
        return None
    fingerprint, params = raw.get("fingerprint"), raw.get("params")
    if not isinstance(fingerprint, str) or not isinstance(params, dict):
        return None
    return Workload(fingerprint, dict(params))


# nccl-tests' flags and the parameters their log header names them by.
NCCL_FLAGS = {"-b": "min_bytes", "-e": "max_bytes", "-f": "step", "-n": "iters", "-w": "warmup"}


def declared(args: tuple[str, ...], launcher: str) -> dict[str, str]:
    """What a catalog entry's arguments set, as the parameters a run records them by: `--batch-size 256`
    as batch_size "256", nccl-tests' `-e 8G` as max_bytes "8589934592"; a bare flag as "True"."""
    out: dict[str, str] = {}
    i = 0
    while i < len(args):
        flag = args[i]
        value = args[i + 1] if i + 1 < len(args) and not args[i + 1].startswith("-") else None
        i += 2 if value is not None else 1
        if launcher == "nccl_tests":
            if flag in NCCL_FLAGS and value is not None:
                out[NCCL_FLAGS[flag]] = str(parse_size(value) if flag in ("-b", "-e") else value)
        elif flag.startswith("--"):
            out[flag[2:].replace("-", "_")] = "True" if value is None else value
    return out


def differs(recorded_params: dict[str, Any], today: dict[str, str]) -> list[str]:
    """Each parameter today's catalog sets that the record ran otherwise: `batch_size 64, now 256`."""
    return [
        f"{key} {recorded_params[key]}, now {value}"
        for key, value in today.items()
        if key in recorded_params and str(recorded_params[key]) != value
    ]
