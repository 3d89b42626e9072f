"""junit.xml: one testcase per host x test (classname = host, name = test), for CI systems that read JUnit.

A cluster test spanning N hosts is N testcases with the same outcome, so every host's row shows it.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from pav.hostlist import compress
from pav.printable import printable
from pav.results import RunResults, TestResult

# A test the signal cut short is an error to a CI system: it did not run to a result.
OUTCOME_TAGS = {"fail": "failure", "error": "error", "interrupted": "error", "skipped": "skipped"}


def render(results: RunResults) -> str:
    cases = [(host, test) for test in results.tests for host in test.hosts or ["(no host)"]]
    tags = [OUTCOME_TAGS.get(test.status) for _, test in cases]
    counts = {tag: tags.count(tag) for tag in OUTCOME_TAGS.values()}
    suite = ET.Element(
        "testsuite",
        name=f"provision-and-validate.{results.env}",
        tests=str(len(cases)),
        failures=str(counts["failure"]),
        errors=str(counts["error"]),
        skipped=str(counts["skipped"]),
        timestamp=results.started,
    )
    for host, test in cases:
        suite.append(_case(host, test))
    if results.error:
        ET.SubElement(suite, "system-err").text = printable(results.error, keep="\n\t")
    root = ET.Element("testsuites")
    root.append(suite)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def _case(host: str, test: TestResult) -> ET.Element:
    # A reason quotes what hosts said (a process's name): XML cannot hold a control character.
    case = ET.Element("testcase", classname=printable(host), name=printable(test.name))
    wall = test.metrics.get("wall_s")
    if isinstance(wall, int | float):
        case.set("time", f"{wall:.3f}")
    tag = OUTCOME_TAGS.get(test.status)
    if tag:
        outcome = ET.SubElement(case, tag, message=printable(test.reason))
        if len(test.hosts) > 1:
            outcome.text = printable(f"{test.name} ran across {compress(test.hosts)}")
    return case
