"""Inline SVG charts for report.html: drawn here, so the report needs no JS library and opens offline."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from html import escape

from pav.units import size_label

# Colour-blind-safe (Okabe-Ito); series beyond it cycle.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
GATE_COLOUR = "#C62828"
WIDTH, HEIGHT = 600, 300
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 16, 44
MIN_TICK_GAP, LABEL_GAP = 34, 13  # pixels between size labels, between gate labels


@dataclass
class Series:
    label: str
    points: list[tuple[float, float]]  # (x, y); x in bytes for size plots
    colour: str = PALETTE[0]
    dashed: bool = False


@dataclass
class GateLine:
    value: float
    label: str
    at_x: float | None = None  # the size the gate holds at: marked on the line


@dataclass
class Bar:
    label: str
    value: float
    colour: str = PALETTE[0]
    note: str = ""  # drawn above the bar


@dataclass
class Chart:
    title: str
    y_label: str
    series: list[Series] = field(default_factory=list)
    gates: list[GateLine] = field(default_factory=list)


def size_chart(chart: Chart) -> str:
    """Lines over a log2 size axis (bytes), one per series, with each gate as a horizontal line."""
    xs = sorted({x for s in chart.series for x, _ in s.points if x > 0} | _gate_xs(chart))
    if not xs:
        return ""
    lo, hi = math.log2(xs[0]), math.log2(xs[-1])
    span = hi - lo or 1.0
    ymax = _nice_max([y for s in chart.series for _, y in s.points] + [g.value for g in chart.gates])
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def px(x: float) -> float:
        pad = 0.5 if hi == lo else 0.0
        return LEFT + ((math.log2(x) - lo) / span + pad) * plot_w

    def py(y: float) -> float:
        return TOP + plot_h - (y / ymax) * plot_h

    parts = _frame(chart.title, chart.y_label, ymax, py)
    labelled = -1e9
    for x in xs:
        parts.append(_line(px(x), TOP, px(x), TOP + plot_h, "#f2f2f2"))
        if px(x) - labelled >= MIN_TICK_GAP:  # a sweep of 25 sizes gets every other label
            parts.append(_text(px(x), TOP + plot_h + 16, size_label(int(x)), "middle", 11))
            labelled = px(x)
    parts.append(_text(LEFT + plot_w / 2, HEIGHT - 6, "message size (log scale)", "middle", 11))
    parts += _gates(chart.gates, py, px)
    for s in chart.series:
        pts = sorted((px(x), py(y)) for x, y in s.points if x > 0)
        if not pts:
            continue
        d = " ".join(f"{'M' if i == 0 else 'L'}{x:.1f},{y:.1f}" for i, (x, y) in enumerate(pts))
        dash = ' stroke-dasharray="6 4"' if s.dashed else ""
        parts.append(
            f'<path class="series" d="{d}" fill="none" stroke="{s.colour}" stroke-width="2"{dash}>'
            f"<title>{escape(s.label)}</title></path>"
        )
        parts += [f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{s.colour}"/>' for x, y in pts]
    return _svg(parts, chart.title)


def time_chart(chart: Chart, x_label: str = "minutes into the burn-in") -> str:
    """Lines over a linear axis (x in minutes), one per series, with each gate as a horizontal line."""
    xs = sorted({x for s in chart.series for x, _ in s.points})
    if not xs:
        return ""
    lo, span = xs[0], (xs[-1] - xs[0]) or 1.0
    ymax = _nice_max([y for s in chart.series for _, y in s.points] + [g.value for g in chart.gates])
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def px(x: float) -> float:
        return LEFT + (x - lo) / span * plot_w

    def py(y: float) -> float:
        return TOP + plot_h - (y / ymax) * plot_h

    parts = _frame(chart.title, chart.y_label, ymax, py)
    for i in range(6):
        x = lo + span * i / 5
        parts.append(_text(px(x), TOP + plot_h + 16, _fmt(round(x, 1)), "middle", 11))
    parts.append(_text(LEFT + plot_w / 2, HEIGHT - 6, x_label, "middle", 11))
    parts += _gates(chart.gates, py, None)
    for s in chart.series:
        pts = sorted((px(x), py(y)) for x, y in s.points)
        d = " ".join(f"{'M' if i == 0 else 'L'}{x:.1f},{y:.1f}" for i, (x, y) in enumerate(pts))
        parts.append(
            f'<path class="series" d="{d}" fill="none" stroke="{s.colour}" stroke-width="2">'
            f"<title>{escape(s.label)}</title></path>"
        )
        parts += [f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{s.colour}"/>' for x, y in pts]
    return _svg(parts, chart.title)


def bar_chart(title: str, y_label: str, bars: list[Bar], gates: list[GateLine] | None = None) -> str:
    """One bar per value, labelled under it; gates as horizontal lines."""
    if not bars:
        return ""
    gates = gates or []
    ymax = _nice_max([b.value for b in bars] + [g.value for g in gates])
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    slot = plot_w / len(bars)

    def py(y: float) -> float:
        return TOP + plot_h - (y / ymax) * plot_h

    parts = _frame(title, y_label, ymax, py)
    for i, bar in enumerate(bars):
        x, w = LEFT + i * slot + slot * 0.2, slot * 0.6
        top = py(bar.value)
        parts.append(
            f'<rect class="bar" x="{x:.1f}" y="{top:.1f}" width="{w:.1f}" height="{TOP + plot_h - top:.1f}" '
            f'fill="{bar.colour}"><title>{escape(bar.label)}: {_fmt(bar.value)}</title></rect>'
        )
        parts.append(_text(x + w / 2, top - 4, bar.note or _fmt(bar.value), "middle", 11))
        parts.append(_text(x + w / 2, TOP + plot_h + 16, _short(bar.label, slot), "middle", 11))
    parts += _gates(gates, py, None)
    return _svg(parts, title)


def _frame(title: str, y_label: str, ymax: float, py: Callable[[float], float]) -> list[str]:
    plot_h = HEIGHT - TOP - BOTTOM
    parts = [_line(LEFT, TOP, LEFT, TOP + plot_h, "#444")]
    for i in range(6):
        value = ymax * i / 5
        y = py(value)
        parts.append(_line(LEFT, y, WIDTH - RIGHT, y, "#eee" if i else "#444"))
        parts.append(_text(LEFT - 6, y + 4, _fmt(value), "end", 11))
    parts.append(
        f'<text x="14" y="{TOP + plot_h / 2:.1f}" font-size="11" text-anchor="middle" '
        f'transform="rotate(-90 14 {TOP + plot_h / 2:.1f})">{escape(y_label)}</text>'
    )
    return parts


def _gates(
    gates: list[GateLine], py: Callable[[float], float], px: Callable[[float], float] | None
) -> list[str]:
    """Each gate's line, labelled at the left (small sizes sit low: free there), labels never overlapping."""
    out, last_label = [], -1e9
    for gate in sorted(gates, key=lambda g: -g.value):
        y = py(gate.value)
        label_y = y - 5 if y - 5 >= last_label + LABEL_GAP else y + LABEL_GAP  # above the line, else below
        last_label = label_y
        out.append(_gate(gate, y, label_y, px(gate.at_x) if px and gate.at_x else None))
    return out


