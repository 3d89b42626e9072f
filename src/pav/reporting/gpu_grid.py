"""The GPU section of report.html: gpu_probe's GPU x metric grid and pair heatmap, and the derived gates.

Everything here is plain data that templates/report.html.j2 loops over. The template autoescapes, so no
string from results.json is turned into HTML here; the only markup-like strings built here (the heatmap's
inline style) come from numbers.

A cell's state comes from the gates in its test's `threshold.gates` that name the cell's metric path
(`gemm_bf16_tflops.3`, `p2p_gbps.1.3`): derived gates carry `status` and `value`; profile gates do not,
so they colour nothing (their verdict is the test's own status).

At scale (issue 65: 64 hosts x 8 GPUs) one host's grid after another hides the bad GPU in a long page, so a
run of several GPU hosts also gets a map of every GPU, a row per host in natural order and a cell per GPU
coloured by its worst gate, with the GPUs that fail named above it; the hosts' own grids follow, those with
a failing figure first, and past FOLD_AFTER hosts the healthy hosts' grids fold into a row each (fold.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pav.catalog import is_probe
from pav.hostlist import compress, natural_key
from pav.thresholds.derive import PER_GPU

# The grid's columns are the per-GPU metrics the gates judge, in their order.
COLUMNS = tuple(zip(PER_GPU, ("GEMM bf16 TFLOP/s", "HBM copy GB/s", "H2D GB/s", "D2H GB/s"), strict=True))
PAIRS = "p2p_gbps"
# A cell's state, worst first: one failing gate marks the cell, whatever its other gates say.
STATES = ("fail", "unmeasured", "pass", "none")
STATUS_STATE = {"fail": "fail", "not measured": "unmeasured", "pass": "pass"}
STATUS_CLASS = {"fail": "s-fail", "not measured": "s-error", "pass": "s-pass"}
# The heatmap: a pair's copy as a share of the host's best pair. At or below HEAT_FLOOR every pair is
# equally bad, so the scale spends its range where healthy pairs differ (a lost NVLink halves a pair).
HEAT_FLOOR = 0.5
HEAT_LOW, HEAT_HIGH = (247, 251, 255), (8, 81, 156)  # ColorBrewer Blues: readable when printed grey
HEAT_DARK = 0.55  # from this share of the scale on, the text turns white
LEGEND_STEPS = (0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
# Past this many GPU hosts, the grids of hosts with nothing failing fold under one <details> (no script).
FOLD_AFTER = 8
# The map's hosts per block: blocks stand side by side, so 64 hosts x 8 GPUs fit one screen.
MAP_BLOCK = 16


@dataclass(frozen=True)
class Cell:
    metric: str  # the dotted metric path the gates name
    value: float | None
    state: str  # fail | unmeasured | pass | none (no gate with a status covers it)
    title: str  # the gates' reasons, for hover
    style: str = ""  # the heatmap colour (pair cells only)


@dataclass(frozen=True)
class GpuRow:
    index: str
    bus_id: str
    uuid: str  # shortened: enough to tell GPUs apart, the full one is in the title
    full_uuid: str
    cells: list[Cell]


@dataclass(frozen=True)
class LegendStep:
    label: str
    style: str


@dataclass(frozen=True)
class PairMatrix:
    gpus: list[str]
    rows: list[tuple[str, list[Cell | None]]]  # (source GPU, one cell per destination; None on the diagonal)
    best: float
    legend: list[LegendStep]


@dataclass(frozen=True)
class HostGpus:
    host: str
    status: str  # gpu_probe's status; "" when it did not run on this host
    reason: str
    models: str
    rows: list[GpuRow]
    pairs: PairMatrix | None
    pairs_note: str  # why there is no matrix
    missing: list[str]  # facts the host's gates need and lack (results.json `gates`)
    facts: str  # the facts its gates came from
    note: str

    @property
    def bad(self) -> bool:
        """Some figure of the host (a GPU's or a pair's) fails its gate or was not measured, or the probe
        did not pass."""
        cells = [c for row in self.rows for c in row.cells]
        cells += [c for _, row in (self.pairs.rows if self.pairs else []) for c in row if c]
        return self.status in ("fail", "error") or any(c.state in ("fail", "unmeasured") for c in cells)


@dataclass(frozen=True)
class MapCell:
    """One GPU on the map of every GPU: its index, its worst gate's state, and who it is (hover)."""

    gpu: str
    state: str
    title: str


