"""junit.xml: one testcase per host x test, for CI systems that read JUnit."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from pav.results import RunResults, count_statuses


def render(results: RunResults) -> str:
    counts = count_statuses(results.tests)
    suite = ET.Element(
        "testsuite",
        name=f"provision-and-validate.{results.env}",
        tests=str(len(results.tests)),
        failures=str(counts["fail"]),
        errors=str(counts["error"]),
        skipped=str(counts["skipped"]),
        timestamp=results.started,
    )
    for test in results.tests:
        case = ET.SubElement(suite, "testcase", classname=test.name, name=",".join(test.hosts))
        if test.status == "fail":
            ET.SubElement(case, "failure", message=test.reason)
        elif test.status == "error":
            ET.SubElement(case, "error", message=test.reason)
        elif test.status == "skipped":
            ET.SubElement(case, "skipped", message=test.reason)
    if results.error:
        ET.SubElement(suite, "system-err").text = results.error
    root = ET.Element("testsuites")
    root.append(suite)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
