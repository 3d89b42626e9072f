"""What report.html folds at fleet size (issue 65): a 64 host x 8 GPU run's page was 6.2 MB, mostly the gate
rows and GPU grids of healthy hosts, which no one reads one by one. Each failing or near-limit figure stays
in full; the healthy rest becomes a few rows that say how healthy it is and where it is least so. Every
folded row stays in results.json (tests[].threshold.gates, tests[].metrics), and the page says so.

- Derived gates: a test with more than FULL_UP_TO results (one per host) keeps, with its host, each gate
  row that fails, was not measured, or passes within NEAR_LIMIT of its bound; the rest become one row per
  metric (GPU indices folded) and basis: how many gates on how many hosts, the lowest and the median of the
  figure over its bound, and the host and part of the lowest.
- GPU grids: past gpu_grid.FOLD_AFTER hosts (gpu_grid.GpuSection.fold), a healthy host is one row: the
  lowest figure of each grid column and of its pairs, and the GPU it came from.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass
from typing import Any

from pav.hostlist import compress
from pav.reporting.gpu_grid import FOLD_AFTER, GateRow, GateTable, HostGpus

FULL_UP_TO = FOLD_AFTER  # a test's results shown as full tables; past it, folded
# A passing figure this close over its bound (or under a max) is kept in full: the next run may fail it.
NEAR_LIMIT = 1.05
KEPT = ("fail", "not measured")
# A GPU's (gemm_bf16_tflops.3) or a pair's (p2p_gbps.1.3) figure: its indices fold into one row.
GPU_METRIC = re.compile(r"^([a-z0-9_]+)((?:\.\d+){1,2})$")
WORST_FIRST = ("fail", "error", "interrupted", "pass", "skipped")


@dataclass(frozen=True)
class KeptRow:
    host: str  # the test's host(s), compressed
    gate: GateRow


@dataclass(frozen=True)
class GateGroup:
    """The passing gates of one metric and basis over a test's hosts, folded."""

    metric: str  # "gemm_bf16_tflops.N", "p2p_gbps.N.N", or the metric itself
    basis: str
    gates: int
    hosts: str  # compressed
    host_count: int
    lowest: float | None  # the figure over its bound (1: at it), lowest of the group; None: no bound to weigh
    median: float | None
    worst: KeptRow  # the row of the lowest (the first, where none has a margin)


@dataclass(frozen=True)
class FoldedGates:
    test: str
    where: str
    runs: int
    status: str  # the worst of its results
    kept: list[KeptRow]
    groups: list[GateGroup]
    total: int

    @property
    def failing(self) -> int:
        return sum(k.gate.status in KEPT for k in self.kept)


@dataclass(frozen=True)
class Low:
    value: float | None
    where: str  # "GPU 3", "GPU 1 -> GPU 2"


@dataclass(frozen=True)
class HealthyHost:
    host: str
    gpus: int
    lows: list[Low]  # one per gpu_grid.COLUMNS, then the pairs'


def gate_tables(tables: list[GateTable]) -> list[GateTable | FoldedGates]:
    """The gate tables in order, each test's results past FULL_UP_TO folded into one, where its first was."""
    by_test: dict[str, list[GateTable]] = {}
    for table in tables:
        by_test.setdefault(table.test, []).append(table)
    out: list[GateTable | FoldedGates] = []
    for test, same in by_test.items():
        out += [fold_gates(test, same)] if len(same) > FULL_UP_TO else same
    return out


def fold_gates(test: str, tables: list[GateTable]) -> FoldedGates:
    rows = [KeptRow(t.where, row) for t in tables for row in t.rows]
    kept = [r for r in rows if keep(r.gate)]
    groups: dict[tuple[str, str], list[KeptRow]] = {}
    for row in (r for r in rows if not keep(r.gate)):
        groups.setdefault((family(row.gate), row.gate.basis), []).append(row)
    status = min((t.status for t in tables), key=lambda s: WORST_FIRST.index(s) if s in WORST_FIRST else 9)
    return FoldedGates(
        test,
        compress(t.where for t in tables),
        len(tables),
        status,
        sorted(kept, key=lambda r: (r.gate.status not in KEPT, margin(r.gate) or 0.0)),
        [group(metric, basis, same) for (metric, basis), same in groups.items()],
        len(rows),
    )


def keep(gate: GateRow) -> bool:
    near = margin(gate)
    return gate.status in KEPT or (gate.status == "pass" and near is not None and near < NEAR_LIMIT)


def group(metric: str, basis: str, rows: list[KeptRow]) -> GateGroup:
    weighed = [(m, r) for r in rows if (m := margin(r.gate)) is not None]
    hosts = list(dict.fromkeys(r.host for r in rows))
    lowest = min(weighed, key=lambda pair: pair[0]) if weighed else None
    return GateGroup(
        metric,
        basis,
        len(rows),
        compress(hosts),
        len(hosts),
        lowest[0] if lowest else None,
        statistics.median(m for m, _ in weighed) if weighed else None,
        lowest[1] if lowest else rows[0],
    )


def family(gate: GateRow) -> str:
    """ "gemm_bf16_tflops.3" of a GPU -> "gemm_bf16_tflops.N"; a figure of no GPU (busbw_gbps.8589934592,
    a size) as it is."""
    match = GPU_METRIC.match(gate.metric)
    if match is None or not gate.part.startswith("GPU "):
        return gate.metric
    return match.group(1) + ".N" * match.group(2).count(".")


def margin(gate: GateRow) -> float | None:
    """The figure over its bound: 1 at the bound, above 1 inside it (a max: the bound over the figure); None
    where there is no figure or no bound other than 0 to weigh it against."""
    value = gate.value
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if gate.low:
        return value / gate.low
    if gate.high and value > 0:
        return gate.high / value
    return None


def healthy_hosts(hosts: list[HostGpus]) -> list[HealthyHost]:
    """A row per host: the lowest figure of each grid column and of its pairs."""
    out = []
    for host in hosts:
        columns = zip(*(row.cells for row in host.rows), strict=True) if host.rows else []
        lows = [_lowest((c.value, f"GPU {row.index}") for c, row in zip(col, host.rows, strict=True))
                for col in columns]  # fmt: skip
        pairs = host.pairs.rows if host.pairs else []
        lows.append(
            _lowest((c.value, f"GPU {src} -> GPU {dst}") for src, row in pairs
                    for c, dst in zip(row, host.pairs.gpus if host.pairs else [], strict=True) if c)
        )  # fmt: skip
        out.append(HealthyHost(host.host, len(host.rows), lows))
    return out


def _lowest(figures: Any) -> Low:
    measured = [(value, where) for value, where in figures if value is not None]
    if not measured:
        return Low(None, "")
    value, where = min(measured, key=lambda pair: pair[0])
    return Low(value, where)
