"""summary.txt: the table printed at the end of a run. It opens with the verdict and the bad parts (one
line each), the tables and every full reason below, and ends with the verdict again. Hosts alike (the same
status, or the same outcome of one test) share a row, named as a range (`64 hosts sim-x-[0-63]`,
pav.hostlist), failing rows first, and no line runs past WIDTH columns: a 64-host run reads in a screenful.
A teardown-only run (`--stages teardown`) ran no test and contacted no host but to remove a run's work: its
summary is its stages and what it tore down, without the host, test and history lines that would mean
nothing."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from pav.hostlist import compress, describe
from pav.reporting import bad_parts, history
from pav.reporting.changes import still_changed, tuning_line
from pav.results import NOTHING_RUN, RunResults, count_statuses, why_nothing_ran

BAD_PARTS_HEAD = (
    "bad parts (each: its worst figure against its gate, the tests, the likely cause; reasons below):"
)
SUSPECT_CHARS = 200
WIDTH = 120  # a terminal's columns: a longer line goes on, indented, below it
# Lines that are commands to paste (the kept run's hints): never broken, or they would not run as printed.
WHOLE = ("  teardown: ", "  reuse: ")
# Rows of a table in this order, the bad first; a status not named here sorts last.
TEST_ORDER = ("fail", "error", "interrupted", "skipped", "pass")
HOST_ORDER = ("unreachable", "failed", "interrupted", "unknown", "ok")
T = TypeVar("T")


# The stages of a teardown-only run: the report runs in every run.
TEARDOWN_ONLY = frozenset({"report", "teardown"})


def render(results: RunResults) -> str:
    if teardown_only(results):
        return _render_teardown(results)
    lines = [
        f"verdict {results.verdict}  run {results.run_id}  env {results.env}  "
        f"profile {results.threshold_profile or results.threshold_profile_chosen}",
        *_bad_parts(results),
        "",
        _table(["stage", "status", "detail"], [[s.name, s.status, s.detail] for s in results.stages]),
        "",
        _table(["hosts", "status", "gpus", "tuning"], _host_rows(results)),
        "",
        _table(["test", "hosts", "status", "reason"], _test_rows(results)),
        "",
    ]
    lines += (
        _check_mode(results)
        + _gates(results)
        + _suspects(results)
        + _cross_check(results)
        + _drops(results)
        + _timing(results)
        + _exports(results)
        + _actions(results)
    )
    counts = count_statuses(results.tests)
    shown = {k: v for k, v in counts.items() if v or k != "interrupted"}  # interrupted: only when some were
    lines.append("tests: " + "  ".join(f"{k}={v}" for k, v in shown.items()))
    if results.error:
        lines.append(f"error: {results.error}")
    if results.verdict == NOTHING_RUN:
        lines.append(f"nothing was run: {why_nothing_ran(results.tests)}")
    lines += kept_lines(results)
    lines.append(f"VERDICT: {results.verdict}")
    return _fold(lines)


def teardown_only(results: RunResults) -> bool:
    """Whether the run's stages were a teardown and the report (`--stages teardown`), nothing else."""
    ran = {stage.name for stage in results.stages}
    return "teardown" in ran and ran <= TEARDOWN_ONLY


def _render_teardown(results: RunResults) -> str:
    lines = [
        f"verdict {results.verdict}  run {results.run_id}  env {results.env}",
        "",
        _table(["stage", "status", "detail"], [[s.name, s.status, s.detail] for s in results.stages]),
        "",
        *_torn_down(results),
    ]
    if results.timing:
        lines.append(f"time: run {results.timing['run_s']:.0f}s")
    lines += _exports(results)
    if results.error:
        lines.append(f"error: {results.error}")
    lines.append(f"VERDICT: {results.verdict}")
    return _fold(lines)


def kept_lines(results: RunResults) -> list[str]:
    """What the run left up and the commands that act on it, each whole: they run as pasted (issue 64)."""
    kept = results.kept
    if not kept:
        return []
    hosts = kept.get("hosts") or []
    if "resources" in kept:
        what = f"{len(kept['resources'])} resource(s)" + (f", hosts {', '.join(hosts)}" if hosts else "")
        head = f"kept: {what}; state in {kept['state_dir']}; other runs refuse them until they expire"
    else:
        head = "kept: the run's work on its hosts"
    lines = [head, f"  teardown: {kept['teardown']}"]
    if kept.get("reuse"):
        lines.append(f"  reuse: {kept['reuse']}")
    return lines


