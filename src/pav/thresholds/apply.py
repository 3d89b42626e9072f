"""Judge results by the derived gates, after the profile's own gates judged them.

A profile's gate on a metric overrides the derived gate on the same metric (hand-written profiles are
overrides on top of the derived gates). A GPU test whose gate cannot be derived and that no profile gate
covers is `error`, naming the missing fact: a GPU host never passes without performance gates, unless
`gpu-correctness` was chosen on purpose.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pav.catalog import is_probe, spec_of
from pav.results import HostRecord, TestResult
from pav.thresholds.burn_in import burn_in_checks
from pav.thresholds.declared import UNDECLARED, Declared, bars
from pav.thresholds.derive import (
    Derived,
    DerivedGate,
    Missing,
    NotApplicable,
    derive_fabric,
    derive_host,
    probe_gates,
)
from pav.thresholds.dips import dip_checks
from pav.thresholds.hardware import HostHardware, given_gpus, read_hardware
from pav.thresholds.references import reference_gates
from pav.thresholds.relative import relative_gates
from pav.thresholds.sdc_parts import sdc_problems
from pav.thresholds.transport import judge as judge_transport

CHOSEN_WITHOUT_GATES = "gpu-correctness"


@dataclass(frozen=True)
class Derivation:
    """Each GPU host's hardware and what it derives, worked out once per judging."""

    hardware: dict[str, HostHardware]
    per_host: dict[str, list[Derived]]
    declared: Declared = field(default_factory=Declared)  # pav_declared_hardware: the bars it set


def derive_hosts(hosts: dict[str, HostRecord], declared: Declared | None = None) -> Derivation:
    """declared: pav_declared_hardware, whose figures the bars count in place of those reported."""
    found = {
        name: bars(read_hardware(name, rec.facts), declared or Declared()) for name, rec in hosts.items()
    }
    hardware = {name: hw for name, hw in found.items() if hw.gpus}
    return Derivation(
        hardware, {name: derive_host(hw) for name, hw in hardware.items()}, declared or Declared()
    )


def apply_derived(tests: list[TestResult], derivation: Derivation, chosen_profile: str) -> None:
    """Check each of these tests against its derived gates, and a burn-in against the burn-in gates, a test
    across hosts against their fabric (NCCL's transport): those hold whatever profile was chosen, as they
    compare a GPU with itself and its host, and NCCL's choice with the hosts' setup, not with a datasheet."""
    fabrics = {name: hw.fabric for name, hw in derivation.hardware.items()}
    for test in tests:
        judge_transport(test, fabrics)
        spec = spec_of(test.name)
        if spec is None or not (spec.burn_in or spec.sdc):
            continue
        labels = _labels(test, derivation.hardware.get(test.hosts[0]) if len(test.hosts) == 1 else None)
        if spec.burn_in:
            _judge_burn_in(test, labels)
        _name_sdc_parts(test, labels)
    if chosen_profile == CHOSEN_WITHOUT_GATES:
        return
    hardware = derivation.hardware
    for test in tests:
        hw = hardware.get(test.hosts[0]) if len(test.hosts) == 1 else None
        if is_probe(test.name) and hw is not None:
            # The probe says which GPUs its host was given and keys its figures by them (given_gpus).
            hw = given_gpus(hw, test.metrics)
            _judge(test, probe_gates(hw), hw)
            continue
        found = _derived_for(test, hardware, derivation.per_host)
        members = [hardware[h] for h in test.hosts if h in hardware]
        if found or is_probe(test.name) or _references(test, members):
            _judge(test, found, hw, members)


def gates_record(tests: list[TestResult], derivation: Derivation, chosen_profile: str) -> dict[str, Any]:
    """results.json's `gates`: per GPU host, the facts the gates came from and any fact that was missing."""
    if chosen_profile == CHOSEN_WITHOUT_GATES:
        return {h: {"derived": False, "note": "no performance gates (chosen)"} for h in derivation.hardware}
    declared = derivation.declared
    bars = {"declared_hardware": declared.record(), "bars": "declared" if declared else UNDECLARED}
    return {
        name: host_record(hw, derivation.per_host[name], tests) | bars
        for name, hw in derivation.hardware.items()
    }


def host_record(hw: HostHardware, derived: list[Derived], tests: list[TestResult]) -> dict[str, Any]:
    ran = {t.name for t in tests if hw.host in t.hosts}
    missing = sorted({d.fact for d in derived if isinstance(d, Missing) and d.test in ran})
    return {"derived": True, "missing": missing, "facts_used": facts_used(hw)}