def _gate(gate: GateLine, y: float, label_y: float, x: float | None) -> str:
    out = [
        f'<line class="gate" x1="{LEFT}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}" '
        f'stroke="{GATE_COLOUR}" stroke-width="1.5" stroke-dasharray="2 3">'
        f"<title>{escape(gate.label)}</title></line>",
        _text(LEFT + 6, label_y, gate.label, "start", 11, GATE_COLOUR),
    ]
    if x is not None:
        out.append(
            f'<path d="M{x - 6:.1f},{y - 6:.1f} L{x + 6:.1f},{y + 6:.1f} M{x - 6:.1f},{y + 6:.1f} '
            f'L{x + 6:.1f},{y - 6:.1f}" stroke="{GATE_COLOUR}" stroke-width="2"/>'
        )
    return "".join(out)


def _gate_xs(chart: Chart) -> set[float]:
    return {g.at_x for g in chart.gates if g.at_x}


def _nice_max(values: list[float]) -> float:
    top = max([v for v in values if v > 0], default=1.0) * 1.1
    step = 10 ** math.floor(math.log10(top))
    for mult in (1, 2, 2.5, 5, 10):
        if step * mult >= top:
            return step * mult
    return top


def _fmt(value: float) -> str:
    if value == 0:
        return "0"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def _short(label: str, room: float) -> str:
    most = max(4, int(room / 6.5))
    return label if len(label) <= most else label[: most - 1] + "…"


def _line(x1: float, y1: float, x2: float, y2: float, colour: str) -> str:
    return f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="{colour}"/>'


def _text(x: float, y: float, text: str, anchor: str, size: int, colour: str = "#222") -> str:
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" fill="{colour}">'
        f"{escape(text)}</text>"
    )


def _svg(parts: list[str], title: str) -> str:
    body = "".join(parts)
    return (
        f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'width="{WIDTH}" height="{HEIGHT}" role="img" aria-label="{escape(title)}" '
        f'font-family="system-ui, sans-serif">{body}</svg>'
    )
