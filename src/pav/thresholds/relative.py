"""Relative gates: each GPU against the median of its host's other GPUs (its host copies alone: against the
best), each pair against the median pair on the same links. They need no datasheet: a GPU or link slower
than its peers fails even where no limit is known.
"""

from __future__ import annotations

import statistics
from typing import Any

from pav.catalog import is_probe
from pav.thresholds.derive import PER_GPU, DerivedGate, Fraction, fractions, pair_limit
from pav.thresholds.hardware import HostHardware

AT_ONCE = ("h2d_all_gbps", "d2h_all_gbps")  # the probe's host copies with every GPU copying at once
ALONE = ("h2d_gbps", "d2h_gbps")  # its host copies of each GPU alone: the host's memory path in them too


def relative_gates(test: str, metrics: dict[str, Any], hw: HostHardware | None) -> list[DerivedGate]:
    """Each GPU against its host's other GPUs; each pair against the median pair of its link class."""
    if not is_probe(test):
        return []
    labels = {g.metric_key: g.label() for g in hw.gpus} if hw else {}
    relative = fractions()["relative"]
    per_pair = relative["per_pair"]
    out: list[DerivedGate] = []
    for metric in PER_GPU:
        values = _numbers(metrics.get(metric))
        if len(values) < 2:
            continue
        if metric in ALONE:
            out += _against_best(test, metric, values, labels, relative["host_copy_alone"])
        else:
            out += _against_others(test, metric, values, labels, relative["per_gpu"])
    return out + _at_once(test, metrics, labels) + _pair_relative(test, metrics, hw, per_pair)


def _against_others(
    test: str, metric: str, values: dict[str, float], labels: dict[str, str], frac: Fraction
) -> list[DerivedGate]:
    """Each GPU against the median of the host's other GPUs: a slow GPU does not pull its own bar down, and
    with two GPUs each is held to the other."""
    out: list[DerivedGate] = []
    for idx in values:
        others = [v for k, v in values.items() if k != idx]
        median = statistics.median(others)
        source = f"median of the host's other {len(others)} GPU{'s' if len(others) > 1 else ''}: {median:.4g}"
        out.append(
            DerivedGate(
                test, f"{metric}.{idx}", median, frac.value, "relative", source, labels.get(idx, f"GPU {idx}")
            )
        )
    return out


def _against_best(
    test: str, metric: str, values: dict[str, float], labels: dict[str, str], frac: Fraction
) -> list[DerivedGate]:
    best = max(values, key=lambda k: values[k])
    source = f"best GPU of the host: {labels.get(best, f'GPU {best}')} {values[best]:.4g}"
    return [
        DerivedGate(
            test,
            f"{metric}.{idx}",
            values[best],
            frac.value,
            "relative",
            source,
            labels.get(idx, f"GPU {idx}"),
        )
        for idx in values
    ]


def _at_once(test: str, metrics: dict[str, Any], labels: dict[str, str]) -> list[DerivedGate]:
    """Host copies with every GPU copying at once meet what the GPUs share on the way to host memory (a
    PCIe switch, a root port, the CPU's memory); no fact says what that is, so each GPU is held to the
    host's median instead: a GPU far under its peers is named, a host whose shared path is narrow by
    design passes. Each GPU's own link is gated absolutely by its figures alone (h2d_gbps, d2h_gbps)."""
    frac = fractions()["relative"]["host_copy_at_once"]
    out: list[DerivedGate] = []
    for metric in AT_ONCE:
        values = _numbers(metrics.get(metric))
        if len(values) < 2:
            continue
        median = statistics.median(values.values())
        source = (
            f"relative: median of the host's {len(values)} GPUs copying at once, {median:.4g} "
            "(no fact says what they share on the way to host memory)"
        )
        for key in values:
            part = labels.get(key, f"GPU {key}")
            out.append(DerivedGate(test, f"{metric}.{key}", median, frac.value, "relative", source, part))
    return out


def _pair_relative(
    test: str, metrics: dict[str, Any], hw: HostHardware | None, frac: Fraction
) -> list[DerivedGate]:
    pairs = {
        (src, dst): value
        for src, row in (metrics.get("p2p_gbps") or {}).items()
        for dst, value in _numbers(row).items()
    }
    classes: dict[str, list[tuple[str, str]]] = {}
    by_index = {g.metric_key: g for g in hw.gpus} if hw else {}
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
