"""What got worse since the last runs of the same thing: every metric of the latest run against the
previous run and the median of the last N, a drop flagged once MIN_RUNS earlier runs are kept.

Runs are the results.json files one level under the results root, found by the env they record and
compared only with runs of the same key (history_key.py: the env, its hosts and their GPUs). Hosts of a
provisioning env get new names every run, so a metric is keyed by test and metric name, and its value is
the worst over the hosts the test ran on (the host is kept, to name it).
"""

from __future__ import annotations

import json
import re
import statistics
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pav.reporting.history_key import key_of

DEFAULT_LAST = 5
# Earlier runs of the same key a metric needs before a drop is flagged: fewer say nothing of how far the
# metric moves on its own (one run is one noisy sample). docs/nightly.md says the same.
MIN_RUNS = 3
DEFAULT_TOLERANCE = 0.05

# Metric name patterns and which way is better; a metric matching none is not compared (counts, ids).
HIGHER_IS_BETTER = re.compile(r"^(busbw_gbps\..*|avg_busbw_gbps|.*_per_s_.*|.*_per_s|scaling_efficiency)$")
LOWER_IS_BETTER = re.compile(r"^(.*time_u?s_median|time_us\..*|peak_memory_bytes|wrong_total)$")


@dataclass
class Run:
    run_id: str
    started: str
    path: Path
    data: dict[str, Any]


@dataclass
class MetricChange:
    test: str
    metric: str
    better: str  # "higher" or "lower"
    latest: float
    host: str  # the host the latest (worst) value came from
    previous: float | None
    vs_previous: float | None  # relative change, signed so that negative is worse
    median: float | None
    vs_median: float | None
    flagged: bool
    allowed: float = DEFAULT_TOLERANCE  # the drop let pass: the tolerance, or the spread the kept runs show
    # The test's workload fingerprint (pav.workload) in the latest run, and the earlier runs left out of its
    # series because they measured another workload: a series restarts where it changes.
    workload: str = ""
    restarted: int = 0


@dataclass
class Found:
    runs: list[Run]  # the env's runs that measured something, oldest first: the comparison points
    unreadable: list[str]  # a line for each results.json that could not be read
    # Runs of the env that measured nothing (NOTHING RUN, or an ERROR before any test passed or failed),
    # oldest first: no figure to compare, and counted as runs they named one as "previous" and pushed
    # runs with figures out of the last N (issue 64).
    left_out: list[Run]