@dataclass(frozen=True)
class GpuMap:
    """Every GPU of the run: a row per host in natural order, a cell per GPU index."""

    columns: list[str]  # GPU indices, over all hosts
    rows: list[tuple[str, list[MapCell | None]]]  # (host, a cell per column; None: the host has no such GPU)
    count: int  # GPUs on the map
    failing: list[tuple[str, str, str]]  # (host, the GPU's label, its failing gates) of each GPU that fails

    @property
    def blocks(self) -> list[list[tuple[str, list[MapCell | None]]]]:
        return [self.rows[i : i + MAP_BLOCK] for i in range(0, len(self.rows), MAP_BLOCK)]


@dataclass(frozen=True)
class GateRow:
    metric: str
    part: str
    basis: str
    value: Any
    limit: Any
    fraction: Any
    bound: str  # "min 643.1" / "max 0"
    source: str
    status: str
    status_class: str
    low: float | None = None  # the gate's min and max, as numbers, where it has them
    high: float | None = None


@dataclass(frozen=True)
class GateTable:
    test: str
    where: str
    status: str
    rows: list[GateRow]
    failing: int


@dataclass(frozen=True)
class GpuSection:
    hosts: list[HostGpus] = field(default_factory=list)
    gate_tables: list[GateTable] = field(default_factory=list)
    overview: GpuMap | None = None  # two or more hosts with GPU figures

    @property
    def fold(self) -> bool:
        """Whether the healthy hosts' grids fold into a row each (fold.py): past FOLD_AFTER hosts, bad
        ones or none (64 healthy grids made a 2 MB page no one reads grid by grid)."""
        return len(self.hosts) > FOLD_AFTER

    @property
    def healthy(self) -> list[HostGpus]:
        return [h for h in self.hosts if not h.bad]

    @property
    def missing_hosts(self) -> list[str]:
        return [h.host for h in self.hosts if h.missing]


def section(results: dict[str, Any]) -> GpuSection | None:
    """The section's data, or None when the run has neither gpu_probe, derived gates nor a gates record:
    an older results.json renders as it always did."""
    records = _gate_records(results)
    probes = _probes(results)
    hosts = [host_gpus(h, probes.get(h), records.get(h) or {}) for h in _hosts(probes, records)]
    tables = gate_tables(results)
    if not hosts and not tables:
        return None
    overview = gpu_map(hosts) if sum(bool(h.rows) for h in hosts) > 1 else None
    return GpuSection(sorted(hosts, key=lambda h: not h.bad), tables, overview)  # the bad first, stably


def gpu_map(hosts: list[HostGpus]) -> GpuMap:
    """Every GPU of the hosts, a cell each, coloured by the worst state of its figures' gates."""
    columns = sorted({g.index for h in hosts for g in h.rows}, key=natural_key)
    rows: list[tuple[str, list[MapCell | None]]] = []
    failing = []
    for host in (h for h in hosts if h.rows):
        by_index = {g.index: g for g in host.rows}
        cells: list[MapCell | None] = []
        for index in columns:
            gpu = by_index.get(index)
            if gpu is None:
                cells.append(None)
                continue
            state = next((s for s in STATES if any(c.state == s for c in gpu.cells)), "none")
            label = f"GPU {gpu.index} ({gpu.bus_id}, {gpu.full_uuid})"
            bad = state in ("fail", "unmeasured")
            why = "; ".join(f"{c.metric}: {c.title}" for c in gpu.cells if bad and c.state == state)
            cells.append(MapCell(gpu.index, state, f"{host.host} {label}: {why or state}"))
            if bad:
                failing.append((host.host, label, why))
        rows.append((host.host, cells))
    count = sum(cell is not None for _, cells in rows for cell in cells)
    return GpuMap(columns, rows, count, failing)


def host_gpus(host: str, probe: dict[str, Any] | None, record: dict[str, Any]) -> HostGpus:
    metrics = _dict((probe or {}).get("metrics"))
    gates = _gates_by_metric(probe or {})
    gpus = gpu_indices(metrics)
    pairs = pair_matrix(metrics, gpus, gates) if len(gpus) >= 2 else None
    return HostGpus(
        host=host,
        status=str((probe or {}).get("status", "")),
        reason=str((probe or {}).get("reason", "")),
        models=_models(metrics),
        rows=grid(metrics, gpus, gates),
        pairs=pairs,
        pairs_note=_pairs_note(probe, gpus, pairs),
        missing=[str(m) for m in record.get("missing") or []],
        facts=_facts(record),
        note=str(record.get("note") or ""),
    )


