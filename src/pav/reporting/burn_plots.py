"""report.html's burn-in charts from a results.json dict: per GPU its TFLOP/s per window with the gate
against its first window; per host every GPU's lowest SM clock and highest temperature per window. A CPU
rank of the burn-in's CPU flavour is named as one ("local rank 1 (CPU)"), never as a GPU."""

from __future__ import annotations

from typing import Any

from pav.reporting.plots import MEASURED, Figure, _where
from pav.reporting.svg import PALETTE, Chart, GateLine, Series, time_chart
from pav.thresholds.burn_in import FRACTION, gpu_label, gpu_order

# (window field, chart title, unit) of the per-host charts.
HOST_CHARTS = (("sm_mhz_min", "lowest SM clock per window", "MHz"),
               ("temp_c_max", "highest temperature per window", "°C"))  # fmt: skip


def burn_in_figures(results: dict[str, Any]) -> list[Figure]:
    figures: list[Figure] = []
    for test in results.get("tests", []):
        gpus = ((test.get("metrics") or {}).get("burn_in") or {}).get("gpus") or {}
        if test.get("status") not in MEASURED or not gpus:
            continue
        where = _where(test)
        labels = _labels(test)
        idents = (test.get("metrics") or {}).get("gpu") or {}
        named = {k: labels.get(k) or gpu_label(k, idents.get(k), gpus[k].get("device_type")) for k in gpus}
        for position, key in enumerate(sorted(gpus, key=gpu_order)):
            figures.append(_throughput(where, key, named[key], gpus[key], position))
        for field, title, unit in HOST_CHARTS:
            series = [
                Series(named[k], _points(gpus[k], field), PALETTE[i % len(PALETTE)])
                for i, k in enumerate(sorted(gpus, key=gpu_order))
            ]
            series = [s for s in series if s.points]
            if series:
                chart = Chart(f"{where} · {test['name']}: {title}", unit, series)
                figures.append(Figure(chart.title, time_chart(chart), series))
    return figures


def _throughput(where: str, key: str, label: str, gpu: dict[str, Any], position: int) -> Figure:
    series = [Series(label, _points(gpu, "tflops"), PALETTE[position % len(PALETTE)])]
    first = gpu.get("first_tflops")
    gates = [GateLine(FRACTION * first, f"gate {FRACTION:g} x first window")] if first else []
    unit = gpu_label(key, None, gpu.get("device_type"))  # "GPU 0", or "local rank 0 (CPU)" on CPUs
    chart = Chart(f"{where} · {unit}: bf16 GEMM TFLOP/s per window", "TFLOP/s", series, gates)
    return Figure(chart.title, time_chart(chart), series)


def _points(gpu: dict[str, Any], field: str) -> list[tuple[float, float]]:
    """(minute of the window's end, value): the window's figure is what it measured by then."""
    return [
        (float(w["end_s"]) / 60.0, float(w[field]))
        for w in gpu.get("windows") or []
        if isinstance(w.get(field), int | float) and isinstance(w.get("end_s"), int | float)
    ]


def _labels(test: dict[str, Any]) -> dict[str, str]:
    """Each GPU as the gates named it (index, bus id, uuid)."""
    return {
        str(g["metric"]).rsplit(".", 1)[1]: str(g["part"])
        for g in (test.get("threshold") or {}).get("gates") or []
        if g.get("basis") == "burn-in" and g.get("part") and "." in str(g.get("metric"))
    }
