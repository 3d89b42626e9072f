"""A run as Prometheus metrics: the verdict of the run, of each host and of each GPU, each test's status,
busbw, the per-GPU figures, each gate's margin, the run's duration and its end. Built from results.json as
the report wrote it (a recorded run renders the same), in base units: bytes/s, FLOP/s, seconds.

Labels stay few and bounded: env, host, gpu, test, and the op, message size, gate and state a family names;
the run id and profile are labels of pav_run_info only. docs/nightly.md lists every family.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, get_args

from pav.reporting import bad_parts
from pav.reporting.exposition import Family
from pav.reporting.metrics_gpus import gpu_families, gpu_index, number
from pav.results import NOTHING_RUN, TestStatus, Verdict, utc_now
from pav.thresholds.gate import lookup

VERDICTS: tuple[str, ...] = get_args(Verdict)
STATUSES: tuple[str, ...] = get_args(TestStatus)
WORST_FIRST = ("error", "fail", "skipped", "pass")  # one host's test recorded twice: the worse outcome
GB = 1e9  # results.json's GB/s: GB = 1e9 bytes, as nccl-tests counts
JUDGED = ("pass", "fail")  # tests whose gates were checked; a skipped or erroring test has no margins


def families(results: dict[str, Any]) -> list[Family]:
    env = str(results.get("env") or "")
    parts = bad_parts.find(results)
    out = _run(results, env)
    hosts = host_names(results)
    verdicts = {host: host_verdict(host, results, parts) for host in hosts}
    verdict = Family("pav_host_verdict", "1 for the host's verdict (FAIL: a bad part names it), 0 else")
    for host in hosts:
        _state_set(verdict, verdicts[host], VERDICTS, "verdict", env=env, host=host)
    out += [
        verdict,
        _links(parts, env),
        *_tests(results, env),
        *gpu_families(results, env, parts, verdicts),
    ]
    return out


def _links(parts: list[bad_parts.BadPart], env: str) -> Family:
    """Each link isolation found: no host's verdict carries it (each side passes alone), so a host alert
    would page for every host of both sides, to drain them, where the fault is the fabric between them."""
    found = Family(
        "pav_failed_link_info",
        "1 per link isolation found: two sets of hosts that each pass the test alone and fail it together",
    )
    for link in (part.link for part in parts if part.link is not None):
        found.add(1, env=env, test=link.test, between=link.between)
    return found


def host_names(results: dict[str, Any]) -> list[str]:
    """The run's hosts, then any host only a test names (one that left the run)."""
    named = [h for t in results.get("tests") or [] for h in t.get("hosts") or []]
    return list(dict.fromkeys([*(results.get("hosts") or {}), *named]))


def host_verdict(host: str, results: dict[str, Any], parts: list[bad_parts.BadPart]) -> str:
    """FAIL where a bad part names the host (of a test across hosts, those isolation named); FAIL too where
    the run failed with no part to single out; a run that could not finish, or judged nothing, gives its
    verdict to every host it does not fail; else PASS. A link names no host (pav_failed_link_info)."""
    verdict = str(results.get("verdict") or "ERROR")
    named = [part for part in parts if part.kind != "link"]
    if any(host in part.hosts for part in named) or (verdict == "FAIL" and not parts):
        return "FAIL"
    return verdict if verdict in ("ERROR", "NONE", NOTHING_RUN) else "PASS"


def _run(results: dict[str, Any], env: str) -> list[Family]:
    info = Family("pav_run_info", "the latest run: its id and the threshold profile it was judged by")
    info.add(
        1,
        env=env,
        run_id=str(results.get("run_id")),
        profile=str(results.get("threshold_profile") or results.get("threshold_profile_chosen")),
    )
    verdict = Family("pav_run_verdict", "1 for the run's verdict (PASS, FAIL, ERROR, NONE), 0 for the others")
    _state_set(verdict, str(results.get("verdict")), VERDICTS, "verdict", env=env)
    ended = Family("pav_run_timestamp_seconds", "when the run ended, Unix time")
    ended.add(unix_time(results.get("ended") or utc_now()), env=env)
    duration = Family("pav_run_duration_seconds", "the run's wall time, provisioning to teardown")
    duration.add(number((results.get("timing") or {}).get("run_s")), env=env)
    return [info, verdict, ended, duration]


