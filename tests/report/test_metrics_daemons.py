"""The metrics where operators read them: Debian's node_exporter reads the textfile --metrics-textfile
writes, a real pushgateway takes what --pushgateway pushes; each is scraped over HTTP on loopback, as
Prometheus would, and linted by promtool. The runs are the real GPU runs of the calibration record, and
(slow) a real run of the CLI on --env local."""

from __future__ import annotations

from contextlib import AbstractContextManager
from datetime import datetime
from pathlib import Path

import pytest

from pav.reporting import metrics_export
from tests.conftest import run_cli
from tests.report.prom import NODE_EXPORTER, PUSHGATEWAY, assert_lint_clean, daemon, one, parse, pick, scrape
from tests.report.test_metrics import BUSY, across_hosts, recorded_run

GPU1_FLOPS = 2.77e14  # the busy run's GPU 1: 277 TFLOP/s


def node_exporter(textfiles: Path) -> AbstractContextManager[str]:
    """node_exporter with its textfile collector alone (the others read the machine, not the run)."""
    return daemon(
        NODE_EXPORTER, "--collector.disable-defaults", "--collector.textfile",
        f"--collector.textfile.directory={textfiles}",
    )  # fmt: skip


def gateway() -> AbstractContextManager[str]:
    return daemon(PUSHGATEWAY, "--persistence.file=")  # Debian's default persists to /var/lib


def test_node_exporter_serves_the_textfile_with_gpu_1_at_277_tflops(tmp_path: Path) -> None:
    results = recorded_run(BUSY).to_dict()
    [written] = metrics_export.export(results, tmp_path, None)
    assert written.ok and written.where == str(tmp_path / "pav-local.prom"), written
    assert [p.name for p in tmp_path.iterdir()] == ["pav-local.prom"]  # the temp file renamed, none left
    assert (tmp_path / "pav-local.prom").stat().st_mode & 0o777 == 0o644  # node_exporter's user reads it
    with node_exporter(tmp_path) as url:
        text = scrape(url)
    assert_lint_clean(text)
    series = parse(text)
    assert one(series, "node_textfile_scrape_error") == 0
    flops = one(series, "pav_gpu_gemm_bf16_flops_per_second", env="local", host="localhost", gpu="1")
    assert flops == pytest.approx(GPU1_FLOPS)
    assert one(series, "pav_host_verdict", host="localhost", verdict="FAIL") == 1
    # Every sample written is served, none changed.
    written_series = parse((tmp_path / "pav-local.prom").read_text())
    assert all(s in series for s in written_series) and len(written_series) > 50


def test_two_envs_share_a_textfile_directory(tmp_path: Path) -> None:
    metrics_export.export(recorded_run(BUSY).to_dict(), tmp_path, None)
    metrics_export.export(across_hosts(), tmp_path, None)
    with node_exporter(tmp_path) as url:
        series = parse(scrape(url))
    assert one(series, "node_textfile_scrape_error") == 0
    assert one(series, "pav_run_verdict", env="local", verdict="FAIL") == 1
    assert one(series, "pav_run_verdict", env="sim", verdict="FAIL") == 1


def test_the_pushgateway_holds_the_run_grouped_by_env_and_host(tmp_path: Path) -> None:
    with gateway() as url:
        [pushed] = metrics_export.export(recorded_run(BUSY).to_dict(), None, url)
        assert pushed.ok, pushed
        text = scrape(url)
        assert_lint_clean(text)
        series = parse(text)
        host = {"job": "pav", "env": "local", "host": "localhost"}
        assert one(series, "pav_gpu_gemm_bf16_flops_per_second", **host, gpu="1") == pytest.approx(GPU1_FLOPS)
        assert one(series, "pav_host_verdict", **host, verdict="FAIL") == 1
        # The run's own series in the env's group, no host label; the gateway stamps each group's push.
        [verdict] = pick(series, "pav_run_verdict", job="pav", env="local", verdict="FAIL")
        assert "host" not in verdict.labels and verdict.value == 1
        groups = {tuple(sorted(s.labels.items())) for s in pick(series, "push_time_seconds")}
        assert groups == {
            (("env", "local"), ("host", "localhost"), ("job", "pav")),
            (("env", "local"), ("job", "pav")),
        }


def test_a_second_push_replaces_the_group_and_drops_hosts_the_run_no_longer_has() -> None:
    first = across_hosts()
    second = across_hosts()
    second["tests"] = [t for t in second["tests"] if t["hosts"] == ["h0"]]
    second["tests"][0]["status"] = "fail"
    del second["hosts"]["h1"], second["hosts"]["h2"]
    second["isolation"] = {}
    with gateway() as url:
        assert metrics_export.export(first, None, url)[0].ok
        before = parse(scrape(url))
        assert {s.labels.get("host") for s in pick(before, "push_time_seconds")} == {None, "h0", "h1", "h2"}
        [again] = metrics_export.export(second, None, url)
        assert again.ok and "2 stale host group(s) deleted" in again.detail, again
        after = parse(scrape(url))
    assert {s.labels.get("host") for s in pick(after, "push_time_seconds")} == {None, "h0"}
    status = {"env": "sim", "host": "h0", "test": "ddp_cpu_train"}
    assert one(before, "pav_test_status", **status, status="pass") == 1
    assert one(after, "pav_test_status", **status, status="fail") == 1
    # Replaced, not merged: the test across hosts the second run did not have is gone with its group.
    assert not pick(after, "pav_test_status", test="torch_gloo_allreduce")
    assert not pick(after, "pav_host_verdict", host="h2")


def test_a_dead_gateway_is_a_failed_export_naming_the_fix() -> None:
    with gateway() as url:
        pass  # up, then stopped: nothing listens on its port any more
    [failed] = metrics_export.export(across_hosts(), None, url)
    assert not failed.ok and failed.where == url
    assert "Connection refused" in failed.detail and "fix: check the URL" in failed.detail


@pytest.mark.slow
def test_a_real_local_run_reaches_node_exporter_and_the_pushgateway(tmp_path: Path) -> None:
    """The CLI end to end on --env local (one CPU test): its metrics served by node_exporter and held by the
    pushgateway, both scraped over HTTP, with the verdict and the end its results.json records."""
    textfiles = tmp_path / "textfiles"
    textfiles.mkdir()
    run_dir = tmp_path / "run"
    with gateway() as url:
        run = run_cli(
            "--env", "local", "--tests", "torch_gloo_allreduce", "--run-dir", str(run_dir),
            "--results-root", str(tmp_path / "root"),
            "--metrics-textfile", str(textfiles), "--pushgateway", url,
        )  # fmt: skip
        pushed = parse(scrape(url))
    assert run.rc == 0, run.stdout + run.stderr
    assert f"metrics: textfile {textfiles / 'pav-local.prom'}: " in run.stdout
    assert f"metrics: pushgateway {url}: 2 groups pushed" in run.stdout
    results = run.results(run_dir)
    ended = datetime.fromisoformat(results["ended"].replace("Z", "+00:00")).timestamp()
    with node_exporter(textfiles) as exporter:
        served = parse(scrape(exporter))
    for series, where in ((served, {"env": "local"}), (pushed, {"job": "pav", "env": "local"})):
        assert one(series, "pav_run_verdict", **where, verdict="PASS") == 1
        assert one(series, "pav_run_timestamp_seconds", **where) == ended
        status = {"host": "localhost", "test": "torch_gloo_allreduce", "status": "pass"}
        assert one(series, "pav_test_status", **where, **status) == 1
        assert pick(series, "pav_busbw_bytes_per_second", **where, host="localhost", op="all_reduce")