def facts_used(hw: HostHardware) -> dict[str, Any]:
    first = hw.gpus[0]
    return {
        "source": hw.source,
        "gpu_model": hw.model,
        "gpus": len(hw.gpus),
        "nvlink_links_up_min": min((g.nvlink_up for g in hw.gpus if g.nvlink_up is not None), default=None),
        "nvlink_version": first.nvlink_version,
        "pcie": f"gen{first.pcie_gen} x{first.pcie_width}" if first.pcie_gen else None,
        "rdma_ports": hw.rdma_ports,
        "rdma_gbps": hw.rdma_gbps,
    }


def _derived_for(
    test: TestResult, hardware: dict[str, HostHardware], per_host: dict[str, list[Derived]]
) -> list[Derived]:
    if len(test.hosts) == 1:
        return [d for d in per_host.get(test.hosts[0], []) if d.test == test.name]
    members = [hardware[h] for h in test.hosts if h in hardware]
    spec = spec_of(test.name)  # None: a recorded test this release does not know
    if spec is not None and spec.inter_node_metric and members:
        return [derive_fabric(members, test.name)]
    return []


def _judge(
    test: TestResult,
    derived: list[Derived],
    hw: HostHardware | None,
    members: list[HostHardware] | None = None,
) -> None:
    if test.status not in ("pass", "fail"):
        return  # skipped, or an error that left no figures to judge
    covered = _profile_metrics(test)
    gates = [d for d in derived if d.metric not in covered]
    gates += relative_gates(test.name, test.metrics, hw)
    gates += _references(test, [hw] if hw is not None else members or [])  # no profile gate overrides these
    checked = [g.check(test.metrics) for g in gates if isinstance(g, DerivedGate)]
    if is_probe(test.name):  # beside the relative gates: each GPU's host copy rounds against its own best
        checked += dip_checks(test.metrics, {g.metric_key: g.label() for g in hw.gpus} if hw else {})
    test.threshold.setdefault("gates", []).extend(checked)
    failures = [c["reason"] for c in checked if c["status"] != "pass"]
    ruled_out = [g for g in gates if isinstance(g, NotApplicable)]
    if ruled_out:
        test.threshold.setdefault("not_applicable", []).extend(g.describe() for g in ruled_out)
    missing = [g for g in gates if isinstance(g, Missing)]
    if missing:
        test.threshold["missing"] = sorted({m.fact for m in missing})
    if test.status == "pass" and missing:
        test.status = "error"
        test.reason = f"no performance gate for {missing[0].metric}: {missing[0].fact}"
        test.reason += f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
    _fail_with(test, failures)


def _references(test: TestResult, hosts: list[HostHardware]) -> list[DerivedGate | NotApplicable]:
    """A host's test: its host's references; a test across hosts of one shape: the references of that many
    such hosts (the network between them). Hosts that differ, or whose hardware is unknown: none."""
    if not hosts or len(hosts) != len(test.hosts) or len({(h.model, len(h.gpus)) for h in hosts}) != 1:
        return []
    labels = {g.metric_key: g.label() for g in hosts[0].gpus}
    return reference_gates(test.name, test.metrics, test.workload, hosts[0], labels, hosts)


def _fail_with(test: TestResult, failures: list[str]) -> None:
    """A failing gate fails a test that passed and adds its reason to the test's own."""
    if failures:
        if test.status == "pass":
            test.status, test.reason = "fail", ""
        test.reason = "; ".join([r for r in (test.reason, *failures) if r])


def _judge_burn_in(test: TestResult, labels: dict[str, str]) -> None:
    if test.status not in ("pass", "fail"):
        return  # skipped, or an error that left no series to judge
    checked = burn_in_checks(test.metrics, labels)
    test.threshold.setdefault("gates", []).extend(checked)
    _fail_with(test, [c["reason"] for c in checked if c["status"] != "pass"])


def _name_sdc_parts(test: TestResult, labels: dict[str, str]) -> None:
    """The GPU an SDC check caught, as the test's problem (the bad parts name it, not the host)."""
    if test.status != "fail":
        return
    found = sdc_problems(test.metrics, labels)
    if found:
        test.threshold["problems"] = [*test.threshold.get("problems", []), *found]


def _labels(test: TestResult, hw: HostHardware | None) -> dict[str, str]:
    """The host's GPUs as health.py names them, keyed as the test's metrics key them."""
    given = given_gpus(hw, test.metrics) if hw is not None else None
    return {g.metric_key: g.label() for g in given.gpus} if given is not None else {}


def _profile_metrics(test: TestResult) -> set[str]:
    """Metrics the profile's own gates cover: payload gates by path, nccl-tests gates by size."""
    gates = {str(g.get("metric")) for g in test.threshold.get("gates", []) if "basis" not in g}
    nccl = test.threshold.get("nccl_tests") or []
    return gates | {f"busbw_gbps.{g.get('size_bytes')}" for g in nccl}
