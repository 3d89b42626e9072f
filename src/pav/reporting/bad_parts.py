"""The bad parts of a run, which summary.txt and report.html lead with: one entry per part (a host; a GPU by
index, bus id and UUID; a CPU rank of a test on CPUs; a GPU pair; an RDMA port; the link between two sets of
hosts isolation found (links.py); the fabric between hosts),
however many tests and gates failed on it, with its worst figure against its gate and the likely cause.

Built from the gates as results.json records them, not from reason strings: a derived gate names its `part`
and carries its `value` and `status`; a profile gate is checked again against the test's metrics; gpu_health
lists each problem's part. A failing test none of these explain (a timeout, a crash, no result) is a bad
part of its host(s) with its reason; of a crash across hosts, of the host of the rank that failed first.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from pav import first_failure
from pav.hostlist import compress
from pav.reporting import causes, links
from pav.thresholds.gate import Gate, lookup

BAD = ("fail", "error")
# Parts in the order they are listed: the most specific first, since a slow GPU slows its pairs and host.
# A rank: a CPU rank of a test's CPU flavour ("local rank 1 (CPU)"), where a GPU test names its GPU.
KINDS = ("gpu", "rank", "pair", "port", "host", "link", "fabric")
CPU_RANK = "local rank "
REASON_CHARS = 160
BASES = ("reference", "absolute", "profile", "relative")  # of one metric's failing gates, the one shown


@dataclass(frozen=True)
class Figure:
    """One failing figure of a part."""

    test: str
    metric: str
    value: float | None
    gate: str  # ">= 692.6 = 0.7 x 989.4", "<= 0", "" where no gate says (a reason instead)
    source: str  # where the gate's limit came from, or the reason
    basis: str  # absolute | relative | profile | problem | reason
    cause: str
    score: float  # value over its bound: lower is worse; 0 for what has no figure
    # user: the user's to fix, not the part's (a GPU another process holds); config: a setting or software
    # version not as expected (thresholds/gpu_state.py, versions.py), the operator's to set
    category: str = "hardware"

    @property
    def measured(self) -> str:
        """ "gemm_bf16_tflops.1 277 TFLOP/s"; a health problem or a test's reason as it is."""
        if self.basis in ("problem", "reason"):
            return self.source
        value = "not measured" if self.value is None else f"{self.value:.4g}{_unit(self.metric)}"
        return f"{self.metric} {value}"

    def text(self) -> str:
        return f"{self.measured}, gate {self.gate}" if self.gate else self.measured


@dataclass(frozen=True)
class BadPart:
    hosts: tuple[str, ...]
    part: str  # a GPU's label, "GPU 0 -> GPU 1", a port, "fabric"; "" for the host itself
    kind: str  # one of KINDS
    worst: Figure
    more: int  # the part's other failing figures (other metrics, problems)
    tests: tuple[str, ...]
    # Whether its hosts were named: a host's own test, isolation's suspects of a test across hosts, or the
    # host of the rank a crash across hosts began with. A test across hosts that none of these name (2
    # hosts, no pair re-runs) names all its hosts, unnamed.
    named: bool = True
    link: links.FoundLink | None = None  # of kind "link": its two sides, none of whose hosts is named

    @property
    def label(self) -> str:
        """The part for a table beside its hosts: the host itself, or what lies between hosts."""
        if self.link is not None:
            return "the link between them"
        return self.part or ("the host" if len(self.hosts) == 1 else "between them")

    @property
    def where(self) -> str:
        if self.link is not None:
            return f"link between {self.link.between}"
        return " ".join(x for x in (compress(self.hosts), self.part) if x)

    @property
    def category(self) -> str:
        """hardware, user or config: what the worst figure says of whose problem it is."""
        return self.worst.category

    def line(self) -> str:
        more = f" (and {self.more} more failing)" if self.more else ""
        tests = ", ".join(self.tests)
        whose = f" ({CATEGORY_WORDS[self.category]})" if self.category in CATEGORY_WORDS else ""
        return f"{self.where}{whose}: {self.worst.text()}{more} [{tests}]; likely cause: {self.worst.cause}"


# How a line names a category that is not the hardware's.
CATEGORY_WORDS = {"user": "a user problem", "config": "a configuration problem"}