def grid(metrics: dict[str, Any], gpus: list[str], gates: dict[str, list[dict[str, Any]]]) -> list[GpuRow]:
    """One row per GPU, one cell per COLUMNS metric."""
    info = _dict(metrics.get("gpu"))
    rows = []
    for idx in gpus:
        gpu = _dict(info.get(idx))
        uuid = str(gpu.get("uuid") or "")
        cells = [cell(f"{key}.{idx}", _number(_dict(metrics.get(key)).get(idx)), gates) for key, _ in COLUMNS]
        rows.append(GpuRow(idx, str(gpu.get("pci_bus_id") or "-"), short_uuid(uuid), uuid, cells))
    return rows


def pair_matrix(
    metrics: dict[str, Any], gpus: list[str], gates: dict[str, list[dict[str, Any]]]
) -> PairMatrix | None:
    """Source GPU x destination GPU, coloured by each pair's share of the host's best pair."""
    measured = {
        (str(src), str(dst)): number
        for src, row in _dict(metrics.get(PAIRS)).items()
        for dst, raw in _dict(row).items()
        if (number := _number(raw)) is not None
    }
    if not measured:
        return None
    best = max(measured.values())
    rows = []
    for src in gpus:
        cells: list[Cell | None] = []
        for dst in gpus:
            if src == dst:
                cells.append(None)
                continue
            value = measured.get((str(src), str(dst)))
            base = cell(f"{PAIRS}.{src}.{dst}", value, gates)
            cells.append(Cell(base.metric, value, base.state, base.title, heat_style(value, best)))
        rows.append((src, cells))
    return PairMatrix(gpus, rows, best, heat_legend(best))


def cell(metric: str, value: float | None, gates: dict[str, list[dict[str, Any]]]) -> Cell:
    covering = gates.get(metric, [])
    state = gate_state(covering)
    shown = (
        [g for g in covering if STATUS_STATE.get(str(g.get("status"))) == state] if state != "none" else []
    )
    title = "; ".join(gate_reason(g) for g in shown or covering)
    return Cell(metric, value, state, title or "no gate covers this figure")


def gate_state(gates: list[dict[str, Any]]) -> str:
    found = {STATUS_STATE.get(str(g.get("status"))) for g in gates if "status" in g}
    return next((s for s in STATES if s in found), "none")


def gate_reason(gate: dict[str, Any]) -> str:
    """ "relative: min 702 = 0.9 x 780 (best GPU of the host: GPU 0 780.0)"; a profile gate has no
    fraction or limit, so just its bound."""
    bound = gate_bound(gate)
    if _number(gate.get("fraction")) is not None and _number(gate.get("limit")) is not None:
        bound += f" = {_fmt(gate['fraction'])} x {_fmt(gate['limit'])}"
    if gate.get("source"):
        bound += f" ({gate['source']})"
    status = gate.get("status")
    where = f"{gate['basis']}: " if gate.get("basis") else "profile gate: "
    return f"{status}, {where}{bound}" if status else f"{where}{bound}"


def gate_bound(gate: dict[str, Any]) -> str:
    bounds = [f"{k} {_fmt(gate[k])}" for k in ("min", "max") if _number(gate.get(k)) is not None]
    # NCCL's transport is held to a network's name, not a bound.
    expected = f"= {gate['expected']}" if gate.get("expected") else "-"
    return ", ".join(bounds) or expected


def gate_tables(results: dict[str, Any]) -> list[GateTable]:
    """One table per test that has derived gates (they carry a `basis`): every gate of the test, failing
    first; a profile gate's columns that it lacks show "-"."""
    tables = []
    for test in results.get("tests") or []:
        gates = [g for g in _dict(test.get("threshold")).get("gates") or [] if isinstance(g, dict)]
        if not any("basis" in g for g in gates):
            continue
        rows = sorted((gate_row(g) for g in gates), key=lambda r: _STATUS_RANK.get(r.status, 3))
        failing = sum(r.status in ("fail", "not measured") for r in rows)
        where = compress(str(h) for h in test.get("hosts") or [])
        tables.append(GateTable(str(test.get("name")), where, str(test.get("status", "")), rows, failing))
    return tables


_STATUS_RANK = {"fail": 0, "not measured": 1, "pass": 2}


