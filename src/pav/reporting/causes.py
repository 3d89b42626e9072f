"""Each failure in report.html: its likely cause from a small rule table, and a short redacted log excerpt."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pav.secrets.redact import redact_string, redact_text

# (pattern on the test's reason, likely cause). First match wins, so the specific rules come first.
RULES: tuple[tuple[str, str], ...] = (
    (
        r"timeout|timed out",
        "a hang or a straggler: a rank stuck in a collective (a dead link, a peer that never joined) "
        "or one host far slower than the rest; compare the hosts' wall times and an NCCL_DEBUG=INFO log",
    ),
    (
        r"unreachable|left the run|no result came back|host \S+ (is )?down",
        "host down or unreachable over SSH: check that it is up, sshd answers, and its pinned host key",
    ),
    (r"interrupted", "the run was interrupted (SIGINT/SIGTERM) before this test gave a result"),
    (
        r"wrong(_total)?[=\s]*[1-9]|#wrong|wrong elements|wrong result|out-of-bounds|replicas",
        "data corruption: a bad GPU (ECC/Xid errors: nvidia-smi -q -d ECC, dmesg) "
        "or a bad NVLink/InfiniBand link",
    ),
    (
        r"busbw[^;]*below|NCCL_TESTS_MIN_BW",
        "degraded link: an NVLink down, a PCIe fallback (nvidia-smi topo -m), "
        "an InfiniBand port down or at a lower rate (ibstat), or the wrong NCCL_IB_HCA",
    ),
    (
        r"(tokens|samples)_per_s\S*=.*below|scaling_efficiency\S*=.*below",
        "slow training: throttled GPU clocks (nvidia-smi -q -d PERFORMANCE), CPU or NUMA binding, "
        "or the same link problems that lower bandwidth",
    ),
    (r"loss_ratio\S*=.*above", "training did not learn: wrong numerics on a GPU, or a broken payload"),
    (
        r"no threshold is set",
        "the profile has no gate for this test: add one to thresholds/PROFILE.yml or pick "
        "a profile that covers it (pav_threshold_profile)",
    ),
    (
        r"was not measured|not measured",
        "the gate's metric was not produced: the test ran other sizes or ops "
        "than the profile gates, or it stopped early",
    ),
    (r"rc=127|exited 127", "a command was not found on the host (rc 127): the tool is not installed there"),
    (
        r"ranks wrote a result|launcher failed|exited \d+|crash|not valid JSON",
        "a rank or the launcher crashed before reporting: see the log excerpt",
    ),
)
EXCERPT_LINES = 20
EXCERPT_CHARS = 2400
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_ENV_TOKEN = re.compile(r"\b[A-Za-z_][A-Za-z0-9_]*=\S+")


@dataclass
class Failure:
    test: str
    hosts: list[str]
    status: str
    reason: str
    cause: str
    log: str  # run-dir path of the excerpt's log, or ""
    excerpt: str


def likely_cause(test: dict[str, Any]) -> str:
    reason = str(test.get("reason", ""))
    for pattern, cause in RULES:
        if re.search(pattern, reason, re.IGNORECASE):
            return cause
    if test.get("status") == "error":
        return "the test could not produce a result: see the log excerpt"
    return "see the reason and the log excerpt"


def failures(results: dict[str, Any], run_dir: Path, secrets: Iterable[str] = ()) -> list[Failure]:
    known = set(secrets)
    out = []
    for test in results.get("tests", []):
        if test.get("status") not in ("fail", "error"):
            continue
        log = _log_of(test, run_dir)
        excerpt = excerpt_of(run_dir / log, known) if log else ""
        reason = redact_text(str(test.get("reason", "")), known)
        out.append(
            Failure(
                test["name"], test.get("hosts", []), test["status"], reason, likely_cause(test), log, excerpt
            )
        )
    return out


def _log_of(test: dict[str, Any], run_dir: Path) -> str:
    """The failing test's launcher log; the one the reason names first."""
    logs = [a for a in test.get("artifacts", []) if a.endswith("launcher.log")]
    named = [a for a in logs if a in str(test.get("reason", ""))]
    for path in named + logs:
        if (run_dir / path).is_file():
            return path
    return ""


def excerpt_of(path: Path, secrets: set[str]) -> str:
    """The log's last lines (where a crash or a hang shows), without colour codes or secrets."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    lines = [_ANSI.sub("", line).rstrip() for line in text.splitlines() if line.strip()]
    tail = "\n".join(lines[-EXCERPT_LINES:])[-EXCERPT_CHARS:]
    tail = redact_text(tail, secrets)
    return _ENV_TOKEN.sub(lambda m: redact_string(m.group(0)), tail)
