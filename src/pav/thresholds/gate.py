"""The one gate type: a metric of a test's results (a dotted path) held to a min and/or a max.

nccl-tests gates are gates on `busbw_gbps.<size>` of one collective (the profiles' nccl_tests sections).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

BUSBW = "busbw_gbps"


@dataclass(frozen=True)
class Gate:
    metric: str
    min: float | None = None
    max: float | None = None
    why: str = ""

    @classmethod
    def busbw(cls, size_bytes: int, min_gbps: float, why: str = "") -> Gate:
        return cls(f"{BUSBW}.{size_bytes}", min_gbps, None, why)

    @property
    def size_bytes(self) -> int:
        """The message size of a busbw gate."""
        return int(self.metric.rsplit(".", 1)[1])

    def nccl_record(self) -> dict[str, Any]:
        """A busbw gate as results.json's threshold.nccl_tests lists it (docs/results.md)."""
        return {"size_bytes": self.size_bytes, "min_busbw_gbps": self.min, "why": self.why}

    def describe(self) -> dict[str, Any]:
        return {
            k: v for k, v in (("metric", self.metric), ("min", self.min), ("max", self.max)) if v is not None
        }

    def check(self, metrics: dict[str, Any]) -> str:
        """Empty when the gate holds, else the reason it does not."""
        value = lookup(metrics, self.metric)
        if value is None:
            return f"{self.metric} was not measured"
        if self.min is not None and value < self.min:
            return f"{self.metric}={value:g} below the minimum {self.min:g}"
        if self.max is not None and value > self.max:
            return f"{self.metric}={value:g} above the maximum {self.max:g}"
        return ""


def lookup(metrics: dict[str, Any], dotted: str) -> float | None:
    node: Any = metrics
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return float(node) if isinstance(node, int | float) else None
