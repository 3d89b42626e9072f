"""A link isolation found (pav.isolation.Link: two sets of hosts that each pass alone and fail together) as
the report and marking act on it (pav.reporting.links): a bad part of its own, both sides named with their
racks; report.html lists it with its evidence; marking drains or taints no host for it and says why in one
line. The run: large_run.linked_run (64 hosts in two racks), in process."""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path
from typing import Any

import pytest

from pav.marking import decide
from pav.reporting import bad_parts, exposition, html, links, metrics, summary
from pav.results import RunResults
from tests.report import large_run
from tests.report.large_run import BAD_HOST, SLOW_HOST
from tests.report.prom import one, parse, pick

MULTI = "torch_nccl_allreduce_multi"
BETWEEN = "sim-x-[0-31] (rack r0) and sim-x-[32-63] (rack r1)"


# The run is built once for the module: the report, marking and the summary read it, never change it.
@pytest.fixture(scope="module")
def linked() -> RunResults:
    return large_run.linked_run()


@pytest.fixture(scope="module")
def linked_dict(linked: RunResults) -> dict[str, Any]:
    return linked.to_dict()


def test_a_link_is_a_bad_part_naming_both_sides_and_their_racks(
    linked: RunResults, linked_dict: dict[str, Any]
) -> None:
    found = bad_parts.find(linked_dict)
    assert [(p.kind, p.where) for p in found] == [
        ("gpu", f"{BAD_HOST} {found[0].part}"),
        ("host", SLOW_HOST),
        ("link", f"link between {BETWEEN}"),  # not the fabric of the 64 hosts, nor a host
    ]
    link = found[-1]
    assert link.tests == (MULTI,) and not link.named and link.worst.cause == links.CAUSE
    assert link.worst.measured.startswith("busbw_gbps.all_reduce.8589934592 5.072 GB/s")
    # The verdict's "what failed": the summary's bad parts name it.
    assert f"  link between {BETWEEN}: busbw_gbps" in summary.render(linked)


def test_marking_takes_no_host_for_a_link_and_says_so(linked_dict: dict[str, Any]) -> None:
    decided = decide.decide(linked_dict)
    assert [m.host for m in decided.marks] == [BAD_HOST, SLOW_HOST]  # their own parts, not the link's
    assert decided.unnamed is None
    [left] = decided.unmarked
    assert left.line("tainting") == (
        f"not tainting sim-x-[0-31], sim-x-[32-63]: a link between them failed {MULTI} (each side passes it "
        f"alone); fix the fabric between {BETWEEN}: a rack's uplink, a switch port or a cable"
    )
    entry = left.entry("drain", "draining")
    assert entry.hosts == tuple(large_run.HOSTS) and entry.ok is None and entry.tests == (MULTI,)


def test_the_report_shows_the_link_with_its_evidence(linked_dict: dict[str, Any], tmp_path: Path) -> None:
    page = html.render(linked_dict, tmp_path)
    rows = [cells(row) for row in re.findall(r'<tr class="bad-part">(.*?)</tr>', page, re.S)]
    assert rows[-1][:2] == [BETWEEN, "the link between them"] and rows[-1][4] == MULTI
    section = page[page.index('<section class="suspects links" id="links">') :]
    section = section[: section.index("</section>")]
    assert f'<b class="suspect">{MULTI}</b> between <b>{BETWEEN}</b>:' in section
    steps = [cells(row) for row in re.findall(r"<tr><td>(.*?)</tr>", section, re.S)]
    assert steps[:2] == [[MULTI, "sim-x-[0-31]", "pass", ""], [MULTI, "sim-x-[32-63]", "pass", ""]]
    # Then the pairs across the racks, which failed (a pair per round crosses the uplink).
    assert steps[2:] and all(re.fullmatch(r"sim-x-\[\d+,\d+\]", s[1]) and s[2] == "fail" for s in steps[2:])


def cells(row: str) -> list[str]:
    """A table row's cells as text."""
    return [unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in re.split(r"</td>\s*<td[^>]*>", "<td>" + row)]


def test_a_link_recorded_before_links_named_their_test_takes_it_from_its_evidence() -> None:
    record = {"sides": [["a", "b"], ["c"]], "reason": "why", "evidence": [{"test": "t", "hosts": ["a", "c"]}]}
    [link] = links.found({"isolation": {"links": [record]}})
    assert (link.test, link.between, link.hosts) == ("t", "a,b and c", ("a", "b", "c"))


def test_the_metrics_fail_no_host_for_a_link_and_carry_it_as_a_series_of_its_own(
    linked_dict: dict[str, Any],
) -> None:
    """Each side passes alone: a host verdict of FAIL would page for every host of both sides, to drain it."""
    series = parse(exposition.render(metrics.families(linked_dict)))
    assert one(series, "pav_failed_link_info", test=MULTI, between=BETWEEN) == 1
    failing = {s.labels["host"] for s in pick(series, "pav_host_verdict", verdict="FAIL") if s.value == 1}
    assert failing == {BAD_HOST, SLOW_HOST}
    assert one(series, "pav_run_verdict", verdict="FAIL") == 1
