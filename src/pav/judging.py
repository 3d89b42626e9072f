"""The one place a run's results are judged: the profile's gates, the gates the hosts' facts derive
(absolute and relative), GPU health from the facts, and the gates across tests (scaling).

A Judge is made once per run (stages/report.py's run_judge: the profile resolved and read once, the
hosts' facts derived once). The report judges every launch with it; isolation judges each group of hosts
it re-runs a test on with it, so a part only a derived gate catches (a slow GPU, a fabric under its RDMA
ports' rate) is named by the pairs too; `provision-and-validate judge` re-judges a recorded run with it
(Judge.rejudge). Layering: stages import this module; it imports evaluate and thresholds, never stages.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pav.evaluate import evaluate_group, evaluate_launch
from pav.launches import Launch
from pav.results import HostRecord, TestResult
from pav.slurm.record import attach_jobs
from pav.thresholds import health
from pav.thresholds.apply import Derivation, apply_derived, derive_hosts, gates_record
from pav.thresholds.gate import Gate
from pav.thresholds.profiles import Profile, auto_profile, read_profile
from pav.thresholds.scaling import add_scaling, split_gates


@dataclass(frozen=True)
class Judge:
    chosen: str  # the profile as chosen (pav_threshold_profile, --profile): gpu-correctness turns derived off
    profile: Profile  # the one it resolved to (auto: by the hosts' GPUs), every gate of it parsed
    hosts: Mapping[str, HostRecord]
    derivation: Derivation  # each GPU host's hardware and the gates it derives

    @classmethod
    def make(cls, chosen: str, hosts: Mapping[str, HostRecord], resolved: str = "") -> Judge:
        """resolved: the profile `chosen` already resolved to (a recorded run's), else resolved here."""
        name = resolved or (auto_profile([h.facts for h in hosts.values()]) if chosen == "auto" else chosen)
        return cls(chosen, read_profile(name), dict(hosts), derive_hosts(dict(hosts)))

    def gates(self, test: str, gates_of: str = "") -> tuple[list[Gate], list[Gate]]:
        """The profile's gates of a test: on what it measures, and on what needs other tests (scaling)."""
        return split_gates(self.profile.tests.get(gates_of or test, []))

    def launch(
        self, launch: Launch, run_dir: Path, lost: Mapping[str, str] | None = None
    ) -> list[TestResult]:
        """A collected launch's results: the profile's gates, its Slurm job, then the derived gates."""
        measured, _ = self.gates(launch.test, launch.gates_of)
        found = evaluate_launch(launch, run_dir, measured, self.profile.nccl_gates(launch.scope), lost)
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

    def health(self) -> list[TestResult]:
        """gpu_health of every host with NVML facts."""
        return health.health_results(dict(self.hosts))

    def scaling(self, tests: list[TestResult], due: Mapping[str, list[Gate]]) -> None:
        """The metrics that need two tests (scaling efficiency) and their gates (due: test -> gates)."""
        add_scaling(tests, dict(due))

    def gates_record(self, tests: list[TestResult]) -> dict[str, Any]:
        """results.json's `gates`."""
        return gates_record(tests, self.derivation, self.chosen)
