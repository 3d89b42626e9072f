"""The alert rules docs/nightly.md shows (deploy/prometheus/pav-alerts.yml): promtool finds them valid, the
doc quotes the file as it is (and its dashboard queries parse), and promtool's rule tests fire them on the
metrics of the real busy-GPU run (the run, its host and GPU 1), on none of the healthy run's, and on a
nightly that stopped 26 h ago."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from pav.reporting import exposition, metrics
from tests.conftest import ROOT
from tests.report import large_run
from tests.report.large_run import BAD_HOST, SLOW_HOST
from tests.report.prom import parse, promtool
from tests.report.test_links import BETWEEN, MULTI
from tests.report.test_metrics import BUSY, recorded_run

RULES = ROOT / "deploy" / "prometheus" / "pav-alerts.yml"
DOC = ROOT / "docs" / "nightly.md"
ALERTS = (
    "PavVerdictNotPass",
    "PavHostFailed",
    "PavGpuFailed",
    "PavLinkFailed",
    "PavNoRecentRun",
    "PavNoMetrics",
)


def test_promtool_finds_the_rules_valid() -> None:
    proc = promtool("check", "rules", str(RULES))
    said = proc.stdout + proc.stderr
    assert proc.returncode == 0 and f"SUCCESS: {len(ALERTS)} rules found" in proc.stdout, said
    names = [r["alert"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]
    assert tuple(names) == ALERTS


def test_the_doc_quotes_the_rules_file_as_it_is() -> None:
    rules = RULES.read_text()
    body = rules[rules.index("groups:") :]
    assert f"```yaml\n{body}```" in DOC.read_text(), f"docs/nightly.md must quote {RULES.relative_to(ROOT)}"


def test_the_docs_dashboard_queries_are_valid_promql(tmp_path: Path) -> None:
    """Each query of the doc's dashboard table, as a recording rule promtool parses."""
    doc = DOC.read_text()
    table = doc[doc.index("### Dashboard queries") :].split("\n\n")[1]
    queries = [row.split(" | `")[1].rstrip("` |") for row in table.splitlines()[2:]]
    assert len(queries) >= 8 and all("pav_" in q for q in queries), queries
    rules = [{"record": f"pav:doc_query_{i}", "expr": q} for i, q in enumerate(queries)]
    (tmp_path / "queries.yml").write_text(yaml.safe_dump({"groups": [{"name": "doc", "rules": rules}]}))
    proc = promtool("check", "rules", str(tmp_path / "queries.yml"))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def series_of(fixture: str) -> list[dict[str, str]]:
    """The run's metrics as node_exporter serves them, as promtool input series (constant for 30 h)."""
    return as_input(recorded_run(fixture).to_dict())


def as_input(results: dict[str, Any], only: tuple[str, ...] = ()) -> list[dict[str, str]]:
    """A run's metrics (the families in `only`, where given) as promtool input series."""
    text = exposition.render(metrics.families(results))
    out = []
    for s in parse(text):
        if only and s.name not in only:
            continue
        labels = ",".join(f'{k}="{v}"' for k, v in {**s.labels, "job": "node", "instance": "ctl"}.items())
        out.append({"series": f"{s.name}{{{labels}}}", "values": f"{s.value!r}x30"})
    return out


def fired(tmp_path: Path, series: list[dict[str, str]], expected: dict[str, list[dict[str, str]]],
          at: str = "1h") -> None:  # fmt: skip
    """promtool test rules: at `at`, each alert fires with exactly the label sets given (none: silent).
    The rules are the file's, their annotations left out (promtool would compare the rendered text)."""
    rules: dict[str, Any] = yaml.safe_load(RULES.read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            rule.pop("annotations", None)
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rules))
    tests = [{"eval_time": at, "alertname": name, "exp_alerts": [{"exp_labels": labels} for labels in
              expected.get(name, [])]} for name in ALERTS]  # fmt: skip
    spec = {"rule_files": ["rules.yml"], "evaluation_interval": "15m",
            "tests": [{"interval": "1h", "input_series": series, "alert_rule_test": tests}]}  # fmt: skip
    (tmp_path / "test.yml").write_text(yaml.safe_dump(spec))
    proc = promtool("test", "rules", str(tmp_path / "test.yml"))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_busy_gpu_run_fires_for_the_run_its_host_and_gpu_1(tmp_path: Path) -> None:
    host = {"env": "local", "host": "localhost"}
    expected = {
        "PavVerdictNotPass": [{"severity": "page", "env": "local"}],
        "PavHostFailed": [{"severity": "page", **host}],
        "PavGpuFailed": [{"severity": "page", **host, "gpu": "1"}],
    }
    fired(tmp_path, series_of(BUSY), expected)


def test_a_link_fires_for_the_link_and_only_the_hosts_with_parts_of_their_own(tmp_path: Path) -> None:
    """64 hosts in two racks, the all_reduce across them failing for the link between the racks (and a bad
    GPU's host, a slow host): the link pages once, as a link; its 64 hosts do not page to be drained."""
    only = ("pav_run_verdict", "pav_host_verdict", "pav_failed_link_info", "pav_run_timestamp_seconds")
    env = {"env": "sim"}
    expected = {
        "PavVerdictNotPass": [{"severity": "page", **env}],
        "PavHostFailed": [{"severity": "page", **env, "host": host} for host in (BAD_HOST, SLOW_HOST)],
        "PavLinkFailed": [{"severity": "page", **env, "test": MULTI, "between": BETWEEN}],
    }
    fired(tmp_path, as_input(large_run.linked_run().to_dict(), only), expected)


def test_a_healthy_run_fires_nothing(tmp_path: Path) -> None:
    fired(tmp_path, series_of("h100x4-healthy"), {})


def test_a_nightly_that_stopped_fires_after_26_hours(tmp_path: Path) -> None:
    where = 'env="nightly",job="node",instance="ctl"'
    last = [
        {"series": f"pav_run_timestamp_seconds{{{where}}}", "values": "0x40"},  # it ended at time 0
        {"series": f'pav_run_verdict{{{where},verdict="PASS"}}', "values": "1x40"},
    ]
    fired(tmp_path, last, {}, at="25h")
    fired(tmp_path, last, {"PavNoRecentRun": [{"severity": "ticket", "env": "nightly"}]}, at="27h")
    # No series at all (the export stopped, or nothing scrapes it): silent until it has been 26 h.
    other = [{"series": 'up{job="node",instance="ctl"}', "values": "1x40"}]
    fired(tmp_path, other, {}, at="25h")
    fired(tmp_path, other, {"PavNoMetrics": [{"severity": "ticket"}]}, at="27h")
