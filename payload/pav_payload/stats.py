"""Summaries of repeated timings."""

import statistics
from dataclasses import dataclass


@dataclass(frozen=True)
class Summary:
    median: float
    min: float
    max: float


def summarize(values: list[float]) -> Summary:
    if not values:
        raise ValueError("no values to summarize")
    return Summary(median=statistics.median(values), min=min(values), max=max(values))