def _tests(results: dict[str, Any], env: str) -> list[Family]:
    status = Family("pav_test_status", "1 for the test's status on the host (pass, fail, skipped, error)")
    wall = Family("pav_test_duration_seconds", "the test launch's wall time")
    busbw = Family("pav_busbw_bytes_per_second", "collective bus bandwidth at a message size (slowest rank)")
    margin = Family(
        "pav_gate_margin_ratio",
        "a gate's measured value over its bound: value/min for a >= gate, max/value for a <= gate; "
        "below 1 fails, 0 not measured",
    )
    for test in sorted(results.get("tests") or [], key=lambda t: WORST_FIRST.index(_status(t))):
        name = str(test.get("name"))
        metrics = test.get("metrics") or {}
        for host in test.get("hosts") or []:
            _state_set(status, _status(test), STATUSES, "status", env=env, host=host, test=name)
            wall.add(number(metrics.get("wall_s")), env=env, host=host, test=name)
            for op, size, gbps in _busbw(metrics):
                busbw.add(gbps * GB, env=env, host=host, test=name, op=op, size_bytes=size)
            if _status(test) in JUDGED:
                for gate, basis, part, ratio in _margins(test):
                    labels = {"env": env, "host": host, "test": name, "gate": gate, "basis": basis}
                    gpu = gpu_index(part)
                    margin.add(ratio, **(labels | ({"gpu": gpu} if gpu is not None else {})))
    return [status, wall, busbw, margin]


def _busbw(metrics: dict[str, Any]) -> list[tuple[str, str, float]]:
    """(op, size in bytes, GB/s): the payload's busbw_gbps[op][size]; nccl-tests' busbw_gbps[size], `op`."""
    table = metrics.get("busbw_gbps")
    if not isinstance(table, dict):
        return []
    if "op" in metrics:
        table = {str(metrics["op"]): table}
    return [
        (str(op), str(size), value)
        for op, sizes in table.items()
        if isinstance(sizes, dict)
        for size, raw in sizes.items()
        if (value := number(raw)) is not None
    ]


def _margins(test: dict[str, Any]) -> list[tuple[str, str, str, float]]:
    """(gate, basis, part, ratio) of each gate with a non-zero bound: derived gates as judged (their value
    and min), the profile's checked against the test's metrics; a gate of bound 0 (wrong_total, problems)
    has no ratio: its failure is the test's status."""
    threshold, metrics = test.get("threshold") or {}, test.get("metrics") or {}
    out = []
    for gate in threshold.get("gates") or []:
        metric = str(gate.get("metric"))
        derived = "basis" in gate
        value = number(gate.get("value")) if derived else lookup(metrics, metric)
        ratio = _ratio(value, number(gate.get("min")), number(gate.get("max")))
        if ratio is not None:
            basis = str(gate["basis"]) if derived else "profile"
            out.append((metric, basis, str(gate.get("part") or "host"), ratio))
    for gate in threshold.get("nccl_tests") or []:
        metric = f"busbw_gbps.{gate.get('size_bytes')}"
        ratio = _ratio(lookup(metrics, metric), number(gate.get("min_busbw_gbps")), None)
        if ratio is not None:
            out.append((metric, "profile", "host", ratio))
    return out


def _ratio(value: float | None, low: float | None, high: float | None) -> float | None:
    if low:
        return 0.0 if value is None else value / low
    if high:
        return 0.0 if value is None else (high / value if value > 0 else None)
    return None


def _state_set(family: Family, current: str, states: tuple[str, ...], key: str, **labels: str) -> None:
    for state in states:
        family.add(1 if state == current else 0, **labels, **{key: state})


def _status(test: dict[str, Any]) -> str:
    status = str(test.get("status"))
    return status if status in WORST_FIRST else "error"


def unix_time(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
