"""Relative gates: each GPU against the best GPU of its host, each pair against the median pair on the
same links. They need no datasheet: a GPU or link slower than its peers fails even where no limit is known.
"""

from __future__ import annotations

import statistics
from typing import Any

from pav.thresholds.derive import PER_GPU, PROBE, DerivedGate, Fraction, fractions, pair_limit
from pav.thresholds.hardware import HostHardware


def relative_gates(test: str, metrics: dict[str, Any], hw: HostHardware | None) -> list[DerivedGate]:
    """Each GPU against the best GPU of its host; each pair against the median pair of its link class."""
    if test != PROBE:
        return []
    labels = {g.index: g.label() for g in hw.gpus} if hw else {}
    per_gpu, per_pair = fractions()["relative"]["per_gpu"], fractions()["relative"]["per_pair"]
    out: list[DerivedGate] = []
    for metric in PER_GPU:
        values = _numbers(metrics.get(metric))
        if len(values) < 2:
            continue
        best = max(values, key=lambda k: values[k])
        source = f"best GPU of the host: GPU {best} {values[best]:.4g}"
        for idx in values:
            part = labels.get(int(idx), f"GPU {idx}")
            out.append(
                DerivedGate(test, f"{metric}.{idx}", values[best], per_gpu.value, "relative", source, part)
            )
    return out + _pair_relative(test, metrics, hw, per_pair)


def _pair_relative(
    test: str, metrics: dict[str, Any], hw: HostHardware | None, frac: Fraction
) -> list[DerivedGate]:
    pairs = {
        (src, dst): value
        for src, row in (metrics.get("p2p_gbps") or {}).items()
        for dst, value in _numbers(row).items()
    }
    classes: dict[str, list[tuple[str, str]]] = {}
    by_index = {str(g.index): g for g in hw.gpus} if hw else {}
    for pair in pairs:
        src, dst = (by_index.get(i) for i in pair)
        found = pair_limit(hw, src, dst) if hw and src and dst else "unknown"
        classes.setdefault(str(found[0]) if isinstance(found, tuple) else "all pairs", []).append(pair)
    out: list[DerivedGate] = []
    for members in classes.values():
        if len(members) < 2:
            continue
        median = statistics.median(pairs[p] for p in members)
        source = f"median of {len(members)} pairs on the same links: {median:.4g}"
        for src, dst in members:
            part = f"GPU {src} -> GPU {dst}"
            out.append(
                DerivedGate(test, f"p2p_gbps.{src}.{dst}", median, frac.value, "relative", source, part)
            )
    return out


def _numbers(row: Any) -> dict[str, float]:
    if not isinstance(row, dict):
        return {}
    return {
        str(k): float(v) for k, v in row.items() if isinstance(v, int | float) and not isinstance(v, bool)
    }