def _torn_down(results: RunResults) -> list[str]:
    """Whose work the teardown took, from which hosts, and each resource it destroyed."""
    stage = next(s for s in results.stages if s.name == "teardown")
    kept = results.kept_run or {}
    whose = f"kept run {kept['run_id']} ({kept.get('run_dir')})" if kept.get("run_id") else ""
    whose = whose or f"env {results.env}"
    lines = [f"teardown of {whose}: {stage.status}"]
    if results.hosts:
        lines.append(f"  hosts: {compress(results.hosts)}")
    lines += [f"  destroyed {address}" for address in results.destroyed]
    return [*lines, ""]


def _gates(results: RunResults) -> list[str]:
    """Per GPU host: derived performance gates, turned off on purpose, or the facts they lack."""
    lines = []
    undeclared = {
        str(rec.get("bars")) for rec in results.gates.values() if rec.get("bars", "declared") != "declared"
    }
    lines += [f"gates: {note}" for note in sorted(undeclared)]  # once a run, not once a host
    said: dict[tuple[str, ...], list[str]] = {}  # what is said of a host -> the hosts it is said of
    for host, rec in results.gates.items():
        said.setdefault(_gate_lines(rec), []).append(host)
    # A host lacking facts first: its gates are the ones not there.
    for (head, *missing), hosts in _bad_first(said.items(), lambda item: int(len(item[0]) == 1)):
        lines += [f"gates {describe(hosts)}: {head}", *missing]
    return [*lines, ""] if lines else []


def _gate_lines(rec: dict[str, Any]) -> tuple[str, ...]:
    """What summary.txt says of one host's derived gates: turned off on purpose, or the facts they came
    from and those they lack."""
    if not rec.get("derived"):
        return (str(rec.get("note", "no performance gates")),)
    used = rec.get("facts_used", {})
    head = f"derived from {used.get('gpus')}x {used.get('gpu_model')} ({used.get('source')})"
    return (head, *(f"  MISSING {fact}" for fact in rec.get("missing", [])))


def _cross_check(results: RunResults) -> list[str]:
    if not results.cross_check:
        return []
    low = [c for c in results.cross_check if c["low"]]
    head = f"cross-check payload/nccl-tests busbw: {len(results.cross_check)} ratios, {len(low)} below 0.95"
    return [head] + [
        f"  LOW {_hosts(c['host'])} {c['op']} {c['size_bytes']}: ratio {c['ratio']}" for c in low
    ]


SHOWN_DROPS = 5


def _drops(results: RunResults) -> list[str]:
    """Metrics that fell against the earlier runs of the same key (report.html lists them all), or why
    none can be flagged yet."""
    hist = results.history
    dropped = [m for m in hist.get("metrics", []) if m.get("flagged")]
    if not dropped:
        return [f"history: {few}"] if (few := history.too_few(hist)) else []
    key = hist.get("key", hist.get("env"))
    lines = [f"history: {len(dropped)} metric(s) dropped against earlier runs of {key}"]
    for m in dropped[:SHOWN_DROPS]:
        change = (
            m["vs_median"] if m["vs_median"] is not None else m["vs_previous"]
        )  # the median: the reference
        lines.append(
            f"  DROP {m['test']} {m['metric']} {m['latest']:.4g} on {_hosts(m['host'])} ({change:+.1%})"
        )
    if len(dropped) > SHOWN_DROPS:
        lines.append(
            f"  ... {len(dropped) - SHOWN_DROPS} more: provision-and-validate history --env {hist.get('env')}"
        )
    return lines


def _check_mode(results: RunResults) -> list[str]:
    """Check mode changes nothing outside the run's folder, but the roles that install what the tests run
    still report changes: say where those went, so neither reads as "the host was changed"."""
    held: dict[tuple[str, ...], list[str]] = {}
    for host in results.hosts.values():
        if not host.tuning_applied and (still := still_changed(host.changes)):
            held.setdefault(tuple(still), []).append(host.name)
    if not held:
        return []
    lines = [
        "tuning ran in check mode; what the tests run was installed in the run's own folder on each host "
        "(removed at teardown), no package, SSH key or build elsewhere:"
    ]
    lines += [f"  {describe(hosts)}: {', '.join(changes)}" for changes, hosts in held.items()]
    if len(results.hosts) > 1:
        lines.append("  mpirun across hosts relies on the login user's own host-to-host SSH (no key written)")
    return [*lines, ""]


def _timing(results: RunResults) -> list[str]:
    t = results.timing
    if not t:
        return []
    split = f"tests {t['tests_s']:.0f}s + orchestration {t['orchestration_s']:.0f}s"
    return [f"time: run {t['run_s']:.0f}s = {split}"]


