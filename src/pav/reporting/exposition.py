"""Prometheus' text exposition format (what node_exporter's textfile collector reads and a pushgateway
takes): one HELP and TYPE line per family, then its samples, every value a gauge.

https://prometheus.io/docs/instrumenting/exposition_formats/
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

Labels = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Sample:
    labels: Labels
    value: float

    def label(self, name: str) -> str | None:
        return next((v for k, v in self.labels if k == name), None)


@dataclass
class Family:
    name: str
    help: str
    samples: list[Sample] = field(default_factory=list)
    _seen: set[Labels] = field(default_factory=set, repr=False)

    def add(self, value: float | None, **labels: str) -> None:
        """A sample; one without a finite value is left out (a gauge cannot say "not measured"), and so is
        a second one of the same labels (the format allows one): the first added stands."""
        key = tuple(labels.items())
        if value is None or not math.isfinite(value) or key in self._seen:
            return
        self._seen.add(key)
        self.samples.append(Sample(key, float(value)))


def render(families: list[Family], drop: tuple[str, ...] = ()) -> str:
    """The families as exposition text, without the labels in `drop` (a pushgateway adds its grouping
    labels itself); a family without samples is left out."""
    out: list[str] = []
    for family in families:
        if not family.samples:
            continue
        out.append(f"# HELP {family.name} {_escape_help(family.help)}")
        out.append(f"# TYPE {family.name} gauge")
        out += [f"{family.name}{_labels(s.labels, drop)} {_value(s.value)}" for s in family.samples]
    return "\n".join(out) + "\n" if out else ""


def _labels(labels: Labels, drop: tuple[str, ...]) -> str:
    kept = [f'{k}="{_escape_value(v)}"' for k, v in labels if k not in drop]
    return "{" + ",".join(kept) + "}" if kept else ""


def _value(value: float) -> str:
    return str(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _escape_value(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
