"""junit.xml: one testcase per host x test, classname the host and name the test."""

from __future__ import annotations

import xml.etree.ElementTree as ET

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