def find(results: dict[str, Any]) -> list[BadPart]:
    """The run's bad parts, most specific kind first, then worst figure first."""
    suspects = {str(s.get("host")) for s in (results.get("isolation") or {}).get("suspects") or []}
    found: dict[tuple[tuple[str, ...], str], list[Figure]] = {}
    between = {link.test: link for link in links.found(results)}
    linked: dict[str, list[Figure]] = {}
    for test in results.get("tests") or []:
        if test.get("status") not in BAD:
            continue
        if str(test.get("name")) in between and len(test.get("hosts") or []) > 1:
            linked.setdefault(str(test.get("name")), []).extend(f for _, f in figures(test))
            continue  # what fails across the sides is the link between them, not a host isolation named
        hosts = _where(test, suspects)
        for part, figure in figures(test):
            # A test across hosts with no part of its own is about what lies between them: the fabric.
            key = "fabric" if part in ("", "host") and len(hosts) > 1 else "" if part == "host" else part
            found.setdefault((hosts, key), []).append(figure)
    parts = [_part(hosts, part, figs, suspects) for (hosts, part), figs in found.items()]
    parts += [_link(link, linked.get(name) or []) for name, link in between.items()]
    return sorted(parts, key=lambda p: (KINDS.index(p.kind), p.worst.score))


def _link(link: links.FoundLink, figs: list[Figure]) -> BadPart:
    """The link's part: the worst figure of its test across the sides, where one failed; its reason else."""
    said = Figure(link.test, "", None, "", link.reason, "reason", links.CAUSE, 0.0)
    part = _part(link.hosts, "", figs or [said], set())
    return replace(part, kind="link", worst=replace(part.worst, cause=links.CAUSE), named=False, link=link)


def figures(test: dict[str, Any]) -> list[tuple[str, Figure]]:
    """(part, figure) for each failing gate or health problem of a failing test; its reason where none."""
    name, metrics = str(test.get("name")), test.get("metrics") or {}
    threshold = test.get("threshold") or {}
    problems = [p for p in threshold.get("problems") or [] if isinstance(p, dict)]
    out = [
        (str(p.get("part")), _problem(name, str(p.get("problem")), str(p.get("category") or "")))
        for p in problems
    ]
    gates = [g for g in threshold.get("gates") or [] if isinstance(g, dict)]
    out += [(str(g.get("part") or "host"), _derived(name, g)) for g in gates if _derived_fails(g)]
    if not problems:  # gpu_health's one gate counts its problems, each listed above
        out += [
            ("host", fig) for g in _profile_gates(gates, threshold) if (fig := _profile(name, g, metrics))
        ]
    if not out:
        out.append(("host", _reason(test)))
    return out


def _profile_gates(gates: list[dict[str, Any]], threshold: dict[str, Any]) -> list[dict[str, Any]]:
    """The profile's gates of a test (derived ones carry a basis), nccl-tests' as busbw gates, and wrong
    bytes, which fail a test whether or not a gate names them."""
    out = [g for g in gates if "basis" not in g]
    out += [
        {"metric": f"busbw_gbps.{g.get('size_bytes')}", "min": g.get("min_busbw_gbps"), "why": g.get("why")}
        for g in threshold.get("nccl_tests") or []
        if isinstance(g, dict)
    ]
    if not any(g.get("metric") == "wrong_total" for g in out):
        out.append({"metric": "wrong_total", "max": 0, "why": "no wrong bytes", "implied": True})
    return out


def _reason(test: dict[str, Any]) -> Figure:
    name, status = str(test.get("name")), str(test.get("status"))
    reason = str(test.get("reason") or status)
    short = reason if len(reason) <= REASON_CHARS else reason[: REASON_CHARS - 1] + "…"
    said = f"{name} {status}: {short}"
    # A crash its launcher recorded: the rank that failed first, not its peers' errors after it (nor a Slurm
    # job's state before it), so that a drain's short reason keeps it.
    if (first := _first_failure(test)) is not None:
        said = first.lead()
    return Figure(name, "", None, "", said, "reason", causes.likely_cause(test), 0.0)


def _first_failure(test: dict[str, Any]) -> first_failure.Failure | None:
    return first_failure.Failure.from_record((test.get("metrics") or {}).get("first_failure"))


def _where(test: dict[str, Any], suspects: set[str]) -> tuple[str, ...]:
    """A test's hosts; of a test across hosts, the host of the rank its launcher saw fail first (the others
    lost their peer), else those isolation named, where it named any."""
    hosts = tuple(str(h) for h in test.get("hosts") or [])
    first = _first_failure(test)
    if len(hosts) > 1 and first is not None and first.host in hosts:
        return (first.host,)
    named = tuple(h for h in hosts if h in suspects)
    return named if len(hosts) > 1 and named else hosts


