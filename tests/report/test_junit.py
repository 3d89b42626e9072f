"""junit.xml: one testcase per host x test, classname the host and name the test."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from pav.printable import printable
from pav.reporting import junit
from pav.results import RunResults, TestResult


def test_one_case_per_host_and_test() -> None:
    results = RunResults("r1-sim", "sim", "inv", "/tmp/r1")
    results.tests = [
        TestResult("torch_gloo_allreduce", ["h0"], "pass", metrics={"wall_s": 3.25}),
        TestResult("torch_gloo_allreduce", ["h1"], "skipped", "no GPU"),
        TestResult("mpi_allreduce", ["h0", "h1"], "fail", "wrong_total=3 above the maximum 0"),
        TestResult("ddp_cpu_train_multi", ["h0", "h1"], "error", "no result came back from h1"),
    ]
    results.error = "host h1 unreachable"
    suite = ET.fromstring(junit.render(results)).find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors"), suite.get("skipped")) == (
        "6",
        "2",
        "2",
        "1",
    )
    cases = {(c.get("classname"), c.get("name")): c for c in suite.iter("testcase")}
    assert set(cases) == {
        ("h0", "torch_gloo_allreduce"), ("h1", "torch_gloo_allreduce"), ("h0", "mpi_allreduce"),
        ("h1", "mpi_allreduce"), ("h0", "ddp_cpu_train_multi"), ("h1", "ddp_cpu_train_multi"),
    }  # fmt: skip
    assert cases[("h0", "torch_gloo_allreduce")].get("time") == "3.250"
    failure = cases[("h1", "mpi_allreduce")].find("failure")
    assert failure is not None and failure.get("message") == "wrong_total=3 above the maximum 0"
    assert failure.text == "mpi_allreduce ran across h[0-1]"  # its hosts as a range (issue 65)
    assert cases[("h1", "torch_gloo_allreduce")].find("skipped") is not None
    assert cases[("h0", "ddp_cpu_train_multi")].find("error") is not None
    assert suite.findtext("system-err") == "host h1 unreachable"


def test_what_a_host_said_reaches_the_xml_as_text() -> None:
    """Issue 62: a process's name from a GPU host (/proc/PID/comm) in a reason, with an escape sequence and
    characters XML 1.0 cannot hold, made junit.xml unreadable to a CI system; each is shown as \\xNN."""
    results = RunResults("r1-sim", "sim", "inv", "/tmp/r1")
    said = "PID 7 (\x1b]0;owned\x07\x1b[2Jpy\x00\x0bthon, user root) holds 9 MiB"
    results.tests = [TestResult("gpu_leftovers", ["h0"], "fail", said)]
    results.error = "host h0 said \x1b[31mred\x1b[0m"
    suite = ET.fromstring(junit.render(results)).find("testsuite")
    assert suite is not None
    failure = suite.find("testcase/failure")
    assert failure is not None
    assert failure.get("message") == r"PID 7 (\x1b]0;owned\x07\x1b[2Jpy\x00\x0bthon, user root) holds 9 MiB"
    assert suite.findtext("system-err") == r"host h0 said \x1b[31mred\x1b[0m"


def test_printable_keeps_what_is_asked_and_plain_text() -> None:
    assert printable("a\tb\nc\x1b") == r"a\x09b\x0ac\x1b"
    assert printable("a\tb\nc\x1b", keep="\n\t") == "a\tb\nc\\x1b"
    assert printable("GPU 0 (00000000:00:06.0) — ok") == "GPU 0 (00000000:00:06.0) — ok"
