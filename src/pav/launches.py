"""Turn planned tests and host facts into launches: the argv each host runs, or a skip with its reason."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from pav.catalog import TestSpec
from pav.results import TestResult
from pav.settings import Settings


@dataclass
class Launch:
    test: str
    launcher: str
    timeout_s: int
    argv_by_host: dict[str, list[str]] = field(default_factory=dict)
    ranks_by_host: dict[str, int] = field(default_factory=dict)

    @property
    def hosts(self) -> list[str]:
        return list(self.argv_by_host)

    def to_var(self) -> dict[str, Any]:
        return asdict(self)


def gpu_count(facts: dict[str, Any]) -> int:
    return int(facts.get("gpu", {}).get("count", 0) or 0)


def plan_launches(
    specs: list[TestSpec], facts: dict[str, dict[str, Any]], settings: Settings
) -> tuple[list[Launch], list[TestResult]]:
    launches: list[Launch] = []
    skipped: list[TestResult] = []
    for spec in specs:
        launch = Launch(spec.name, spec.launcher, settings.test_timeout_s)
        for host, host_facts in facts.items():
            reason = _skip_reason(spec, host_facts)
            if reason:
                skipped.append(TestResult(spec.name, [host], "skipped", reason))
                continue
            procs = gpu_count(host_facts) if spec.needs_gpu else settings.cpu_procs_per_host
            launch.argv_by_host[host] = _argv(spec, procs)
            launch.ranks_by_host[host] = procs
        if launch.argv_by_host:
            launches.append(launch)
    return launches, skipped


def _skip_reason(spec: TestSpec, facts: dict[str, Any]) -> str:
    if spec.needs_gpu and gpu_count(facts) == 0:
        return "no GPU"
    return ""


def _argv(spec: TestSpec, procs: int) -> list[str]:
    out = f"results/{spec.name}"
    if spec.launcher == "nccl_tests":
        # One process driving every GPU of the host: the single-node form nccl-tests documents.
        return [*spec.args, "-g", str(procs)]
    return [
        "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(procs),
        "-m", "pav_payload", *spec.args, "--out", out, "--test-id", spec.name,
    ]  # fmt: skip
