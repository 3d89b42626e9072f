"""results.json: the versioned record of a run. docs/results.md documents every field."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pav import __version__
from pav.hostlist import compress

SCHEMA_VERSION = "1.5"

TestStatus = Literal["pass", "fail", "skipped", "error", "interrupted"]  # interrupted: a signal cut it short
# running: on disk only while the stage runs (a record the driver never finished); killed: the reaper found
# the driver dead during it.
StageStatus = Literal["ok", "failed", "skipped", "interrupted", "running", "killed"]
# NONE: the stages run did not include validate. NOTHING RUN: every test it planned was skipped (no GPU for
# GPU tests, too few hosts): no verdict on the hardware, and not a FAIL with no bad part to name (issue 48).
Verdict = Literal["PASS", "FAIL", "ERROR", "NONE", "NOTHING RUN"]
NOTHING_RUN = "NOTHING RUN"
# The exit code of a verdict, for a run and for `judge` of its record alike (an ERROR's own error may say
# otherwise: a run's PavError carries its code).
VERDICT_EXITS: dict[str, int] = {"PASS": 0, "NONE": 0, NOTHING_RUN: 2}


def exit_of(verdict: str) -> int:
    """0 PASS (or no validate asked for), 2 NOTHING RUN (nothing measured: could not run), else 1."""
    return VERDICT_EXITS.get(verdict, 1)


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


@dataclass
class StageRecord:
    name: str
    status: StageStatus = "skipped"
    started: str | None = None
    ended: str | None = None
    detail: str = ""


@dataclass
class HostRecord:
    name: str
    address: str = ""
    # ok | failed | unreachable | unknown (never contacted) | interrupted (a signal cut configure on it)
    status: str = "unknown"
    facts: dict[str, Any] = field(default_factory=dict)
    ansible: dict[str, dict[str, int]] = field(default_factory=dict)  # stage -> ok/changed/failed counts
    changes: list[str] = field(default_factory=list)  # configure tasks that changed the host, or would have
    tuning_applied: bool = False  # False: tuning ran in check mode and `changes` lists what it would change
    change_counts: dict[str, int] = field(default_factory=dict)  # role -> its tasks in `changes`
    diffs: list[dict[str, str]] = field(default_factory=list)  # configure's file changes, unified diffs


@dataclass
class TestResult:
    __test__ = False  # not a pytest class, despite the name
    name: str
    hosts: list[str]
    status: TestStatus
    reason: str = ""
    metrics: dict[str, Any] = field(default_factory=dict)
    threshold: dict[str, Any] = field(default_factory=dict)
    artifacts: list[str] = field(default_factory=list)
    slurm: dict[str, Any] = field(default_factory=dict)  # --launcher slurm: the job (docs/results.md)
    workload: dict[str, Any] = field(
        default_factory=dict
    )  # what it measured with (pav.workload): fingerprint


@dataclass
class Action:
    """What --on-fail or --recheck did, or chose not to do, to a node (pav.marking): `actions`."""

    action: str  # slurm drain, slurm recheck, k8s taint, k8s recheck
    host: str  # the node ("" for an entry about several: `hosts`, or about the step itself)
    reason: str = ""  # the mark's reason, as the scheduler shows it
    tests: tuple[str, ...] = ()  # the tests the mark names: the ones a recheck runs
    ok: bool | None = None  # None: nothing changed (yet, or by design)
    detail: str = ""  # what happened, or what failed and the fix
    hosts: tuple[str, ...] = ()  # an entry for several nodes (those a failure across them did not name)
    cordoned_by_pav: bool | None = None  # a k8s recheck: whether the tool cordoned the node it returns

    def to_dict(self) -> dict[str, Any]:
        entry = {"action": self.action, "host": self.host}
        if self.hosts:
            entry["hosts"] = list(self.hosts)
        entry |= {"reason": self.reason, "tests": list(self.tests), "ok": self.ok, "detail": self.detail}
        if self.cordoned_by_pav is not None:
            entry["cordoned_by_pav"] = self.cordoned_by_pav
        return entry


@dataclass
class RunResults:
    run_id: str
    env: str
    inventory: str
    run_dir: str
    threshold_profile: str = ""  # the profile the run was judged by, once resolved ("" until it is)
    threshold_profile_chosen: str = ""  # as chosen (pav_threshold_profile): auto, or a profile's name
    started: str = field(default_factory=utc_now)
    ended: str | None = None
    stages: list[StageRecord] = field(default_factory=list)
    hosts: dict[str, HostRecord] = field(default_factory=dict)
    tests: list[TestResult] = field(default_factory=list)
    verdict: Verdict = "ERROR"
    error: str = ""
    # The stage that has started and not ended, written at its start: a driver killed (SIGKILL, power loss)
    # leaves a record naming the stage it died in. "" between stages and once the run ended.
    stage_in_progress: str = ""
    state_dir: str = ""  # Terraform state of a provisioning env
    destroyed: list[str] = field(default_factory=list)  # resources teardown destroyed
    cross_check: list[dict[str, Any]] = field(default_factory=list)  # payload vs nccl-tests busbw per op/size
    timing: dict[str, float] = field(default_factory=dict)  # run wall time split into tests and orchestration
    isolation: dict[str, Any] = field(default_factory=dict)  # suspect hosts and the re-runs that name them
    history: dict[str, Any] = field(default_factory=dict)  # vs earlier runs of the env (reporting/history.py)
    gates: dict[str, Any] = field(default_factory=dict)  # per GPU host: facts the derived gates came from
    ansible_time: dict[str, Any] = field(default_factory=dict)  # per playbook stage: where its time went
    exports: list[dict[str, Any]] = field(default_factory=list)  # --metrics-textfile, --pushgateway outcomes
    actions: list[Action] = field(default_factory=list)  # --on-fail, --recheck: what was done to which node
    kept_run: dict[str, str] = field(default_factory=dict)  # the run acted on (--run-dir): run_id, run_dir
    reused: str = ""  # --reuse: the run whose kept hosts this run ran on
    # What the run left up for later (--keep, or no teardown among --stages; {}: nothing): `state_dir`,
    # `resources` and `hosts` still in it, and the commands that act on them as printed: `teardown`, `reuse`.
    kept: dict[str, Any] = field(default_factory=dict)
    k8s: dict[str, Any] = field(default_factory=dict)  # --platform k8s: job_api (trainer, v1) and its kinds
    node_policy: dict[str, Any] = field(
        default_factory=dict
    )  # pav_gpu_state, pav_expected_versions as judged
    schema_version: str = SCHEMA_VERSION
    tool_version: str = field(default_factory=lambda: __version__)  # the release that ran and judged it

    def stage(self, name: str) -> StageRecord:
        for record in self.stages:
            if record.name == name:
                return record
        record = StageRecord(name)
        self.stages.append(record)
        return record

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["actions"] = [a.to_dict() for a in self.actions]
        data["summary"] = count_statuses(self.tests)
        return data

    def write(self, path: Path) -> None:
        """Write atomically so an interrupted run never leaves half a file."""
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(self.to_dict(), indent=2, sort_keys=False) + "\n")
        os.replace(tmp, path)


def count_statuses(tests: list[TestResult]) -> dict[str, int]:
    counts = {"pass": 0, "fail": 0, "skipped": 0, "error": 0, "interrupted": 0}
    for test in tests:
        counts[test.status] += 1
    return counts


def verdict_of(tests: list[TestResult]) -> Verdict:
    """PASS needs at least one passing test and no failing, erroring or interrupted one; skips never pass a
    cluster."""
    counts = count_statuses(tests)
    if counts["fail"] or counts["error"] or counts["interrupted"]:
        return "FAIL"
    return "PASS" if counts["pass"] else "NOTHING RUN"


def why_nothing_ran(tests: list[TestResult]) -> str:
    """Why a run ran nothing (NOTHING RUN), as summary.txt, report.html and `judge` say it: each skip reason
    once, with the tests it skipped (`no GPU (sdc_check, gpu_burn on box)`)."""
    by_reason: dict[str, dict[str, list[str]]] = {}
    for test in tests:
        if test.status == "skipped":
            by_hosts = by_reason.setdefault(test.reason or "no reason recorded", {})
            by_hosts.setdefault(compress(test.hosts), []).append(test.name)
    if not by_reason:
        return "no test was planned"
    said = []
    for reason, by_hosts in by_reason.items():
        skipped = "; ".join(", ".join(names) + f" on {hosts}" for hosts, names in by_hosts.items())
        said.append(f"{reason} ({skipped})")
    return "every planned test was skipped: " + "; ".join(said)


def stopped_in(record: dict[str, Any]) -> str:
    """A recorded run the driver never finished: the stage it stopped in and when that stage started, as
    one line; "" for a run that ended, or one whose record names no stage in progress (before issue 64)."""
    stage = record.get("stage_in_progress")
    if not isinstance(stage, str) or not stage:
        return ""
    started = next(
        (
            s.get("started")
            for s in record.get("stages") or []
            if isinstance(s, dict) and s.get("name") == stage
        ),
        None,
    )
    since = f" (started {started})" if started else ""
    return f"the run stopped in stage {stage}{since}: its driver was killed, or it is still running"
