"""report.html: one self-contained file (inline CSS and SVG, no scripts, nothing fetched) for people.

Rendered from the results.json dict, so any run dir's results.json can be rendered again.
The page: templates/report.html.j2. It leads with the verdict, the bad parts (bad_parts.py) and, for GPU
runs, each host's GPU grid and pair heatmap; every reason, gate and figure follows.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from html import escape
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from pav.hostlist import compress, natural_key
from pav.reporting import bad_parts, burn_plots, causes, fold, gpu_grid, history, links, plots
from pav.reporting.changes import tuning_line
from pav.results import NOTHING_RUN, TestResult, why_nothing_ran
from pav.units import size_label

TEMPLATES = Path(__file__).parent / "templates"
SUMMARY_ORDER = ("pass", "fail", "skipped", "error", "interrupted")  # as results.json's summary
# The worst of a cell's results shows, in the order the folded gate tables rank a test's results by.
STATUS_ORDER = {status: rank for rank, status in enumerate(fold.WORST_FIRST)}


def render(results: dict[str, Any], run_dir: Path, secrets: Iterable[str] = ()) -> str:
    return _environment().get_template("report.html.j2").render(**context(results, run_dir, secrets))


# One per process: an Environment keeps the templates it compiled (report.html.j2 is ~0.16 CPU-s to compile,
# most of a render), and its loader still reloads a template whose file changed.
@functools.cache
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["num"] = _num
    env.filters["pct"] = _pct
    env.filters["size"] = lambda b: size_label(int(b))
    env.filters["hostlist"] = compress  # sim-x-[0-63], natural order (pav.hostlist)
    env.filters["breakable"] = lambda name: Markup(
        "_<wbr>".join(escape(part) for part in str(name).split("_"))
    )
    return env


def fallback(message: str) -> str:
    head = "<!DOCTYPE html><html><head><meta charset='utf-8'><title>report</title></head>"
    return f"{head}<body><p>{escape(message)}</p></body></html>\n"


def context(results: dict[str, Any], run_dir: Path, secrets: Iterable[str] = ()) -> dict[str, Any]:
    isolation = results.get("isolation") or {}
    suspects = {s.get("host"): s for s in isolation.get("suspects") or []}
    hosts, tests, cells = matrix(results)
    verdict = results.get("verdict", "ERROR")
    gpus = gpu_grid.section(results)
    return {
        "r": results,
        "verdict": verdict,
        # A class per verdict, no space in it: `NOTHING RUN` as a class was two, neither styled (issue 64).
        "verdict_class": "v-" + str(verdict).lower().replace(" ", "-"),
        "nothing_ran": nothing_ran(results) if verdict == NOTHING_RUN else "",
        "summary": _summary(results.get("tests", [])),
        "bad_parts": bad_parts.find(results),
        "suspects": list(suspects.values()),
        "links": links.found(results),
        "isolation_steps": isolation.get("steps") or [],
        "suspect_hosts": set(suspects),
        "matrix_hosts": hosts,
        "matrix_tests": tests,
        "cells": cells,
        "failures": causes.failures(results, run_dir, secrets),
        "gpus": gpus,
        # At fleet size the healthy rows fold (fold.py); every row stays in results.json.
        "gate_tables": fold.gate_tables(gpus.gate_tables) if gpus else [],
        "healthy_gpus": fold.healthy_hosts(gpus.healthy) if gpus and gpus.fold else [],
        "near_limit": fold.NEAR_LIMIT,
        "gpu_columns": gpu_grid.COLUMNS,
        "busbw": plots.busbw_figures(results),
        "cross_check": results.get("cross_check") or [],
        "training": plots.training_figures(results),
        "burn_in": burn_plots.burn_in_figures(results),
        "training_rows": plots.training_rows(results),
        "history": results.get("history") or {},
        "history_note": history.too_few(results.get("history") or {}),
        "facts": [facts_row(name, h) for name, h in _natural_items(results.get("hosts") or {})],
        "timing": results.get("timing") or {},
    }


def nothing_ran(results: dict[str, Any]) -> str:
    """Why a NOTHING RUN run ran nothing, from its record: the skip reasons, as summary.txt gives them."""
    tests = [
        TestResult(
            str(t.get("name")),
            [str(h) for h in t.get("hosts") or []],
            t.get("status"),
            str(t.get("reason") or ""),
        )
        for t in results.get("tests") or []
        if isinstance(t, dict)
    ]
    return why_nothing_ran(tests)


def matrix(results: dict[str, Any]) -> tuple[list[str], list[str], dict[tuple[str, str], dict[str, Any]]]:
    """Hosts x tests: a cluster test fills the cell of every host it spans."""
    hosts = list(results.get("hosts") or {})
    tests: list[str] = []
    cells: dict[tuple[str, str], dict[str, Any]] = {}
    for test in results.get("tests", []):
        if test["name"] not in tests:
            tests.append(test["name"])
        for host in test.get("hosts", []):
            if host not in hosts:
                hosts.append(host)
            old = cells.get((host, test["name"]))
            if old is None or STATUS_ORDER[test["status"]] < STATUS_ORDER[old["status"]]:
                span = len(test.get("hosts", []))
                cells[(host, test["name"])] = {
                    "status": test["status"],
                    "reason": test.get("reason", ""),
                    "span": span,
                }
    return sorted(hosts, key=natural_key), tests, cells  # sim-x-2 before sim-x-10


def _summary(tests: list[dict[str, Any]]) -> dict[str, int]:
    """Tests per status, as summary.txt counts them: `interrupted` only where the signal cut some."""
    counts = {s: sum(t.get("status") == s for t in tests) for s in SUMMARY_ORDER}
    return {s: n for s, n in counts.items() if n or s != "interrupted"}


def _natural_items(hosts: dict[str, Any]) -> list[tuple[str, Any]]:
    return sorted(hosts.items(), key=lambda item: natural_key(item[0]))


def facts_row(name: str, host: dict[str, Any]) -> dict[str, Any]:
    facts = host.get("facts") or {}
    gpu, torch = facts.get("gpu") or {}, facts.get("torch") or {}
    devices = gpu.get("devices") or []
    models = sorted({str(d[1]) for d in devices if isinstance(d, list) and len(d) > 1})
    rdma = facts.get("rdma") or {}
    return {
        "name": name,
        "status": host.get("status", "unknown"),
        "gpu": f"{gpu.get('count', 0)} x {', '.join(models)}" if models else str(gpu.get("count", "?")),
        "driver": gpu.get("driver") or "-",
        "cuda": gpu.get("cuda") or torch.get("cuda") or "-",
        "nccl": torch.get("nccl") or "-",
        "torch": torch.get("version") or "-",
        "firmware": _vbios(devices),
        "kernel": facts.get("kernel") or "-",
        "os": facts.get("os") or "-",
        "cpu": (facts.get("cpu") or {}).get("model") or "-",
        "rdma": ", ".join(rdma.get("hcas") or []) or "none",
        "rdma_ports": rdma.get("ports") or [],
        "topology": gpu.get("topology") or "",
        "tuning": tuning_line(
            str(host.get("status", "")),
            host.get("changes") or [],
            bool(host.get("tuning_applied")),
            (host.get("ansible") or {}).get("configure"),
        ),
        "diffs": host.get("diffs") or [],
    }


def _vbios(devices: list[Any]) -> str:
    """GPU VBIOS versions: the 7th column of preflight's nvidia-smi query (hosts seen before it was added
    have 6)."""
    found = sorted({str(d[6]) for d in devices if isinstance(d, list) and len(d) > 6})
    return "VBIOS " + ", ".join(found) if found else "-"


def _num(value: Any, digits: int = 3) -> str:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return "-"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.{digits}g}"


def _pct(value: Any) -> str:
    return "-" if not isinstance(value, int | float) else f"{value + 0.0:+.1%}"