def _derived_fails(gate: dict[str, Any]) -> bool:
    return "basis" in gate and gate.get("status") not in (None, "pass")


def _derived(test: str, gate: dict[str, Any]) -> Figure:
    metric, value, bound = str(gate.get("metric")), _number(gate.get("value")), _number(gate.get("min"))
    # Their reasons name the part: the burn-in's GPU and minute, the probe's rounds, a transport's fabric.
    if gate.get("basis") in ("burn-in", "rounds", "transport"):
        cause = causes.figure_cause(str(gate.get("part") or "host"), metric)
        score = _score(value, bound, _number(gate.get("max")))
        reason = str(gate.get("reason") or metric).removeprefix(f"{gate.get('part')}: ")  # the line names it
        return Figure(test, metric, value, "", reason, "problem", cause, score)
    text = f">= {_fmt(bound)}"
    if _number(gate.get("fraction")) is not None and _number(gate.get("limit")) is not None:
        text += f" = {_fmt(gate['fraction'])} x {_fmt(gate['limit'])}"
    part = str(gate.get("part") or "host")
    cause = causes.figure_cause(part, metric) if value is not None else causes.NOT_MEASURED
    source, score = str(gate.get("source") or ""), _score(value, bound, None)
    return Figure(test, metric, value, text, source, str(gate["basis"]), cause, score)


def _profile(test: str, raw: dict[str, Any], metrics: dict[str, Any]) -> Figure | None:
    """A profile gate checked again against the test's metrics: None where it holds (or, implied, where the
    test has no such metric)."""
    low, high = _number(raw.get("min")), _number(raw.get("max"))
    gate = Gate(str(raw.get("metric")), low, high, str(raw.get("why") or ""))
    value = lookup(metrics, gate.metric)
    if not gate.check(metrics) or (value is None and raw.get("implied")):
        return None
    bounds = [f"{sign} {_fmt(b)}" for sign, b in ((">=", low), ("<=", high)) if b is not None]
    cause = causes.figure_cause("host", gate.metric) if value is not None else causes.NOT_MEASURED
    score = _score(value, low, high)
    return Figure(
        test, gate.metric, value, " and ".join(bounds), gate.why or "the profile", "profile", cause, score
    )


def _problem(test: str, problem: str, category: str = "") -> Figure:
    cause = causes.problem_cause(problem)
    return Figure(test, "", None, "", problem, "problem", cause, 0.0, category or "hardware")


def _part(hosts: tuple[str, ...], part: str, figs: list[Figure], suspects: set[str]) -> BadPart:
    by_metric: dict[str, list[Figure]] = {}
    for fig in figs:
        by_metric.setdefault(fig.metric or fig.source, []).append(fig)
    # The worst metric; of its gates the reference (what healthy machines of the model measured) where it
    # fails, else the absolute one (the datasheet's or the link's figure).
    worst_metric = min(by_metric.values(), key=lambda same: min(f.score for f in same))
    worst = min(worst_metric, key=lambda f: (BASES.index(f.basis) if f.basis in BASES else 0, f.score))
    tests = tuple(dict.fromkeys(f.test for f in figs))
    named = len(hosts) < 2 or set(hosts) <= suspects
    return BadPart(hosts, part, _kind(part, hosts), worst, len(by_metric) - 1, tests, named)


def _kind(part: str, hosts: tuple[str, ...]) -> str:
    if part.startswith("GPU "):
        return "pair" if " -> " in part else "gpu"
    if part.startswith(CPU_RANK):
        return "rank"
    if part == "fabric" or (not part and len(hosts) > 1):
        return "fabric"
    return "port" if part else "host"


def _score(value: float | None, low: float | None, high: float | None) -> float:
    """How far the value is inside its bound (1: at it); 0 for one not measured or over a bound of 0."""
    if value is None:
        return 0.0
    if low:
        return value / low
    if high is not None and value > 0:
        return high / value
    return 0.0


def _unit(metric: str) -> str:
    family = metric.split(".")[0]
    if family == "gemm_bf16_tflops":
        return " TFLOP/s"
    return " GB/s" if family.endswith("_gbps") else ""


def _number(value: Any) -> float | None:
    return None if isinstance(value, bool) or not isinstance(value, int | float) else float(value)


def _fmt(value: Any) -> str:
    number = _number(value)
    return f"{number:.4g}" if number is not None else str(value)
