"""The charts of report.html from a results.json dict: busbw vs size per op, training throughput, scaling."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pav.hostlist import compress
from pav.reporting.compare import NCCL_TO_PAYLOAD, is_nccl_tests
from pav.reporting.svg import PALETTE, Bar, Chart, GateLine, Series, bar_chart, size_chart
from pav.units import size_label

MEASURED = ("pass", "fail")  # statuses whose metrics are real measurements


@dataclass
class Figure:
    title: str
    svg: str
    legend: list[Series]


def busbw_figures(results: dict[str, Any]) -> list[Figure]:
    """One chart per op: every payload and nccl-tests curve (per host) on it, with the profile's gates."""
    charts: dict[str, Chart] = {}
    colours: dict[str, str] = {}
    for test in results.get("tests", []):
        if test.get("status") not in MEASURED:
            continue
        where = _where(test)
        colour = colours.setdefault(f"{where} {test['name']}", PALETTE[len(colours) % len(PALETTE)])
        for op, points, gates, tool in _curves(test):
            chart = charts.setdefault(op, Chart(f"{op} bus bandwidth", "busbw GB/s"))
            label = f"{where} · {tool} ({test['name']})"
            chart.series.append(Series(label, points, colour, dashed=tool == "nccl-tests"))
            for gate in gates:
                if all((g.value, g.at_x) != (gate.value, gate.at_x) for g in chart.gates):
                    chart.gates.append(gate)
    return [Figure(c.title, size_chart(c), c.series) for _, c in sorted(charts.items())]


def _curves(test: dict[str, Any]) -> list[tuple[str, list[tuple[float, float]], list[GateLine], str]]:
    metrics, threshold = test.get("metrics") or {}, test.get("threshold") or {}
    busbw = metrics.get("busbw_gbps")
    if not isinstance(busbw, dict) or not busbw:
        return []
    if is_nccl_tests(test):
        op = NCCL_TO_PAYLOAD.get(str(metrics.get("op")), str(metrics.get("op")))
        gates = [_nccl_gate(g) for g in threshold.get("nccl_tests", [])]
        return [(op, _points(busbw), gates, "nccl-tests")]
    out = []
    for op, sizes in sorted(busbw.items()):
        if not isinstance(sizes, dict):
            continue
        gates = []
        for gate in threshold.get("gates", []):
            parts = str(gate.get("metric", "")).split(".")
            if len(parts) == 3 and parts[:2] == ["busbw_gbps", op] and gate.get("min") is not None:
                gates.append(
                    GateLine(
                        float(gate["min"]), _gate_label(gate["min"], parts[2], "payload"), float(parts[2])
                    )
                )
        out.append((op, _points(sizes), gates, "payload"))
    return out


def _nccl_gate(gate: dict[str, Any]) -> GateLine:
    label = _gate_label(gate["min_busbw_gbps"], gate["size_bytes"], "nccl-tests")
    return GateLine(float(gate["min_busbw_gbps"]), label, float(gate["size_bytes"]))


def _points(sizes: dict[str, Any]) -> list[tuple[float, float]]:
    return sorted((float(size), float(v)) for size, v in sizes.items() if isinstance(v, int | float))


def _gate_label(value: Any, size: Any, tool: str) -> str:
    return f"{tool} gate {float(value):g} GB/s at {size_label(int(size))}"


def _where(test: dict[str, Any]) -> str:
    hosts = test.get("hosts") or []
    return hosts[0] if len(hosts) == 1 else f"{len(hosts)} hosts"


# Throughput per rank, in the unit the test reports: tokens for the transformer, samples for the MLP.
THROUGHPUT = (
    ("tokens_per_s_per_rank_min", "tokens/s per GPU"),
    ("samples_per_s_per_rank_min", "samples/s per rank"),
)


def training_figures(results: dict[str, Any]) -> list[Figure]:
    figures = []
    tests = [t for t in results.get("tests", []) if t.get("status") in MEASURED]
    for key, unit in THROUGHPUT:
        bars = _bars(tests, key)
        if bars:
            figures.append(
                Figure(f"training throughput ({unit}, slowest rank)", bar_chart("", unit, bars), [])
            )
    scaling = _bars(tests, "scaling_efficiency")
    if scaling:
        gates = [
            GateLine(float(g["min"]), f"gate {float(g['min']):g}")
            for t in tests for g in (t.get("threshold") or {}).get("gates", [])
            if g.get("metric") == "scaling_efficiency" and g.get("min") is not None
        ][:1]  # fmt: skip
        title = "scaling efficiency (tokens/s per GPU with all GPUs / 1-GPU baseline)"
        figures.append(Figure(title, bar_chart("", "efficiency", scaling, gates), []))
    return figures


def _bars(tests: list[dict[str, Any]], key: str) -> list[Bar]:
    bars = []
    for test in tests:
        value = (test.get("metrics") or {}).get(key)
        if isinstance(value, int | float):
            colour = PALETTE[len(bars) % len(PALETTE)]
            bars.append(Bar(f"{test['name']} @ {_where(test)}", float(value), colour))
    return bars


def training_rows(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The training table: one row per training test and host."""
    rows = []
    for test in results.get("tests", []):
        m = test.get("metrics") or {}
        if "loss_first" not in m and "step_time_s_median" not in m:
            continue
        rows.append({
            "test": test["name"], "where": compress(test.get("hosts", [])), "status": test["status"],
            "world": m.get("world_size"), "tokens": m.get("tokens_per_s_per_rank_min"),
            "samples": m.get("samples_per_s_per_rank_min"), "step": m.get("step_time_s_median"),
            "loss_ratio": m.get("loss_ratio"), "scaling": m.get("scaling_efficiency"),
            "memory": m.get("peak_memory_bytes"),
        })  # fmt: skip
    return rows