def gate_row(gate: dict[str, Any]) -> GateRow:
    status = str(gate.get("status") or "-")
    return GateRow(
        metric=str(gate.get("metric", "-")),
        part=str(gate.get("part") or "-"),
        basis=str(gate.get("basis") or "-"),
        value=gate.get("value"),
        limit=gate.get("limit"),
        fraction=gate.get("fraction"),
        bound=gate_bound(gate),
        source=str(gate.get("source") or "-"),
        status=status,
        status_class=STATUS_CLASS.get(status, ""),
        low=_number(gate.get("min")),
        high=_number(gate.get("max")),
    )


def heat_style(value: float | None, best: float) -> str:
    if value is None or best <= 0:
        return ""
    share = min(1.0, max(0.0, (value / best - HEAT_FLOOR) / (1 - HEAT_FLOOR)))
    red, green, blue = (round(lo + (hi - lo) * share) for lo, hi in zip(HEAT_LOW, HEAT_HIGH, strict=True))
    text = "#fff" if share >= HEAT_DARK else "#222"
    return f"background: #{red:02x}{green:02x}{blue:02x}; color: {text}"


def heat_legend(best: float) -> list[LegendStep]:
    steps = [
        LegendStep(f"{'≤ ' if share == HEAT_FLOOR else ''}{share:.0%}", heat_style(share * best, best))
        for share in LEGEND_STEPS
    ]
    return [*steps[:-1], LegendStep(f"100% = {_fmt(best)} GB/s (best pair)", steps[-1].style)]


def gpu_indices(metrics: dict[str, Any]) -> list[str]:
    """Every GPU the probe counts or names in any of its figures, in index order: a counted GPU that
    reported nothing still gets its row."""
    found: set[str] = set()
    for key in ("gpu", PAIRS, *(k for k, _ in COLUMNS)):
        found |= {str(k) for k in _dict(metrics.get(key))}
    count = metrics.get("gpu_count")
    if isinstance(count, int) and not isinstance(count, bool):
        found |= {str(i) for i in range(count)}
    return sorted(found, key=lambda k: (0, int(k), "") if k.isdigit() else (1, 0, k))


def short_uuid(uuid: str) -> str:
    """ "GPU-5d1e3f2a-..." -> "GPU-5d1e3f2a…": the first group tells a host's GPUs apart."""
    return uuid if len(uuid) <= 13 else uuid[:12] + "…"


def _pairs_note(probe: dict[str, Any] | None, gpus: list[str], pairs: PairMatrix | None) -> str:
    if probe is None:
        return ""
    if len(gpus) == 1:
        return "pairs: not applicable (1 GPU)"
    if not gpus:
        return "gpu_probe reported no GPU figures"
    return "" if pairs else "pairs: not measured"


def _hosts(probes: dict[str, dict[str, Any]], records: dict[str, dict[str, Any]]) -> list[str]:
    """Hosts with a gpu_probe result or a gates record, in natural order (sim-x-2 before sim-x-10)."""
    wanted = set(probes) | {h for h, rec in records.items() if rec.get("missing") or rec.get("note")}
    return sorted(wanted, key=natural_key)


def _probes(results: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each host's gpu_probe result (the first, should a host have two). A skipped probe ("no GPU")
    measured nothing: the hosts x tests matrix already says so."""
    found: dict[str, dict[str, Any]] = {}
    for test in results.get("tests") or []:
        hosts = test.get("hosts") or []
        if is_probe(str(test.get("name"))) and len(hosts) == 1 and test.get("status") != "skipped":
            found.setdefault(str(hosts[0]), test)
    return found


def _gate_records(results: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {str(h): rec for h, rec in _dict(results.get("gates")).items() if isinstance(rec, dict)}


def _gates_by_metric(test: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for gate in _dict(test.get("threshold")).get("gates") or []:
        if isinstance(gate, dict) and gate.get("metric"):
            out.setdefault(str(gate["metric"]), []).append(gate)
    return out


def _models(metrics: dict[str, Any]) -> str:
    names = [str(_dict(g).get("name")) for g in _dict(metrics.get("gpu")).values() if _dict(g).get("name")]
    return ", ".join(f"{names.count(n)} x {n}" for n in dict.fromkeys(names))


def _facts(record: dict[str, Any]) -> str:
    facts = {"profile": record.get("profile"), **_dict(record.get("facts_used"))}
    return " · ".join(f"{k} {v}" for k, v in facts.items() if v not in (None, "", [], {}))


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _fmt(value: Any) -> str:
    return f"{float(value):.4g}" if _number(value) is not None else str(value)
