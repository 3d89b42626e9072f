"""The burn-in in the report (issue 40): a chart per GPU of its TFLOP/s per window with its gate, the host's
clocks and temperatures; summary.txt and report.html lead with the GPU that fell and the minute; the
metrics export its last window and lowest clock."""

from __future__ import annotations

from pathlib import Path

import pytest

from pav.reporting import bad_parts, burn_plots, exposition, html, metrics, summary
from pav.results import HostRecord, RunResults, verdict_of
from tests.report.prom import one, parse
from tests.thresholds.test_burn_in import HOG_FROM_MINUTE_3, STEADY, judged, rank_report
from tests.thresholds.test_derive import hgx

GPU1 = "GPU 1 (00000000:28:00.0, GPU-0001-uuid)"


def run_of(*series: list[float]) -> RunResults:
    test = judged(*(rank_report(i, s) for i, s in enumerate(series)))
    run = RunResults("r1", "local", "inv", "/tmp/r1", "gpu-correctness", tests=[test])
    run.hosts = {"gpu-1": HostRecord("gpu-1", status="ok", facts=hgx(len(series)))}
    run.verdict = verdict_of(run.tests)
    return run


def test_a_chart_per_gpu_and_the_hosts_clock_and_temperature() -> None:
    figures = burn_plots.burn_in_figures(run_of(STEADY, HOG_FROM_MINUTE_3).to_dict())
    titles = [f.title for f in figures]
    assert titles == [
        "gpu-1 · GPU 0: bf16 GEMM TFLOP/s per window",
        "gpu-1 · GPU 1: bf16 GEMM TFLOP/s per window",
        "gpu-1 · gpu_burn: lowest SM clock per window",
        "gpu-1 · gpu_burn: highest temperature per window",
    ]
    gpu1 = figures[1]
    assert gpu1.legend[0].label == GPU1
    assert gpu1.legend[0].points[-1] == (5.0, 391.0)  # the last window ends at minute 5
    assert "gate 0.9 x first window" in gpu1.svg and gpu1.svg.count("<circle") == 10
    assert [s.label for s in figures[2].legend] == ["GPU 0 (00000000:18:00.0, GPU-0000-uuid)", GPU1]


def test_report_html_has_the_burn_in_section(tmp_path: Path) -> None:
    page = html.render(run_of(STEADY, HOG_FROM_MINUTE_3).to_dict(), tmp_path)
    assert '<h2 id="burn-in">Burn-in</h2>' in page
    assert page.count('<svg class="chart"') >= 4
    assert "first below it at minute 3" in page


def test_no_burn_in_no_section(tmp_path: Path) -> None:
    run = RunResults("r1", "local", "inv", "/tmp/r1", "cpu")
    assert 'id="burn-in"' not in html.render(run.to_dict(), tmp_path)


def test_the_summary_leads_with_the_gpu_that_fell_and_the_minute() -> None:
    run = run_of(STEADY, HOG_FROM_MINUTE_3)
    [part] = bad_parts.find(run.to_dict())
    assert (part.kind, part.part, part.tests) == ("gpu", GPU1, ("gpu_burn",))
    # Its worst figure: against its own first window, the gate whose reason names the minute it fell; the
    # line names the GPU once (the part), not again in the figure.
    assert part.worst.text().startswith("fell to 391 TFLOP/s (last window)")
    assert "first below it at minute 3 (the window 150-180 s into the burn-in)" in part.worst.text()
    assert part.line().startswith(f"gpu-1 {GPU1}: fell to 391 TFLOP/s")
    assert "fell behind under sustained load" in part.worst.cause
    text = summary.render(run)
    assert text.splitlines()[0].startswith("verdict FAIL")
    assert f"gpu-1 {GPU1}" in text and "minute 3" in text


def test_the_metrics_export_the_last_window_and_lowest_clock() -> None:
    series = parse(exposition.render(metrics.families(run_of(STEADY, HOG_FROM_MINUTE_3).to_dict())))
    where = {"env": "local", "host": "gpu-1", "test": "gpu_burn"}
    flops = "pav_gpu_burn_in_gemm_flops_per_second"
    assert one(series, flops, **where, gpu="1") == pytest.approx(3.91e14)
    assert one(series, flops, **where, gpu="0") == pytest.approx(7.7e14)
    assert one(series, "pav_gpu_burn_in_sm_clock_min_hertz", **where, gpu="0") == pytest.approx(1.755e9)
    assert one(series, "pav_gpu_verdict", env="local", host="gpu-1", gpu="1", verdict="FAIL") == 1