def _exports(results: RunResults) -> list[str]:
    """Where the metrics went (--metrics-textfile, --pushgateway), or what failed and the fix."""
    lines = []
    for export in results.exports:
        state = "" if export.get("ok") else " FAILED"
        lines.append(f"metrics: {export.get('to')} {export.get('where')}{state}: {export.get('detail')}")
    return lines


def _actions(results: RunResults) -> list[str]:
    """What --on-fail did to each node (drained), or what failed and the fix."""
    lines = []
    for act in results.actions:
        state = " FAILED" if act.ok is False else ""
        where = f"{act.host}: " if act.host else ""  # none: the entry's detail names its hosts
        lines.append(f"{act.action}{state}: {where}{act.detail}")
    return lines


def _host_rows(results: RunResults) -> list[list[str]]:
    """One row per kind of host (its status, GPUs, tuning), the hosts of each as a range, the bad first."""
    rows: dict[tuple[str, str, str], list[str]] = {}
    for h in results.hosts.values():
        gpus = str(h.facts.get("gpu", {}).get("count", "?"))
        tuning = tuning_line(h.status, h.changes, h.tuning_applied, h.ansible.get("configure"))
        rows.setdefault((h.status, gpus, tuning), []).append(h.name)
    ranked = _bad_first(rows.items(), lambda item: _rank(HOST_ORDER, item[0][0]))
    return [[describe(hosts), status, gpus, tuning] for (status, gpus, tuning), hosts in ranked]


def _test_rows(results: RunResults) -> list[list[str]]:
    """One row per test and outcome: the hosts a test ran on alone with the same status and reason share
    it (`gpu_probe  63 hosts sim-x-[0-36,38-63]  pass`); failing rows first, each reason in full."""
    rows: dict[tuple[str, str, str, int], list[str]] = {}
    for test in results.tests:
        # A test across hosts is a row of its own (-1 shares), whatever another's reason says.
        alone = len(rows) if len(test.hosts) > 1 else -1
        rows.setdefault((test.name, test.status, test.reason, alone), []).extend(test.hosts)
    ranked = _bad_first(rows.items(), lambda item: _rank(TEST_ORDER, item[0][1]))
    return [[name, describe(hosts), status, reason] for (name, status, reason, _), hosts in ranked]


def _rank(order: Sequence[str], status: str) -> int:
    return order.index(status) if status in order else len(order)


def _bad_first(items: Iterable[T], rank: Callable[[T], int]) -> list[T]:
    """The items in their order, stably sorted by rank: the worst first, the rest as they came."""
    return sorted(items, key=rank)


def _hosts(joined: str) -> str:
    """results.json's comma-joined hosts (cross_check, history) as a range."""
    return compress(joined.split(",")) if joined else joined


def _fold(lines: list[str]) -> str:
    """The lines, each over WIDTH columns broken at spaces, its rest indented 4 more than it was."""
    out = []
    for line in "\n".join(lines).split("\n"):  # a table is one item of several lines
        if len(line) <= WIDTH or line.startswith(WHOLE):
            out.append(line)
            continue
        indent = " " * (len(line) - len(line.lstrip()) + 4)
        out += textwrap.wrap(
            line, WIDTH, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False
        )
    return "\n".join(out) + "\n"


def _table(header: list[str], rows: list[list[str]]) -> str:
    if not rows:
        return "  ".join(header) + "\n(none)"
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    widths[-1] = 0  # the last column runs free
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join(fmt.format(*map(str, r)).rstrip() for r in [header, *rows])


def _bad_parts(results: RunResults) -> list[str]:
    found = bad_parts.find(results.to_dict())
    return [BAD_PARTS_HEAD, *(f"  {part.line()}" for part in found)] if found else []


def _suspects(results: RunResults) -> list[str]:
    """Each suspect host and why, cut short: the reasons it joins are in the tests table, its bad parts on
    top."""
    suspects = results.isolation.get("suspects", [])
    links = results.isolation.get("links", [])
    if not suspects and not links:
        return []
    lines = ["suspect hosts (replace or repair; evidence in results.json isolation):"]
    lines += [f"  {s['host']}: {_cut(str(s.get('reason', '')), SUSPECT_CHARS)}" for s in suspects]
    # A fault between two sets of hosts that each pass alone: the link between them, not a host.
    lines += [f"  link: {_cut(str(link.get('reason', '')), SUSPECT_CHARS)}" for link in links]
    return [*lines, ""]


def _cut(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[: chars - 1] + "…"
