"""judge RUN_DIR|results.json [--profile NAME] [--json] [--metrics-textfile DIR [--replace-newer]]
[--pushgateway URL]: a recorded run judged again by this release's gates, and its metrics exported again as
it recorded them.

Each test's measurements against today's profile gates and the gates the recorded host facts derive;
gpu_health from the facts; scaling. A test whose outcome its gates did not decide (an error, a rank's
failure, wrong bytes, a timeout, a failed job) keeps it as recorded (pav.judging.Judge.rejudge).
Exit 0 PASS, 1 FAIL (or a run that could not finish), 2 NOTHING RUN (as the run itself exited: every test
skipped; the skip reasons are printed) or bad input: one `error:` line, also for a textfile
that holds a newer run's metrics (without --replace-newer). A failed export is a `metrics: ... FAILED` line
(or an `exports` entry of --json), never the exit code.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pav.errors import PavError
from pav.hostlist import compress
from pav.judging import Judge, Rejudged, chosen_profile
from pav.reporting import metrics_export, pushgateway
from pav.results import (
    NOTHING_RUN,
    HostRecord,
    TestResult,
    count_statuses,
    exit_of,
    stopped_in,
    verdict_of,
    why_nothing_ran,
)
from pav.secrets.basic_auth import BasicAuth
from pav.thresholds.node_policy import recorded_policy
from pav.thresholds.profiles import known_profiles, profile_path

STATUSES = ("pass", "fail", "skipped", "error", "interrupted")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "run", type=Path, metavar="RUN_DIR|results.json",
        help="a run dir (its raw host results are read again too) or a results.json",
    )  # fmt: skip
    parser.add_argument(
        "--profile", metavar="NAME",
        help="judge by thresholds/NAME.yml (or auto: by the recorded GPUs) instead of the run's own profile",
    )  # fmt: skip
    parser.add_argument("--json", action="store_true", help="print one JSON object (docs/thresholds.md)")
    parser.add_argument(
        "--metrics-textfile", type=Path, metavar="DIR",
        help="write the recorded run's metrics (its results.json as recorded, not the new judgement) to "
        "DIR/pav-ENV.prom for node_exporter, as the run itself does (written, then renamed); refused where "
        "that file holds a newer run's metrics",
    )  # fmt: skip
    parser.add_argument(
        "--replace-newer", action="store_true",
        help="with --metrics-textfile: write the recorded run's metrics even over a newer run's",
    )  # fmt: skip
    parser.add_argument(
        "--pushgateway", metavar="URL",
        help="push the recorded run's metrics (as recorded) to this Prometheus pushgateway, as the run does "
        f"(basic auth: {pushgateway.AUTH_ENV}=USER:PASSWORD or --pushgateway-auth-file, never the URL)",
    )  # fmt: skip
    parser.add_argument(
        "--pushgateway-auth-file", type=Path, metavar="FILE",
        help="the pushgateway's basic auth: a file holding USER:PASSWORD that only its owner can read "
        f"(default ${pushgateway.AUTH_FILE_ENV})",
    )  # fmt: skip


@dataclass(frozen=True)
class Rejudgement:
    file: Path  # the results.json read
    run_id: str
    profile: str  # the profile judged by
    recorded_profile: str
    recorded_verdict: str
    verdict: str  # PASS, FAIL, or ERROR where the run could not finish (error)
    error: str
    tests: list[Rejudged]
    gates: dict[str, Any]  # results.json's `gates`, as this release derives them

    def results(self) -> list[TestResult]:
        return [r.test for r in self.tests]

    def why_nothing_ran(self) -> str:
        """Why nothing ran, for a NOTHING RUN; "" for any other verdict."""
        return why_nothing_ran(self.results()) if self.verdict == NOTHING_RUN else ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": str(self.file),
            "run_id": self.run_id,
            "profile": self.profile,
            "recorded_profile": self.recorded_profile,
            "verdict": self.verdict,
            "recorded_verdict": self.recorded_verdict,
            "error": self.error,
            "nothing_run": self.why_nothing_ran(),
            "summary": count_statuses(self.results()),
            "tests": [_test_record(r) for r in self.tests],
        }


def run(args: argparse.Namespace) -> int:
    try:
        auth = pushgateway.credentials(args.pushgateway, args.pushgateway_auth_file, os.environ)
        found = rejudge(args.run, args.profile)
        if args.metrics_textfile is not None and not args.replace_newer:
            refuse_older(found.file, args.metrics_textfile)
    except PavError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    exports = reexport(found.file, args.metrics_textfile, args.pushgateway, auth)
    if args.json:
        extra = {"exports": [e.to_dict() for e in exports]} if exports else {}
        print(json.dumps(found.to_dict() | extra, indent=2))
    else:
        print(render(found), end="")
        for e in exports:
            print(f"metrics: {e.to} {e.where}{'' if e.ok else ' FAILED'}: {e.detail}")
    return exit_of(found.verdict)  # as the run's own exit: 2 for NOTHING RUN


def reexport(
    file: Path, textfile: Path | None, url: str | None, auth: BasicAuth | None = None
) -> list[metrics_export.Export]:
    """The recorded run's metrics as it recorded them (its verdict, its time): a textfile or a push that
    was lost, sent again. The new judgement is printed, never exported: the record is the run's."""
    if textfile is None and url is None:
        return []
    return metrics_export.export(_read(file), textfile, url, auth)


