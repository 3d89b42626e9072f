"""A run with no GPU host in the report (issue 48): the CPU flavours of the burn-in and the SDC check
(fixtures/cpu-sdc-fault: the rank reports of a real `--env local --tests fault_burn_cpu,fault_sdc_cpu
--burn-in 3s` run with PAV_FAULT_SDC_GPU=1, on a machine without a GPU) judged as the report stage judges
them. The page has no "GPUs and derived gates" heading with nothing under it, and no CPU rank is called a
GPU: not in the bad parts, the reasons, the gates or the burn-in charts of report.html, nor in summary.txt."""

from __future__ import annotations

import json
import re
from html import unescape
from pathlib import Path
from typing import Any

from pav.evaluate import summarize
from pav.reporting import bad_parts, burn_plots, gpu_grid, html, summary
from pav.results import HostRecord, RunResults, TestResult, verdict_of
from pav.thresholds.apply import apply_derived, derive_hosts

RANKS = Path(__file__).parent / "fixtures" / "cpu-sdc-fault"
# The CPU host as configure records it: no GPU.
CPU_HOST = {"gpu": {"count": 0, "devices": []}, "kernel": "6.1.0", "cpu": {"model": "x86_64"}}
A_GPU = re.compile(r"\bGPU \d")  # "GPU 1", "GPU 0 -> GPU 1": how a GPU is named


def cpu_run() -> RunResults:
    tests = []
    for name in ("fault_burn_cpu", "fault_sdc_cpu"):
        ranks = [json.loads(p.read_text()) for p in sorted(RANKS.glob(f"{name}.rank*.json"))]
        reason = "; ".join(f"rank {r['rank']}: {r['reason']}" for r in ranks if r["status"] != "pass")
        tests.append(TestResult(name, ["localhost"], "fail", reason, summarize(ranks), {}))
    hosts = {"localhost": HostRecord("localhost", "localhost", "ok", facts=CPU_HOST)}
    apply_derived(tests, derive_hosts(hosts), "cpu")
    run = RunResults("20261127T170203.471Z-local", "local", "inv", "/tmp/r", "cpu", tests=tests)
    run.hosts = hosts
    run.verdict = verdict_of(run.tests)
    return run


def test_the_cpu_ranks_are_the_bad_parts_never_a_gpu() -> None:
    found = bad_parts.find(cpu_run().to_dict())
    assert [(p.part, p.kind) for p in found] == [
        ("local rank 1 (CPU)", "rank"),
        ("local rank 0 (CPU)", "rank"),
    ]
    sdc = found[0]
    assert sdc.worst.measured.startswith("SDC: repetition 1 of 4 differs") and sdc.tests == (
        "fault_burn_cpu",
        "fault_sdc_cpu",
    )


def test_no_gpu_label_anywhere_on_the_page_or_in_the_summary(tmp_path: Path) -> None:
    run = cpu_run()
    page = html.render(run.to_dict(), tmp_path)
    text = summary.render(run)
    assert run.verdict == "FAIL"
    assert A_GPU.findall(page) == [] and A_GPU.findall(text) == []
    assert "localhost local rank 1 (CPU): SDC: " in text
    # The gate against the host's best names the best CPU rank as the rank it is.
    best = "under 0.9 x the host's best GPU (local rank 1 (CPU): 0.01521)"
    assert best in unescape(page) and best in text


def test_no_empty_gpu_heading_on_a_run_without_a_gpu_host(tmp_path: Path) -> None:
    results = cpu_run().to_dict()
    section = gpu_grid.section(results)
    assert section is not None and section.hosts == [] and section.gate_tables  # the burn-in's gates only
    page = html.render(results, tmp_path)
    assert 'id="gpus"' not in page and "GPUs and derived gates" not in page
    assert '<h2 id="gates">Derived gates of each test</h2>' in page  # the burn-in's gates stay, listed


def test_the_burn_in_charts_name_cpu_ranks() -> None:
    figures = burn_plots.burn_in_figures(cpu_run().to_dict())
    assert [f.title for f in figures][:2] == [
        "localhost · local rank 0 (CPU): bf16 GEMM TFLOP/s per window",
        "localhost · local rank 1 (CPU): bf16 GEMM TFLOP/s per window",
    ]
    assert {s.label for f in figures for s in f.legend} == {"local rank 0 (CPU)", "local rank 1 (CPU)"}


def test_an_sdc_check_records_the_device_it_ran_on() -> None:
    ranks: list[dict[str, Any]] = [json.loads(p.read_text()) for p in sorted(RANKS.glob("fault_sdc_cpu.*"))]
    metrics = summarize(ranks)
    assert {k: v["device_type"] for k, v in metrics["sdc"].items()} == {"0": "cpu", "1": "cpu"}
