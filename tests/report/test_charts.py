"""report.html's charts: inline SVG drawn by pav.reporting.svg from what pav.reporting.plots takes out of a
results.json (here a real H200 run's, tests/report/fixtures). Each SVG must parse as XML, and show each
series, bar and gate it was given, labelled."""

from __future__ import annotations

import copy
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from pav.reporting import plots
from pav.reporting.svg import LABEL_GAP, Bar, Chart, GateLine, Series, bar_chart, size_chart

REAL_RUN = Path(__file__).parent / "fixtures" / "h200-2gpu-results.json"
NS = "{http://www.w3.org/2000/svg}"


def parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)


def elements(root: ET.Element, tag: str, cls: str | None = None) -> list[ET.Element]:
    return [e for e in root.iter(f"{NS}{tag}") if cls is None or e.get("class") == cls]


def titles(found: list[ET.Element]) -> list[str]:
    return [e.findtext(f"{NS}title") or "" for e in found]


def real_run() -> dict[str, Any]:
    return json.loads(REAL_RUN.read_text())


def test_a_size_chart_draws_each_series_and_gate() -> None:
    chart = Chart(
        "all_reduce bus bandwidth", "busbw GB/s", gates=[GateLine(40.0, "gate 40 GB/s at 1M", 1 << 20)]
    )
    chart.series = [
        Series("host a · payload", [(1024.0, 5.0), (1 << 20, 45.0)]),
        Series("host a · nccl-tests <x&y>", [(1 << 20, 44.0), (1 << 30, 48.0)], dashed=True),
    ]
    root = parse(size_chart(chart))
    assert root.get("aria-label") == "all_reduce bus bandwidth"
    series = elements(root, "path", "series")
    assert titles(series) == ["host a · payload", "host a · nccl-tests <x&y>"]
    assert [s.get("stroke-dasharray") for s in series] == [None, "6 4"]
    assert len(elements(root, "circle")) == 4
    assert titles(elements(root, "line", "gate")) == ["gate 40 GB/s at 1M"]
    texts = [t.text for t in elements(root, "text")]
    assert {"1K", "1M", "1G", "message size (log scale)", "busbw GB/s", "gate 40 GB/s at 1M"} <= set(texts)
    # The axis tops out at a round number a tenth above the highest value (48 -> 52.8 -> 100), in 5 steps.
    assert [t for t in texts if t in ("0", "20", "40", "60", "80", "100", "120")] == [
        "0",
        "20",
        "40",
        "60",
        "80",
        "100",
    ]


def test_a_long_sweep_labels_every_size_that_fits() -> None:
    sizes = [float(1 << k) for k in range(3, 28)]
    root = parse(size_chart(Chart("sweep", "GB/s", [Series("s", [(x, 1.0) for x in sizes])])))
    labels = [
        t.text for t in elements(root, "text") if t.text and t.text[-1] in "BKMG" and t.text[0].isdigit()
    ]
    assert 0 < len(labels) < len(sizes)
    assert labels[0] == "8B"


def test_gate_labels_close_in_value_do_not_overlap() -> None:
    chart = Chart("t", "GB/s", [Series("s", [(1024.0, 100.0)])], [GateLine(50.0, "a"), GateLine(50.5, "b")])
    root = parse(size_chart(chart))
    ys = sorted(float(t.get("y", 0)) for t in elements(root, "text") if t.text in ("a", "b"))
    assert ys[1] - ys[0] >= LABEL_GAP


def test_nothing_to_draw_is_no_chart() -> None:
    assert size_chart(Chart("empty", "GB/s")) == ""
    assert bar_chart("empty", "x", []) == ""


def test_a_bar_chart_draws_each_bar_and_shortens_long_labels() -> None:
    bars = [Bar(f"train_gpu_ddp_multi @ {n} hosts and a long tail", v) for n, v in ((2, 0.93), (4, 0.88))]
    bars.append(Bar("short", 0.5, note="n/a"))
    root = parse(bar_chart("scaling", "efficiency", bars, [GateLine(0.9, "gate 0.9")]))
    assert titles(elements(root, "rect", "bar")) == [f"{b.label}: {b.value:g}" for b in bars]
    texts = [t.text or "" for t in elements(root, "text")]
    assert any(t.endswith("…") for t in texts) and "short" in texts and "n/a" in texts
    assert titles(elements(root, "line", "gate")) == ["gate 0.9"]


def test_a_real_run_gets_one_busbw_chart_per_collective() -> None:
    figures = {f.title: f for f in plots.busbw_figures(real_run())}
    ops = ("all_gather", "all_reduce", "all_to_all", "broadcast", "reduce_scatter", "send_recv")
    assert set(figures) == {f"{op} bus bandwidth" for op in ops}
    all_reduce = figures["all_reduce bus bandwidth"]
    assert [(s.label, s.dashed) for s in all_reduce.legend] == [
        ("localhost · payload (torch_gloo_allreduce)", False),
        ("localhost · payload (torch_nccl_allreduce)", False),
        ("localhost · payload (torch_nccl_latency)", False),
        ("localhost · nccl-tests (nccl_tests_all_reduce)", True),  # dashed: the other tool
    ]
    root = parse(all_reduce.svg)
    assert titles(elements(root, "path", "series")) == [s.label for s in all_reduce.legend]
    # The profile's gates on the curves are drawn, labelled with the size they hold at.
    gates = titles(elements(root, "line", "gate"))
    assert gates and all(" GB/s at " in g for g in gates)


def test_only_measured_tests_are_plotted() -> None:
    results = copy.deepcopy(real_run())
    for test in results["tests"]:
        if test["name"] == "nccl_tests_all_reduce":
            test["status"] = "error"
    all_reduce = next(f for f in plots.busbw_figures(results) if f.title.startswith("all_reduce"))
    assert not any("nccl-tests" in s.label for s in all_reduce.legend)


def test_training_charts_and_table_of_a_real_run() -> None:
    results = real_run()
    figures = plots.training_figures(results)
    assert [f.title for f in figures] == [
        "training throughput (tokens/s per GPU, slowest rank)",
        "training throughput (samples/s per rank, slowest rank)",
        "scaling efficiency (tokens/s per GPU with all GPUs / 1-GPU baseline)",
    ]
    tokens = [t for t in results["tests"] if "tokens_per_s_per_rank_min" in t["metrics"]]
    assert len(elements(parse(figures[0].svg), "rect", "bar")) == len(tokens)
    rows = plots.training_rows(results)
    trained = [t["name"] for t in results["tests"] if "loss_first" in t["metrics"]]
    assert [r["test"] for r in rows] == trained
    single = next(r for r in rows if r["test"] == "train_gpu_single")
    assert single["world"] == 1 and single["tokens"] > 0 and 0 < single["loss_ratio"] < 1