def refuse_older(file: Path, textfile: Path) -> None:
    """node_exporter serves whatever DIR/pav-ENV.prom holds as the env's latest run: its alerts page on its
    verdict (PavVerdictNotPass, PavHostFailed) and fall silent on its end time (PavNoRecentRun). An older
    run written over a newer one would bring back a FAIL already repaired, or silence one still there, and
    nothing on the dashboard would say so. Refused, not skipped: the command was asked to export, and a
    skip that exits 0 or 1 as the verdict would let a script (or its user) believe the export was sent
    again. --replace-newer writes it all the same; another DIR keeps both."""
    recorded = _read(file)
    newer = metrics_export.newer_in_textfile(textfile, recorded)
    if newer is None:
        return
    mine = str(recorded.get("run_id") or "?")
    raise PavError(
        f"--metrics-textfile: {newer.path} holds the metrics of run {newer.run_id}, newer than run {mine}: "
        "node_exporter would serve the older run as the latest; pass --replace-newer to replace them anyway, "
        "or another --metrics-textfile DIR"
    )


def rejudge(path: Path, profile: str | None = None) -> Rejudgement:
    """A run dir (or its results.json) judged by this release's gates; PavError on bad input."""
    file, run_dir = _locate(path)
    data = _read(file)
    try:
        tests = [_test(raw) for raw in data["tests"]]
        hosts = {str(n): _host(str(n), h) for n, h in data["hosts"].items()}
        gates = data.get("gates") or {}
        stages = [s.get("name") for s in data.get("stages") or [] if isinstance(s, dict)]
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise _unreadable(file, f"{type(exc).__name__}: {exc}") from None
    recorded = str(data.get("threshold_profile") or "")
    as_chosen = str(data.get("threshold_profile_chosen") or "")
    chosen, resolved = _profile(file, profile, recorded, as_chosen, gates if isinstance(gates, dict) else {})
    validated = "validate" in stages if stages else bool(tests)
    # A driver killed mid-run (SIGKILL, power loss) left a record naming the stage it was in (issue 64).
    error = str(data.get("error") or "") or stopped_in(data)
    if not tests and not validated:
        why = f": {error}" if error else ""
        raise PavError(f"{file} holds no test results to judge (the run did not validate{why})")
    judge = Judge.make(chosen, hosts, resolved, policy=recorded_policy(data.get("node_policy")))
    judged = judge.rejudge(tests, run_dir, validated)
    results = [r.test for r in judged]
    return Rejudgement(
        file, str(data.get("run_id") or ""), judge.profile.name, recorded, str(data.get("verdict") or ""),
        "ERROR" if error else verdict_of(results), error, judged, judge.gates_record(results),
    )  # fmt: skip


def _locate(path: Path) -> tuple[Path, Path | None]:
    """The results.json to read and the run dir whose raw host results (hosts/HOST/results/) go with it."""
    if path.is_dir():
        file = path / "results.json"
        if not file.is_file():
            raise PavError(f"{path} holds no results.json; pass a run dir or its results.json")
        return file, path
    return path, (path.parent if path.name == "results.json" else None)


def _read(file: Path) -> dict[str, Any]:
    try:
        data = json.loads(file.read_text())
    except OSError as exc:
        raise _unreadable(file, exc.strerror or str(exc)) from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _unreadable(file, str(exc)) from None
    if not isinstance(data, dict) or not isinstance(data.get("tests"), list):
        raise _unreadable(file, "no 'tests' list")
    if not isinstance(data.get("hosts"), dict):
        raise _unreadable(file, "no 'hosts' mapping")
    return data


