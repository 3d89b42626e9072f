"""The burn-in and the SDC check through the whole pipeline on the local env, on CPU (issue 40): the CPU
flavours of gpu_burn and sdc_check (FOR TESTING, judged by the real ones' gates) with --burn-in and the
SDC fault on local rank 1, which both must FAIL naming; the series land in results.json and report.html."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli


@pytest.mark.slow  # the whole pipeline on the local env
def test_burn_in_and_sdc_fault_end_to_end_on_cpu(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    env = {"PAV_FAULT_TESTS": "1", "PAV_FAULT_SDC_GPU": "1", "PAV_STATE_DIR": str(tmp_path / "state"),
           "PAV_RESULTS_ROOT": str(tmp_path / "root")}  # fmt: skip
    run = run_cli("--env", "local", "--tests", "fault_burn_cpu,fault_sdc_cpu", "--burn-in", "3s",
                  "--run-dir", str(run_dir), env=env)  # fmt: skip
    assert run.rc == 1, run.stdout + run.stderr
    results = json.loads((run_dir / "results.json").read_text())
    tests = {t["name"]: t for t in results["tests"]}
    assert results["verdict"] == "FAIL"
    sdc, burn = tests["fault_sdc_cpu"], tests["fault_burn_cpu"]
    named = (
        "rank 1: SDC: local rank 1 (CPU): repetition 1 of 4 differs from the majority of its 4 repetitions"
    )
    assert sdc["status"] == "fail" and sdc["reason"].startswith(named)
    assert "at element 519 (row 16, column 7)" in sdc["reason"]
    assert burn["status"] == "fail" and burn["reason"].startswith(named)
    assert burn["metrics"]["sdc_mismatches"] == 2  # the checks at the burn-in's start and end
    # The series: every CPU rank's three windows, and the gates the Judge recorded on them.
    gpus = burn["metrics"]["burn_in"]["gpus"]
    assert sorted(gpus) == ["0", "1"] and [len(g["windows"]) for g in gpus.values()] == [3, 3]
    parts = {g["part"] for g in burn["threshold"]["gates"] if g.get("basis") == "burn-in"}
    assert parts == {"local rank 0 (CPU)", "local rank 1 (CPU)"}
    assert 'id="burn-in"' in (run_dir / "report.html").read_text()
    assert "local rank 1 (CPU)" in (run_dir / "summary.txt").read_text()