def find_runs(root: Path, env: str) -> Found:
    """The env's runs under root, oldest first: those that measured something, and those left out."""
    runs, unreadable = [], []
    for path in sorted(root.glob("*/results.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            unreadable.append(f"{path}: not readable JSON ({exc.__class__.__name__})")
            continue
        if isinstance(data, dict) and data.get("env") == env and data.get("tests"):
            runs.append(
                Run(str(data.get("run_id", path.parent.name)), str(data.get("started", "")), path, data)
            )
    runs.sort(key=lambda r: (r.started, r.run_id))
    return Found([r for r in runs if measured(r.data)], unreadable, [r for r in runs if not measured(r.data)])


def measured(data: dict[str, Any]) -> bool:
    """Whether a run measured anything: a test of it passed or failed (what metrics_of compares)."""
    return any(isinstance(t, dict) and t.get("status") in ("pass", "fail") for t in data.get("tests") or [])


def left_out_line(left_out: list[Run]) -> str:
    """The note on runs left out of the comparison, or "" where none was."""
    if not left_out:
        return ""
    shown = ", ".join(f"{r.run_id} ({r.data.get('verdict') or '?'})" for r in left_out[-3:])
    more = f" and {len(left_out) - 3} more" if len(left_out) > 3 else ""
    return (
        f"left out {len(left_out)} run(s) that measured nothing (NOTHING RUN, or ERROR before any test "
        f"passed or failed): {shown}{more}"
    )


def direction(metric: str) -> str | None:
    if HIGHER_IS_BETTER.match(metric):
        return "higher"
    if LOWER_IS_BETTER.match(metric):
        return "lower"
    return None


def metrics_of(results: dict[str, Any]) -> dict[tuple[str, str], tuple[float, str, str]]:
    """(test, metric) -> (the worst value over hosts, its host, the test's workload fingerprint) for every
    compared metric of a run ("" where the run recorded no workload)."""
    out: dict[tuple[str, str], tuple[float, str, str]] = {}
    for test in results.get("tests", []):
        if test.get("status") not in ("pass", "fail"):
            continue
        host = ",".join(test.get("hosts", []))
        workload = test.get("workload") if isinstance(test.get("workload"), dict) else {}
        fingerprint = str(workload.get("fingerprint") or "")
        for metric, value in _leaves(test.get("metrics") or {}):
            better = direction(metric)
            if better is None:
                continue
            key = (str(test.get("name")), metric)
            old = out.get(key)
            worse = old is None or (value < old[0] if better == "higher" else value > old[0])
            if worse:
                out[key] = (value, host, fingerprint)
    return out


def _leaves(node: dict[str, Any], prefix: str = "") -> list[tuple[str, float]]:
    leaves = []
    for key, value in node.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            leaves += _leaves(value, name + ".")
        elif isinstance(value, int | float) and not isinstance(value, bool):
            leaves.append((name, float(value)))
    return leaves


def compare(
    latest: dict[str, Any],
    earlier: list[dict[str, Any]],
    tolerance: float = DEFAULT_TOLERANCE,
    last: int = DEFAULT_LAST,
) -> list[MetricChange]:
    """Every compared metric of latest against earlier runs (oldest first): the previous one, and the
    median of the last `last` of them. A drop is flagged only where at least MIN_RUNS of those runs have
    the metric, and only against their median, beyond the tolerance and the metric's own run-to-run spread
    among them: CPU timings move 10-20% between back-to-back runs, and that is no drop."""
    window = [metrics_of(r) for r in earlier[-last:]]
    changes = []
    for key, (value, host, workload) in sorted(
        metrics_of(latest).items(), key=lambda item: _natural(item[0])
    ):
        better = direction(key[1]) or "higher"
        # A series holds one workload: a run of another (a batch changed) is another series, never a drop
        # (issue 64). A run that recorded none (before results.json 1.4) cannot tell, and is compared.
        same = [m for m in window if key in m and _same_workload(m[key][2], workload)]
        restarted = sum(1 for m in window if key in m) - len(same)
        past = [m[key][0] for m in same]
        last = window[-1] if window else {}
        prev = last[key][0] if key in last and _same_workload(last[key][2], workload) else None
        median = statistics.median(past) if past else None
        vs_prev, vs_median = _change(value, prev, better), _change(value, median, better)
        allowed = max(tolerance, spread(past))
        flagged = len(past) >= MIN_RUNS and vs_median is not None and vs_median < -allowed
        changes.append(
            MetricChange(
                key[0],
                key[1],
                better,
                value,
                host,
                prev,
                vs_prev,
                median,
                vs_median,
                flagged,
                allowed,
                workload,
                restarted,
            )
        )
    return changes


def _same_workload(earlier: str, latest: str) -> bool:
    return not earlier or not latest or earlier == latest


def spread(past: list[float]) -> float:
    """The largest relative distance of a kept run's value from their median: how far the metric moves
    on its own. 0 with fewer than MIN_RUNS runs, or a median of 0."""
    if len(past) < MIN_RUNS:
        return 0.0
    median = statistics.median(past)
    return max(abs(v - median) for v in past) / abs(median) if median else 0.0


def _natural(key: tuple[str, str]) -> tuple[str, list[tuple[int, str]]]:
    """busbw_gbps.all_reduce.65536 before ...1048576: sizes in numeric order."""
    return key[0], [(int(p), "") if p.isdigit() else (-1, p) for p in key[1].split(".")]


def _change(value: float, base: float | None, better: str) -> float | None:
    """Relative change, negative when worse. From a base of 0, any worsening counts as -100%."""
    if base is None:
        return None
    if base == 0:
        if value == 0:
            return 0.0
        return -1.0 if (value > 0) == (better == "lower") else 1.0
    change = (value - base) / abs(base)
    return change if better == "higher" else -change


def same_key(latest: dict[str, Any], earlier: list[Run]) -> list[Run]:
    """The earlier runs that tested what latest tested (history_key.py)."""
    key = key_of(latest)
    return [r for r in earlier if key_of(r.data) == key]


def record(
    latest: dict[str, Any],
    earlier: list[Run],
    root: Path,
    tolerance: float,
    last: int,
    left_out: list[Run] | None = None,
) -> dict[str, Any]:
    """results.json's "history": what the report stage writes and `history --json` prints. Of the earlier
    runs, only those of latest's key count; with none, no metric is listed. left_out: the env's runs that
    measured nothing, named (`left_out`), never compared."""
    earlier = same_key(latest, earlier)
    changes = compare(latest, [r.data for r in earlier], tolerance, last) if earlier else []
    return {
        "results_root": str(root),
        "env": latest.get("env"),
        "key": key_of(latest),
        "latest": latest.get("run_id"),
        "previous": earlier[-1].run_id if earlier else None,
        "compared_runs": [r.run_id for r in earlier[-last:]],
        "tolerance": tolerance,
        "last": last,
        "min_runs": MIN_RUNS,
        "flagged": sum(c.flagged for c in changes),
        "metrics": [asdict(c) for c in changes],
        "left_out": [r.run_id for r in left_out or []],
    }


def too_few(hist: dict[str, Any]) -> str:
    """Why no drop can be flagged yet, or "" once enough earlier runs of the key are kept."""
    kept = len(hist.get("compared_runs") or [])
    if "key" not in hist or kept >= hist.get("min_runs", MIN_RUNS):
        return ""  # a record of before keys, or enough runs
    runs = f"{kept} earlier run(s)" if kept else "no earlier run"
    return f"{runs} of {hist.get('key')}; a drop is flagged once {hist.get('min_runs', MIN_RUNS)} are kept"


def render(hist: dict[str, Any]) -> str:
    """The table `history` prints."""
    head = (
        f"{hist['key']}: run {hist['latest']} vs previous {hist['previous']} and the median of "
        f"{len(hist['compared_runs'])} run(s); tolerance {hist['tolerance']:.0%}; change: + better, - worse"
    )
    rows = [["", "test", "metric", "latest", "previous", "change", "median", "change"]]
    for m in hist["metrics"]:
        rows.append([
            "DROP" if m["flagged"] else "", m["test"], m["metric"], _num(m["latest"]), _num(m["previous"]),
            _pct(m["vs_previous"]), _num(m["median"]), _pct(m["vs_median"]),
        ])  # fmt: skip
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [head, ""] + [
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows
    ]
    lines.append("")
    lines.append(
        f"{hist['flagged']} metric(s) dropped beyond {hist['tolerance']:.0%} and their own run-to-run spread"
    )
    if too_few(hist):
        lines.append(f"none can be flagged yet: {too_few(hist)}")
    restarted = sorted({m["test"] for m in hist["metrics"] if m.get("restarted")})
    if restarted:
        lines.append(f"series restarted (earlier runs measured another workload): {', '.join(restarted)}")
    return "\n".join(lines) + "\n"


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value + 0.0:+.1%}"