def _unreadable(file: Path, why: str) -> PavError:
    return PavError(f"cannot read {file} as results.json ({why}); pass a run dir or its results.json")


def _host(name: str, raw: Any) -> HostRecord:
    facts = (raw or {}).get("facts") or {}
    if not isinstance(facts, dict):
        raise TypeError(f"host {name}: facts are {type(facts).__name__}, not an object")
    return HostRecord(name, facts=facts)


def _test(raw: Any) -> TestResult:
    if not isinstance(raw, dict):
        raise TypeError(f"a test is {type(raw).__name__}, not an object")
    name, status = str(raw["name"]), raw.get("status")
    if status not in STATUSES:
        raise ValueError(f"test {name}: status {status!r} is not one of {', '.join(STATUSES)}")
    return TestResult(
        name, [str(h) for h in raw.get("hosts") or []], status, str(raw.get("reason") or ""),
        dict(raw.get("metrics") or {}), dict(raw.get("threshold") or {}), list(raw.get("artifacts") or []),
        dict(raw.get("slurm") or {}), dict(raw.get("workload") or {}),
    )  # fmt: skip


def _profile(
    file: Path, asked: str | None, recorded: str, as_chosen: str, gates: dict[str, Any]
) -> tuple[str, str]:
    """The profile as chosen (what turns the derived gates off) and what it resolved to ("": resolve it).
    A run records both (threshold_profile_chosen, threshold_profile); one recorded before it did records
    the resolved one only, and what it chose is read from its gates (chosen_profile)."""
    if asked:
        if asked != "auto":
            profile_path(asked, asked_by="--profile")
        return asked, ""
    if not recorded and as_chosen:  # the run never reached a judging: its choice was not resolved
        return as_chosen, ""
    if not recorded:
        raise PavError(f"{file} records no threshold_profile; pass --profile NAME")
    if recorded == "auto":  # a run of an earlier release that never reached a judging
        return "auto", ""
    try:
        profile_path(recorded)
    except PavError:
        known = ", ".join(known_profiles())
        raise PavError(
            f"{file} was judged by threshold profile '{recorded}', which this release does not have; "
            f"pass --profile NAME (known: auto, {known})"
        ) from None
    return as_chosen or chosen_profile(recorded, gates), recorded


def render(found: Rejudgement) -> str:
    profile = found.profile
    if found.profile != found.recorded_profile:
        profile += f" (recorded: {found.recorded_profile or 'none'})"
    lines = [
        f"== {found.file}",
        f"   run {found.run_id or '?'}, profile {profile}: {found.verdict} "
        f"(recorded {found.recorded_verdict or 'none'})",
    ]
    if found.error:
        lines.append(f"   the run could not finish: {found.error}")
    if found.why_nothing_ran():
        lines.append(f"   nothing was run: {found.why_nothing_ran()}")
    for item in found.tests:
        test, was = item.test, item.recorded
        changed = was is not None and was.status != test.status
        if test.status not in ("fail", "error", "interrupted") and not changed:
            continue
        note = " (as recorded: not decided by gates)" if item.how == "recorded" else ""
        note += f" (recorded {was.status})" if changed and was is not None else ""
        reason = f": {test.reason}" if test.reason else ""
        lines.append(f"   {test.status.upper()} {test.name} on {compress(test.hosts)}{note}{reason}")
    lines += _workload_lines(found)
    counts = count_statuses([r.test for r in found.tests])
    shown = [(status, n) for status, n in counts.items() if n or status != "interrupted"]
    lines.append("   " + ", ".join(f"{n} {status}" for status, n in shown))
    return "\n".join(lines) + "\n"


def _workload_lines(found: Rejudgement) -> list[str]:
    """Each test whose workload is not this release's, once: its throughput met no gate of today's."""
    notes: dict[str, list[str]] = {}
    for item in found.tests:
        for entry in item.test.threshold.get("not_applicable") or []:
            if isinstance(entry, dict) and entry.get("metric") == "workload":
                notes.setdefault(str(entry.get("not_applicable")), []).append(item.test.name)
    return [f"   WORKLOAD {', '.join(dict.fromkeys(names))}: {why}" for why, names in notes.items()]


def _test_record(item: Rejudged) -> dict[str, Any]:
    test = item.test
    return {
        "name": test.name,
        "hosts": test.hosts,
        "status": test.status,
        "reason": test.reason,
        "recorded_status": item.recorded.status if item.recorded is not None else None,
        "judged": item.how,
    }
