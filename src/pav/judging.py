"""The one place a run's results are judged: the profile's gates, the gates the hosts' facts derive
(absolute and relative), GPU health from the facts, and the gates across tests (scaling).

A Judge is made once per run (stages/report.py's run_judge: the profile resolved and read once, the
hosts' facts derived once). The report judges every launch with it; isolation judges each group of hosts
it re-runs a test on with it, so a part only a derived gate catches (a slow GPU, a fabric under its RDMA
ports' rate) is named by the pairs too; `provision-and-validate judge` re-judges a recorded run with it
(Judge.rejudge). Layering: stages import this module; it imports evaluate and thresholds, never stages.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from pav import catalog
from pav.evaluate import NO_THRESHOLD, evaluate_group, evaluate_launch, gate_failures
from pav.launch import Launch
from pav.nccl_tests.grade import grade
from pav.nccl_tests.parse import NcclLog, Placement, Row
from pav.results import HostRecord, TestResult
from pav.slurm.record import attach_jobs, name_job_in_reason
from pav.thresholds import counters, health, leftovers, versions
from pav.thresholds.apply import (
    CHOSEN_WITHOUT_GATES,
    Derivation,
    apply_derived,
    derive_hosts,
    gates_record,
)
from pav.thresholds.fleet import fleet_gates, straggler_gates
from pav.thresholds.gate import Gate
from pav.thresholds.node_policy import NodePolicy
from pav.thresholds.profiles import Profile, auto_profile, read_profile
from pav.thresholds.scaling import DERIVED, add_scaling, floor_of, split_gates
from pav.workload import declared, differs

# How a re-judged test got its status: today's gates judged its measurements; it kept the outcome it was
# recorded with (skipped, or decided before any gate: an error, a rank's failure, a timeout); or it is a
# result of the facts alone (gpu_health).
How = Literal["gates", "recorded", "facts"]
# The results Judge.health gives: a recorded run's are judged anew from its facts, not kept.
FROM_FACTS_ANEW = (health.NAME, counters.NAME, versions.NAME)


@dataclass(frozen=True)
class Rejudged:
    test: TestResult
    recorded: TestResult | None  # None: a result the facts give (gpu_health), judged anew
    how: How


@dataclass(frozen=True)
class Judge:
    chosen: str  # the profile as chosen (pav_threshold_profile, --profile): gpu-correctness turns derived off
    profile: Profile  # the one it resolved to (auto: by the hosts' GPUs), every gate of it parsed
    hosts: Mapping[str, HostRecord]
    derivation: Derivation  # each GPU host's hardware and the gates it derives
    policy: NodePolicy = field(default_factory=NodePolicy)  # expected GPU state and software versions

    @classmethod
    def make(
        cls,
        chosen: str,
        hosts: Mapping[str, HostRecord],
        resolved: str = "",
        platform: str = "hosts",
        policy: NodePolicy | None = None,
    ) -> Judge:
        """resolved: the profile `chosen` already resolved to (a recorded run's), else resolved here."""
        facts = [h.facts for h in hosts.values()]
        name = resolved or (auto_profile(facts, platform) if chosen == "auto" else chosen)
        policy = policy or NodePolicy()
        derived = derive_hosts(dict(hosts), policy.declared)
        return cls(chosen, read_profile(name), dict(hosts), derived, policy)

    def gates(self, test: str, gates_of: str = "") -> tuple[list[Gate], list[Gate]]:
        """The profile's gates of a test: on what it measures, and on what needs other tests (scaling)."""
        return split_gates(self.profile.tests.get(gates_of or test, []))

    def launch(
        self, launch: Launch, run_dir: Path, lost: Mapping[str, str] | None = None, cut: str = ""
    ) -> list[TestResult]:
        """A collected launch's results: the profile's gates, its Slurm job, then the derived gates. cut:
        the signal that stopped the run, if one did (evaluate_launch)."""
        measured, _ = self.gates(launch.test, launch.gates_of)
        found = evaluate_launch(launch, run_dir, measured, self.profile.nccl_gates(launch.scope), lost, cut)
        found = attach_jobs(found, launch, run_dir)
        self.derived(found)
        return found

    def group(self, launch: Launch, hosts: list[str], run_dir: Path, test: str) -> TestResult:
        """A re-run of `test` on some of its hosts (isolation's groups of one launch), judged as the test
        itself is: its profile gates, and the gates these hosts' facts derive (the fabric between them)."""
        measured, _ = self.gates(test, launch.gates_of)
        found = evaluate_group(launch, hosts, hosts, run_dir, measured, self.profile.nccl_gates(launch.scope))
        judged = replace(found, name=test)
        self.derived([judged])
        return judged

    def derived(self, tests: list[TestResult]) -> None:
        """The derived and relative gates, under the profile's own (chosen gpu-correctness: none)."""
        apply_derived(tests, self.derivation, self.chosen)
        if self.chosen != CHOSEN_WITHOUT_GATES:
            fleet_gates(tests, self.derivation.hardware)
        # Only FOR TESTING ranks measure a per-host step (pav.thresholds.fleet.IN_TEST): a fault's subject,
        # judged under every profile as its wrong_total is.
        straggler_gates(tests)

    def health(self) -> list[TestResult]:
        """The results of the facts alone: gpu_health of every host with NVML facts (its state against the
        policy included), error_counters of every host read before and after the tests, software_versions
        across the run's hosts."""
        hosts = dict(self.hosts)
        out = health.health_results(hosts, self.policy)
        return out + counters.counters_results(hosts) + versions.versions_results(hosts, self.policy)

    def scaling(self, tests: list[TestResult], due: Mapping[str, list[Gate]]) -> None:
        """The metrics that need two tests (scaling efficiency) and their gates (due: test -> the profile's;
        where it has none, the bound the host's own figures set, unless gpu-correctness was chosen)."""
        floors = {
            host: floor for host, gates in self.derivation.per_host.items() if (floor := floor_of(gates))
        }
        add_scaling(tests, dict(due), self.chosen != CHOSEN_WITHOUT_GATES, floors)

    def gates_record(self, tests: list[TestResult]) -> dict[str, Any]:
        """results.json's `gates`."""
        return gates_record(tests, self.derivation, self.chosen)

    # --- a recorded run ---------------------------------------------------------------------------------

    def rejudge(self, recorded: list[TestResult], run_dir: Path | None, validated: bool) -> list[Rejudged]:
        """A recorded run's tests judged by this Judge's gates, in their recorded order.

        Only a test whose outcome its gates decided is judged again (explained_by_gates; and, where run_dir
        holds its raw results, measured_ok on them): from those raw results through evaluate, else from its
        recorded metrics. Any other test keeps its recorded outcome. gpu_health is judged anew from the
        facts where the run validated (validated); scaling follows, as in the report.
        """
        out: list[Rejudged] = []
        due: dict[str, list[Gate]] = {}
        for rec in recorded:
            if rec.name in FROM_FACTS_ANEW:
                continue
            judged = self._again(rec, run_dir)
            if judged is None:
                out.append(Rejudged(copy.deepcopy(rec), rec, "recorded"))
                continue
            spec = catalog.spec_of(rec.name)
            due[rec.name] = self.gates(rec.name, spec.gates_of if spec else "")[1]
            if _noted_workload(judged):
                due[rec.name] = [g for g in due[rec.name] if not is_throughput(g.metric)]
            out.append(Rejudged(judged, rec, "gates"))
        self.derived([r.test for r in out if r.how == "gates"])
        if validated:
            out += [Rejudged(t, None, "facts") for t in self.health()]
        self.scaling([r.test for r in out], due)
        return out

    def _again(self, rec: TestResult, run_dir: Path | None) -> TestResult | None:
        """The test judged by today's profile gates, or None where its recorded outcome must stand (as
        gpu_leftovers' does: the GPUs' processes when the tests were to start, decided before any test)."""
        if rec.name == leftovers.NAME or not explained_by_gates(rec):
            return None
        spec = catalog.spec_of(rec.name)
        launch = recorded_launch(rec, spec, run_dir) if run_dir is not None and spec else None
        if launch is None or run_dir is None:
            return self._from_metrics(rec, spec)
        raw = evaluate_group(launch, launch.hosts, rec.hosts, run_dir, [], {})
        if not measured_ok(raw, launch):
            return None
        measured, _ = self.gates(rec.name, launch.gates_of)
        nccl = self.profile.nccl_gates(launch.scope)
        note = changed_workload(raw.workload or rec.workload, spec)
        if note:
            measured, nccl = [g for g in measured if not is_throughput(g.metric)], {}
        found = evaluate_group(launch, launch.hosts, rec.hosts, run_dir, measured, nccl)
        return _noted(attach_jobs([found], launch, run_dir)[0], note)

    def _from_metrics(self, rec: TestResult, spec: catalog.TestSpec | None) -> TestResult:
        """The recorded metrics (those measured; scaling is worked out again) under today's profile gates."""
        metrics = {k: v for k, v in rec.metrics.items() if k not in DERIVED}
        result = TestResult(rec.name, list(rec.hosts), "pass", "", metrics, artifacts=list(rec.artifacts))
        result.slurm = dict(rec.slurm)
        result.workload = dict(rec.workload)
        note = changed_workload(rec.workload, spec)
        if "nccl_tests" in rec.threshold:
            scope = spec.scope if spec else ("cluster" if len(rec.hosts) > 1 else "host")
            gates = {} if note else self.profile.nccl_gates(scope)
            log = nccl_log(metrics)
            graded = grade(log, gates)
            result.threshold = {"nccl_tests": [g.nccl_record() for g in gates.get(log.op or "", [])]}
            result.status, result.reason = graded.status, "" if graded.status == "pass" else graded.reason
        else:
            gates, _ = self.gates(rec.name, spec.gates_of if spec else "")
            gates = [g for g in gates if not is_throughput(g.metric)] if note else gates
            failures = gate_failures(metrics, gates)
            result.threshold = {"gates": [g.describe() for g in gates]}
            result.status, result.reason = ("fail" if failures else "pass"), "; ".join(failures)
        if result.slurm:
            name_job_in_reason(result, result.slurm)
        return _noted(result, note)


def changed_workload(workload: dict[str, Any], spec: catalog.TestSpec | None) -> str:
    """Why a recorded test's throughput is judged by no gate of this release's workload: it recorded none
    (a results.json of before 1.4 whose ranks' files are not kept), or it ran with other parameters than
    today's catalog sets (`batch_size 64, now 256`); "" where it ran today's workload. A gate for one
    workload judging another's figure is a regression alarm that is not one (issue 64)."""
    if spec is None or spec.launcher not in ("torchrun", "nccl_tests"):
        return ""
    params = workload.get("params") if isinstance(workload, dict) else None
    if not isinstance(params, dict) or not params:
        return "the record names no workload (recorded before results.json 1.4, its rank files not kept)"
    changes = differs(params, declared(spec.args, spec.launcher))
    return f"recorded with {', '.join(changes)} in this release's workload" if changes else ""


def _noted(result: TestResult, note: str) -> TestResult:
    if note:
        why = f"{note}: its throughput is judged by no gate of this release's workload"
        result.threshold.setdefault("not_applicable", []).append(
            {"metric": "workload", "not_applicable": why}
        )
    return result


THROUGHPUT = re.compile(
    r"^(tokens_per_s|samples_per_s|busbw_gbps|time_us|scaling_efficiency|avg_busbw)|_gbps|_tflops"
)


def is_throughput(metric: str) -> bool:
    """A figure of speed, whose gate belongs to one workload; correctness gates (wrong_total, loss_ratio,
    replicas_equal, sdc_mismatches) hold whatever it ran."""
    return THROUGHPUT.search(metric) is not None


def _noted_workload(judged: TestResult) -> bool:
    """Whether judging it again found another workload (_noted recorded why): its scaling gates go too."""
    return any(n.get("metric") == "workload" for n in judged.threshold.get("not_applicable") or [])


def explained_by_gates(rec: TestResult) -> bool:
    """Whether a recorded outcome is what the gates it records give its recorded metrics: a pass, or a fail
    (or the error of a gate that could not be derived) whose whole reason those gates produce, in the order
    the report joins them (profile gates, then derived gates; scaling gates on a test that passed both).
    Anything else was decided before any gate: an error, a rank's failure, wrong bytes, a timeout, a
    failed Slurm job (its reason names the job first)."""
    if rec.status == "pass":
        return True
    if rec.status not in ("fail", "error"):
        return False
    recorded = [g for g in rec.threshold.get("gates") or [] if isinstance(g, dict)]
    if "nccl_tests" in rec.threshold:
        busbw = [_busbw_gate(g) for g in rec.threshold.get("nccl_tests") or [] if isinstance(g, dict)]
        op = rec.metrics.get("op")
        graded = grade(nccl_log(rec.metrics), {str(op): busbw} if op and busbw else {})
        reasons = [graded.reason] if graded.status == "fail" else []
    else:
        profile = [_gate(g) for g in recorded if "basis" not in g]
        reasons = gate_failures(rec.metrics, [g for g in profile if g.metric not in DERIVED])
    derived = [str(g.get("reason", "")) for g in recorded if "basis" in g and g.get("status") != "pass"]
    if reasons:
        return rec.status == "fail" and rec.reason == "; ".join([*reasons, *derived])
    missing = rec.threshold.get("missing") or []
    if missing:
        tail = "".join(f"; {d}" for d in derived)
        head = rec.reason[: len(rec.reason) - len(tail)] if rec.reason.endswith(tail) else ""
        return rec.status == "error" and any(_names_missing(head, str(fact)) for fact in missing)
    if derived:
        return rec.status == "fail" and rec.reason == "; ".join(derived)
    scaling = [_gate(g) for g in recorded if "basis" not in g and str(g.get("metric")) in DERIVED]
    failures = [reason for gate in scaling if (reason := gate.check(rec.metrics))]
    return bool(failures) and rec.status == "fail" and rec.reason == "; ".join(failures)


def recorded_launch(rec: TestResult, spec: catalog.TestSpec, run_dir: Path) -> Launch | None:
    """The launch evaluate needs to read a recorded test's raw results again, where run_dir holds them:
    the hosts with a results folder of the test (each host of a torchrun launch; the first, which started
    it, of mpirun, nccl-tests across hosts and Slurm jobs), expecting the ranks the run recorded."""
    hosts = [h for h in rec.hosts if (run_dir / "hosts" / h / "results" / rec.name).is_dir()]
    ranks = rec.metrics.get("ranks_reported")
    if not hosts or (spec.launcher != "nccl_tests" and not isinstance(ranks, int)):
        return None
    argv = [spec.args[0]] if spec.launcher == "nccl_tests" and spec.args else [spec.launcher]
    return Launch(
        rec.name, spec.launcher, spec.scope, 0, argv_by_host={h: list(argv) for h in hosts},
        ranks_by_host={hosts[0]: ranks if isinstance(ranks, int) else 0}, members=list(rec.hosts),
        gates_of=spec.gates_of,
    )  # fmt: skip


def measured_ok(result: TestResult, launch: Launch) -> bool:
    """Whether a launch judged without gates got as far as its gates: every host's launcher exit code,
    every rank's report, nccl-tests' correctness. Without gates a payload test fails with NO_THRESHOLD
    exactly when it got there; nccl-tests grades correctness alone."""
    if launch.launcher == "nccl_tests":
        return result.status == "pass"
    return result.status == "fail" and result.reason == NO_THRESHOLD


def nccl_log(metrics: Mapping[str, Any]) -> NcclLog:
    """A recorded nccl-tests result as the log grade() reads: its collective and each size's busbw (the
    run's correctness was graded then; here only the gates are)."""
    busbw = metrics.get("busbw_gbps")
    rows = [
        Row(int(size), 0, "", None, None, Placement(None, None, _number(value)), None)
        for size, value in (busbw.items() if isinstance(busbw, dict) else ())
        if str(size).isdigit()
    ]
    op = metrics.get("op")
    return NcclLog("results.json", "json", op=str(op) if op else None, rows=rows, finished=True)


def _names_missing(reason: str, fact: str) -> bool:
    """apply.py's reason for a test whose gate could not be derived."""
    pattern = rf"no performance gate for \S+: {re.escape(fact)}(?: \(and \d+ more\))?"
    return re.fullmatch(pattern, reason) is not None


def _gate(raw: Mapping[str, Any]) -> Gate:
    return Gate(str(raw.get("metric")), _number(raw.get("min")), _number(raw.get("max")))


def _busbw_gate(raw: Mapping[str, Any]) -> Gate:
    size = raw.get("size_bytes")
    return Gate.busbw(int(size) if isinstance(size, int) else 0, _number(raw.get("min_busbw_gbps")) or 0.0)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def chosen_profile(recorded: str, gates: Mapping[str, Any]) -> str:
    """What a recorded run chose, from what it recorded: the resolved profile, and `gates`, whose hosts say
    derived: false only where gpu-correctness was chosen (auto resolving to it keeps the derived gates)."""
    off = any(isinstance(g, Mapping) and g.get("derived") is False for g in gates.values())
    return recorded if off or recorded != CHOSEN_WITHOUT_GATES else "auto"
