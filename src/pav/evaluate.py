"""Judge collected results: launcher exit code, every rank's JSON, then the profile's gates."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from pav import first_failure, nccl_transport
from pav.catalog import spec_of
from pav.hostlist import compress
from pav.launch import Launch
from pav.nccl_tests import record as nccl_record
from pav.nccl_tests.grade import grade as nccl_grade
from pav.nccl_tests.parse import op_from_name, parse_text
from pav.results import TestResult
from pav.thresholds.burn_series import summarize_burn, summarize_sdc
from pav.thresholds.fleet import STEP_RATES
from pav.thresholds.gate import Gate
from pav.workload import of_nccl_log, of_ranks

TIMEOUT_RCS = {124, 137}
# A rank's own report of a collective that waited past its limit: gloo's "Timed out waiting 8000ms for recv",
# NCCL's watchdog ("Watchdog caught collective operation timeout").
TIMED_OUT = re.compile(r"timed out|timeout|watchdog", re.IGNORECASE)
# What a payload test with no gate in the profile fails with: the one reason evaluate gives at the gate step
# when there are no gates, so judging can tell a run that reached its gates from one that failed before.
NO_THRESHOLD = "no threshold is set for this test in the profile"


NcclGates = Mapping[str, Sequence[Gate]]  # collective -> its busbw gates


def evaluate_launch(
    launch: Launch,
    run_dir: Path,
    gates: list[Gate],
    nccl_gates: NcclGates | None = None,
    lost: Mapping[str, str] | None = None,
    cut: str = "",
) -> list[TestResult]:
    """Host-scope tests get a result per host; a cluster test gets one result spanning its members.

    lost: why a host gave no result (host -> a phrase: it left the run, collect did not run), named in
    the reason of a test it gives no result to. cut: the signal that stopped the run ("interrupted by
    SIGINT"), if one did: a test no other loss explains was cut short by it, and is `interrupted`.
    """
    if launch.scope == "cluster":
        return [evaluate_group(launch, launch.hosts, launch.members, run_dir, gates, nccl_gates, lost, cut)]
    return [evaluate_group(launch, [h], [h], run_dir, gates, nccl_gates, lost, cut) for h in launch.hosts]


def evaluate_group(
    launch: Launch,
    launch_hosts: list[str],
    members: list[str],
    run_dir: Path,
    gates: list[Gate],
    nccl_gates: NcclGates | None = None,
    lost: Mapping[str, str] | None = None,
    cut: str = "",
) -> TestResult:
    result = TestResult(launch.test, members, "error", threshold={"gates": [g.describe() for g in gates]})
    dirs = {h: run_dir / "hosts" / h / "results" / launch.test for h in launch_hosts}
    result.artifacts = sorted(
        str(p.relative_to(run_dir)) for d in dirs.values() if d.is_dir() for p in d.iterdir()
    )
    rcs = {h: _read_rc(d / "launcher.rc") for h, d in dirs.items()}
    result = _with_wall_time(result, dirs)
    missing = [h for h, rc in rcs.items() if rc is None]
    if missing:
        return _no_result(result, missing, lost or {}, cut)
    timed_out = [h for h, rc in rcs.items() if rc in TIMEOUT_RCS]
    if timed_out:
        result.status = "fail"
        result.reason = f"timeout after {launch.timeout_s}s on {compress(timed_out)}; killed on the host"
        return _with_transport(result, dirs)
    if launch.launcher == "nccl_tests":
        argv = launch.argv_by_host[launch_hosts[0]]
        # The binary names the collective: argv[0] on one host, after mpirun's options across hosts.
        binary = next((a for a in argv if a.endswith("_perf")), argv[0])
        return _with_transport(_judge_nccl_tests(result, rcs, dirs, nccl_gates or {}, binary), dirs)
    by_dir = {h: _read_ranks(d) for h, d in dirs.items()}
    ranks = [rank for found in by_dir.values() for rank in found]
    workload = of_ranks(ranks)
    result.workload = workload.to_dict() if workload else {}
    expected = sum(launch.ranks_by_host.get(h, 0) for h in launch_hosts)
    failed_rc = {h: rc for h, rc in rcs.items() if rc != 0}
    log = _log(next(iter(dirs.values())))
    where = RankHosts(by_dir, members)
    # A rank died (its report never finished, or none was written): its launcher's record names it. Where
    # every rank finished its report, the reports say what failed (a check, a gate): every rank then exits
    # non-zero together (pav_payload agrees on the worst code), and torchrun lists them all.
    died = len(ranks) < expected or not all(_finished(r) for r in ranks)
    first = _first_failure(dirs, where, ranks) if failed_rc and died else None
    return _with_transport(_judge_ranks(result, failed_rc, ranks, expected, gates, log, first, where), dirs)


def _with_transport(result: TestResult, dirs: dict[str, Path]) -> TestResult:
    """What NCCL's INFO lines in the hosts' launcher.log say it used, for a test whose transport is judged
    (its own failure included: a fallback to sockets may be why it timed out or failed)."""
    spec = spec_of(result.name)
    if spec is not None and spec.nccl_transport:
        found = nccl_transport.read(d / "launcher.log" for d in dirs.values())
        result.metrics["nccl_transport"] = found.record()
    return result


def _no_result(result: TestResult, missing: list[str], lost: Mapping[str, str], cut: str) -> TestResult:
    """A host gave no launcher.rc: it left the run, collect did not run, or the signal cut the test short
    (then the test says so, not a cause on the host)."""
    why = "; ".join(dict.fromkeys(lost[h] for h in missing if h in lost))
    if cut and not why:
        result.status = "interrupted"
        result.reason = f"the run was {cut} before {compress(missing)} gave a result"
        return result
    cause = f": {why}" if why else " (it did not run, or collect failed)"
    result.reason = f"no result came back from {compress(missing)}{cause}"
    return result


def _judge_ranks(
    result: TestResult,
    failed_rc: dict[str, int],
    ranks: list[dict[str, Any]],
    expected: int,
    gates: list[Gate],
    log: str,
    first: first_failure.Failure | None = None,
    where: RankHosts | None = None,
) -> TestResult:
    if first is not None:
        return _judge_crash(result, ranks, first, where or RankHosts({}))
    bad = [r for r in ranks if r.get("status") != "pass"]
    if bad:
        worst = _cause(bad)
        result.status = "error" if worst.get("status") == "error" else "fail"
        result.reason = f"rank {worst.get('rank')}: {worst.get('reason') or worst.get('status')}"
        result.metrics.update(summarize(ranks))
        return result
    rc_text = ", ".join(f"{h} rc={rc}" for h, rc in failed_rc.items()) or "rc=0"
    if len(ranks) < expected:
        result.reason = f"{len(ranks)} of {expected} ranks wrote a result ({rc_text}); see {log}"
        return result
    if failed_rc:
        result.reason = f"launcher failed ({rc_text}) although every rank passed; see {log}"
        return result
    result.metrics.update(summarize(ranks))
    result.metrics.update(step_rates(ranks, where or RankHosts({})))
    failures = gate_failures(result.metrics, gates)
    result.status = "fail" if failures else "pass"
    result.reason = "; ".join(failures)
    return result


def _judge_crash(
    result: TestResult, ranks: list[dict[str, Any]], first: first_failure.Failure, where: RankHosts
) -> TestResult:
    """A launch whose launcher recorded the rank that failed first: that rank is the cause, named with its
    host, whether or not it wrote a report; the other ranks' failures follow from it (issue 64)."""
    own = next((r for r in ranks if r.get("rank") == first.rank), {})
    if not first.error and _finished(own) and own.get("reason"):  # its own exception, as it reported it
        first = replace(first, error=str(own["reason"]))
    result.status = "error"
    result.reason = first.lead()
    victims = [r for r in ranks if r.get("status") != "pass" and r.get("rank") != first.rank]
    if victims:
        victim = _cause(victims)
        said = victim.get("reason") or "it did not finish"
        rank = victim.get("rank")
        lost = "timed out waiting for it" if first.hung else "lost its peer"
        result.reason += f"; rank {rank} on {where.host_of(rank) or '?'} {lost}: {said}"
    result.metrics.update(summarize(ranks))
    result.metrics["first_failure"] = first.record()
    return result


class RankHosts:
    """Which of the launch's hosts each rank ran on: the host its report names (its hostname), where that is
    one of the launch's (under Slurm every report lands in the submitting host's folder, a shared one),
    else the host whose results folder holds it."""

    def __init__(self, by_dir: Mapping[str, list[dict[str, Any]]], members: Sequence[str] = ()) -> None:
        self._member = {_short(host): host for host in (*members, *by_dir)}
        self._rank = {
            r.get("rank"): self._member.get(_short(r.get("hostname"))) or host
            for host, found in by_dir.items()
            for r in found
        }

    def host_of(self, rank: Any) -> str:
        return self._rank.get(rank, "")

    def resolve(self, failure: first_failure.Failure, logged_on: str) -> str:
        """The launch's host a launcher's failure names: the host of the rank's own report (a rank that
        died has its provisional one), else the one whose hostname the launcher gave, else the host whose
        log recorded it where that is the rank's (torchrun's agent reports its own node's ranks; mpirun,
        started on the first host, every host's); "" where none says."""
        found = self.host_of(failure.rank) or self._member.get(_short(failure.host))
        return found or (logged_on if failure.source == "torchrun" else "")


def _short(hostname: Any) -> str:
    return str(hostname or "").split(".")[0]


def _first_failure(
    dirs: dict[str, Path], where: RankHosts, ranks: list[dict[str, Any]]
) -> first_failure.Failure | None:
    """The first failure the launchers recorded, its host one of the launch's. Each torchrun agent lists
    its own node's failed ranks, its "root cause" the lowest rank of the first poll that found one (a rank
    that dies and the peer it takes down often end within one poll); of every agent's, the earliest
    (torchrun's times are whole seconds): at the same second one that ended by a signal (its agent stops it
    after a local peer failed) or that reported an exception of its own (a lost peer raises one) comes
    after one that just died, and a root cause before the rest."""
    logs = {host: _text(d / "launcher.log") for host, d in dirs.items()}
    stopped = [
        replace(failure, host=where.resolve(failure, host))
        for host, text in logs.items()
        for failure in first_failure.stopped(text)
    ]
    roots = [
        replace(failure, host=where.resolve(failure, host))
        for host, text in logs.items()
        for failure in first_failure.read(text)
    ]
    found = [(f, False) for f in roots] + [(f, True) for f in stopped]
    if not found:
        return None
    ended = {r.get("rank") for r in ranks if _finished(r)}
    first, _ = min(found, key=lambda f: (f[0].time, bool(f[0].signal), f[0].rank in ended, f[1]))
    return _stopped_answering(first, logs, stopped, ended, ranks) or first


def _stopped_answering(
    first: first_failure.Failure,
    logs: dict[str, str],
    stopped: list[first_failure.Failure],
    ended: set[Any],
    ranks: list[dict[str, Any]],
) -> first_failure.Failure | None:
    """A rank that hung, where its peers' timeouts fired first: torchrun's first failure is then a peer that
    timed out waiting (its own report says so, or NCCL's watchdog line of its rank), and the hung rank one
    its agent had to stop with a signal, its report never finished and no timeout of its own said. That rank
    is the cause; None where the records do not say so."""
    waited = {r.get("rank") for r in ranks if TIMED_OUT.search(str(r.get("reason") or ""))}
    waited |= {rank for text in logs.values() for rank in first_failure.timed_out(text)}  # NCCL's watchdog
    if first.rank not in waited:
        return None
    hung = [
        replace(failure, hung=True)
        for failure in stopped
        if failure.signal and failure.rank not in ended and failure.rank not in waited
    ]
    return min(hung, key=lambda f: f.rank) if hung else None


def _finished(report: Mapping[str, Any]) -> bool:
    """Whether a rank finished its report: the payload's say when (`ended`); pav_mpi_allreduce's, without
    one, stay "error" until rank 0 writes its outcome."""
    if "ended" in report:
        return bool(report["ended"])
    return report.get("status") in ("pass", "fail")


def _text(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def gate_failures(metrics: dict[str, Any], gates: Sequence[Gate]) -> list[str]:
    """Why the profile's gates fail these metrics (empty: they hold); a test with no gate never passes."""
    if not gates:
        return [NO_THRESHOLD]
    return [reason for gate in gates if (reason := gate.check(metrics))]


def _cause(bad: list[dict[str, Any]]) -> dict[str, Any]:
    """The rank whose report explains the failure: an error that rank finished (its own exception) before
    one that never finished (its provisional report: killed by torchrun after a peer failed, or hung, which
    of the two depends on timing), before a fail."""
    errors = [r for r in bad if r.get("status") == "error"]
    return next((r for r in errors if r.get("ended")), errors[0] if errors else bad[0])


def _judge_nccl_tests(
    result: TestResult, rcs: dict[str, int | None], dirs: dict[str, Path], gates: NcclGates, launch_argv0: str
) -> TestResult:
    """nccl-tests' own output is the result: parsed and graded like check-nccl grades a log."""
    host, test_dir = next(iter(dirs.items()))
    log_path = test_dir / "launcher.log"
    text = log_path.read_text(errors="replace") if log_path.is_file() else ""
    log = parse_text(text, str(log_path)) if log_path.is_file() else None
    workload = of_nccl_log(text)
    result.workload = workload.to_dict() if workload else {}
    if log is None:
        result.reason = f"no nccl-tests output came back from {host}"
        return result
    if log.op is None:  # older nccl-tests name the collective only in the binary's name
        log.op = op_from_name(Path(launch_argv0).name)
    grade = nccl_grade(log, gates)
    rec = nccl_record(str(log_path), log, grade)
    result.metrics |= {
        "op": rec["op"],
        "avg_busbw_gbps": rec["avg_busbw_gbps"],
        "busbw_gbps": {str(r["size_bytes"]): _busbw(r) for r in rec["rows"]},
        "wrong_total": sum(r["wrong"] or 0 for r in rec["rows"]),
    }
    result.threshold = {"nccl_tests": [g.nccl_record() for g in gates.get(log.op or "", [])]}
    rc = rcs[host]
    if grade.status == "pass" and rc != 0:
        result.status, result.reason = "fail", f"nccl-tests exited {rc}; see {_log(test_dir)}"
        return result
    result.status, result.reason = grade.status, "" if grade.status == "pass" else grade.reason
    return result


def _busbw(row: dict[str, Any]) -> float | None:
    return (row["out_of_place"] or {}).get("busbw_gbps")


def step_rates(ranks: list[dict[str, Any]], where: RankHosts) -> dict[str, Any]:
    """Each host's step rate, its slowest rank's, where the ranks timed their own work (FOR TESTING plain
    ranks with --step-s): what pav.thresholds.fleet holds each host of the test to against the others."""
    slowest: dict[str, float] = {}
    for rank in ranks:
        step = rank.get("metrics", {}).get("step_s")
        if isinstance(step, int | float) and step > 0:
            host = where.host_of(rank.get("rank")) or str(rank.get("hostname"))
            slowest[host] = max(slowest.get(host, 0.0), float(step))
    return {STEP_RATES: {h: round(1 / s, 3) for h, s in slowest.items()}} if slowest else {}


def summarize(ranks: list[dict[str, Any]]) -> dict[str, Any]:
    """Per test kind, the few numbers gates and reports use; the per-rank files keep the rest."""
    if not ranks:
        return {}
    first = min(ranks, key=lambda r: r.get("rank", 0))
    out: dict[str, Any] = {"world_size": first.get("world_size"), "ranks_reported": len(ranks)}
    out["rank_hosts"] = {
        str(r.get("rank")): r.get("hostname") for r in sorted(ranks, key=lambda r: r.get("rank", 0))
    }
    if first.get("kind") == "mpi":
        m = first.get("metrics", {})
        out.update({k: m.get(k) for k in ("world_size", "hosts", "wrong_total", "allreduce_time_us_median")})
    elif first.get("kind") == "collectives":
        out.update(_collective_summary(ranks))
    elif first.get("kind") == "train":
        out.update(_train_summary(ranks))
    elif first.get("kind") == "probe":  # one process measured every GPU of its host
        out.update({k: v for k, v in first.get("metrics", {}).items() if k != "sizes"})
    elif first.get("kind") == "burn":
        out.update(summarize_burn(ranks))
    elif first.get("kind") == "sdc":
        out.update(summarize_sdc(ranks))
    elif first.get("kind") == "plain":  # FOR TESTING ONLY: pav_payload.plain's sum, checked by every rank
        out["wrong_total"] = sum(int(r.get("metrics", {}).get("wrong", 0)) for r in ranks)
    elif first.get("kind") == "slurm_check":
        out["mismatches"] = sum(int(r.get("metrics", {}).get("mismatches", 0)) for r in ranks)
    return out


def _collective_summary(ranks: list[dict[str, Any]]) -> dict[str, Any]:
    busbw: dict[str, dict[str, float]] = {}
    time_us: dict[str, dict[str, float]] = {}
    wrong = 0
    for rank in ranks:
        for row in rank.get("metrics", {}).get("results", []):
            wrong += int(row.get("wrong") or 0)
            if row.get("busbw_gbps") is None:
                continue
            key = str(row["size_bytes"])
            # The slowest rank bounds what a job sees: lowest bandwidth, highest median time.
            per_op = busbw.setdefault(row["op"], {})
            per_op[key] = min(per_op.get(key, float("inf")), float(row["busbw_gbps"]))
            median = (row.get("time_us") or {}).get("median")
            if median is not None:
                times = time_us.setdefault(row["op"], {})
                times[key] = max(times.get(key, 0.0), float(median))
    return {"wrong_total": wrong, "busbw_gbps": busbw, "time_us": time_us}


def _train_summary(ranks: list[dict[str, Any]]) -> dict[str, Any]:
    metrics = [r.get("metrics", {}) for r in ranks]
    first = metrics[0]
    loss_first, loss_last = first.get("loss_first"), first.get("loss_last")
    out: dict[str, Any] = {
        k: first.get(k)
        for k in (
            "model",
            "mode",
            "parameters",
            "compute_dtype",
            "loss_first",
            "loss_last",
            "peak_memory_bytes",
        )
    }
    out["step_time_s_median"] = (first.get("step_time_s") or {}).get("median")
    if loss_first and loss_last is not None:
        out["loss_ratio"] = loss_last / loss_first
    out["replicas_equal"] = int(all(m.get("param_checksum_spread") == 0 for m in metrics))
    for key in ("samples_per_s", "tokens_per_s", "samples_per_s_steady", "tokens_per_s_steady"):
        values = [m[key] for m in metrics if m.get(key) is not None]
        if values:
            out[f"{key}_per_rank_min"] = min(values)
            out[f"{key}_total"] = sum(values)
    return out


def _with_wall_time(result: TestResult, dirs: dict[str, Path]) -> TestResult:
    """The launch's wall time on the slowest host (launcher.time: start and end, epoch seconds)."""
    spans = []
    for d in dirs.values():
        try:
            start, end = map(float, (d / "launcher.time").read_text().split())
            spans.append(end - start)
        except (OSError, ValueError):
            continue
    if spans:
        result.metrics["wall_s"] = round(max(spans), 3)
    return result


def _read_rc(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _read_ranks(test_dir: Path) -> list[dict[str, Any]]:
    ranks = []
    for path in sorted(test_dir.glob("*.rank*.json")):
        try:
            ranks.append(json.loads(path.read_text()))
        except (OSError, json.JSONDecodeError):
            ranks.append({"rank": path.name, "status": "error", "reason": f"{path.name} is not valid JSON"})
    return ranks


def _log(test_dir: Path) -> str:
    return str(Path("hosts") / test_dir.relative_to(test_dir.parents[2]) / "launcher.log")
