"""Issue 61: on every healthy real fixture of a shape that has the part, each fault of the catalogue at the
size acceptance exists to catch FAILs naming the part, and the fixture itself PASSes (fault_catalogue.py);
and the smallest degradation each fault is caught at, per shape, is what docs/thresholds.md's sensitivity
table says (a gate loosened by 5% moves a row, and fails here).

The two results.json fixtures of 2026-11-23 (UNKNOWN_WORKLOAD) are left out: their rank files were not kept,
so what they measured with is unknown (an older probe, one process for every GPU), and no reference may
judge them; the judge says so (test_a_record_without_its_workload_meets_no_reference).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.thresholds.fault_catalogue import (
    FAULTS,
    MUST_CATCH,
    degraded,
    failing_reasons,
    judge,
    record_of,
    sensitivity,
    sensitivity_row,
)
from tests.thresholds.test_real_gpu_runs import HEALTHY

# Judging ~30 edited records a fixture, and the sweep's ~900: the full suite's (no process is started).
pytestmark = pytest.mark.slow
DOC = Path(__file__).parents[2] / "docs" / "thresholds.md"
UNKNOWN_WORKLOAD = ("h100-1gpu-healthy.json", "h200-1gpu-healthy.json")
FIXTURES_JUDGED = [run.fixture for run in HEALTHY if run.fixture not in UNKNOWN_WORKLOAD]


def applicable(fixture: str) -> list[str]:
    return [name for name, fault in FAULTS.items() if fault.applies(record_of(fixture))]


def test_the_catalogue_reaches_every_family() -> None:
    """Each fault applies to at least one healthy fixture: a family no fixture has is no proof."""
    assert {name for fixture in FIXTURES_JUDGED for name in applicable(fixture)} == set(FAULTS)


@pytest.mark.parametrize("fixture", FIXTURES_JUDGED)
def test_each_fault_fails_naming_the_part(fixture: str, tmp_path: Path) -> None:
    healthy = judge(record_of(fixture), tmp_path / "healthy")
    assert healthy.verdict == "PASS", failing_reasons(healthy)
    for fault in applicable(fixture):
        record, part = degraded(fixture, FAULTS[fault], MUST_CATCH[fault])
        found = judge(record, tmp_path / fault)
        reasons = failing_reasons(found)
        assert found.verdict == "FAIL", f"{fault} x{MUST_CATCH[fault]:.3f} passed {fixture}"
        assert any(part in reason for reason in reasons), (fault, part, reasons)


@pytest.mark.parametrize("fault", list(FAULTS))
def test_the_sensitivity_table_is_what_the_gates_catch(fault: str, tmp_path: Path) -> None:
    rows = [
        sensitivity_row(FAULTS[fault], *found)
        for found in sensitivity(FIXTURES_JUDGED, FAULTS[fault], tmp_path)
    ]
    documented = [line for line in DOC.read_text().splitlines() if line.startswith(f"| {fault} |")]
    assert documented == rows, "refresh docs/thresholds.md with scripts/fault-sensitivity"


@pytest.mark.parametrize("fixture", UNKNOWN_WORKLOAD)
def test_a_record_without_its_workload_meets_no_reference(fixture: str, tmp_path: Path) -> None:
    found = judge(record_of(fixture), tmp_path)
    probe = next(r.test for r in found.tests if r.test.name == "gpu_probe")
    assert not [g for g in probe.threshold["gates"] if g.get("basis") == "reference"]
    why = [
        n["not_applicable"] for n in probe.threshold.get("not_applicable", []) if n["metric"] == "reference"
    ]
    assert why and why[0].startswith("no reference for this workload (not recorded) on NVIDIA H"), why
