"""The metrics where operators read them: Debian's node_exporter reads the textfile --metrics-textfile
writes, a real pushgateway takes what --pushgateway pushes; each is scraped over HTTP on loopback, as
Prometheus would, and linted by promtool. The runs are the real GPU runs of the calibration record, and
(slow) the session's real run of the CLI on --env local (tests/conftest.py's local_run)."""

from __future__ import annotations

import re
from contextlib import AbstractContextManager
from datetime import datetime
from pathlib import Path

import pytest

from pav.reporting import metrics_export
from pav.secrets.basic_auth import BasicAuth
from tests.conftest import LocalRun, run_cli
from tests.report.prom import (
    NODE_EXPORTER,
    PUSHGATEWAY,
    assert_lint_clean,
    binary,
    daemon,
    one,
    parse,
    pick,
    scrape,
)
from tests.report.test_metrics import BUSY, across_hosts, recorded_run

GPU1_FLOPS = 2.77e14  # the busy run's GPU 1: 277 TFLOP/s
# The only user of guarded_gateway(); its web config takes a bcrypt hash: this one is of AUTH.password (cost
# 4, the least; made once with Python's bcrypt, which the tests then need not have).
AUTH = BasicAuth("pav", "pav-test-pushgateway-pw", "test")
AUTH_BCRYPT = "$2b$04$3t7wMBfHjlW0nxfEkSFrcOAAfkSHBdNKmJ3bqX44GgfrQLUtyXiBW"


def node_exporter(textfiles: Path) -> AbstractContextManager[str]:
    """node_exporter with its textfile collector alone (the others read the machine, not the run)."""
    return daemon(
        NODE_EXPORTER, "--collector.disable-defaults", "--collector.textfile",
        f"--collector.textfile.directory={textfiles}",
    )  # fmt: skip


def gateway() -> AbstractContextManager[str]:
    return daemon(PUSHGATEWAY, "--persistence.file=")  # Debian's default persists to /var/lib


def guarded_gateway(where: Path) -> AbstractContextManager[str]:
    """A pushgateway that answers AUTH alone (basic auth: its --web.config.file's basic_auth_users)."""
    config = where / "gateway-web.yml"
    config.write_text(f"basic_auth_users:\n  {AUTH.user}: {AUTH_BCRYPT}\n")
    return daemon(PUSHGATEWAY, "--persistence.file=", f"--web.config.file={config}")


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


def test_a_gateway_behind_basic_auth_takes_the_push_with_its_credentials_alone(tmp_path: Path) -> None:
    wrong = BasicAuth(AUTH.user, "not-the-password", "PAV_PUSHGATEWAY_AUTH")
    with guarded_gateway(tmp_path) as url:
        [pushed] = metrics_export.export(across_hosts(), None, url, AUTH)
        series = parse(scrape(url, AUTH))
        [anonymous] = metrics_export.export(across_hosts(), None, url)
        [refused] = metrics_export.export(across_hosts(), None, url, wrong)
    assert pushed.ok, pushed
    assert one(series, "pav_run_verdict", job="pav", env="sim", verdict="FAIL") == 1
    assert not anonymous.ok and "HTTP 401 Unauthorized" in anonymous.detail
    ask = "fix: the gateway asks for credentials: pass the credentials as PAV_PUSHGATEWAY_AUTH=USER:PASSWORD"
    assert ask in anonymous.detail
    assert not refused.ok and refused.detail.endswith(
        "HTTP 401 Unauthorized: Unauthorized; fix: check the user and password of PAV_PUSHGATEWAY_AUTH"
    )


def test_a_dead_gateway_is_a_failed_export_naming_the_fix() -> None:
    with gateway() as url:
        pass  # up, then stopped: nothing listens on its port any more
    [failed] = metrics_export.export(across_hosts(), None, url)
    assert not failed.ok and failed.where == url
    assert "Connection refused" in failed.detail and "fix: check the URL" in failed.detail


@pytest.mark.slow
def test_a_real_local_run_reaches_node_exporter_and_the_pushgateway(local_run: LocalRun) -> None:
    """The CLI end to end on --env local (the session's real run, tests/conftest.py, with --metrics-textfile
    and --pushgateway): its metrics served by node_exporter and held by the pushgateway, both scraped over
    HTTP, with the verdict and the end its results.json records."""
    url = local_run.gateway or binary(PUSHGATEWAY)  # not installed: the run pushed nowhere; fail saying so
    assert local_run.rc == 0, local_run.output
    assert f"metrics: textfile {local_run.textfiles / 'pav-local.prom'}: " in local_run.stdout
    assert f"metrics: pushgateway {url}: 2 groups pushed" in local_run.stdout
    pushed = parse(local_run.pushed)
    results = local_run.results
    ended = datetime.fromisoformat(results["ended"].replace("Z", "+00:00")).timestamp()
    with node_exporter(local_run.textfiles) as exporter:
        served = parse(scrape(exporter))
    for series, where in ((served, {"env": "local"}), (pushed, {"job": "pav", "env": "local"})):
        assert one(series, "pav_run_verdict", **where, verdict="PASS") == 1
        assert one(series, "pav_run_timestamp_seconds", **where) == ended
        status = {"host": "localhost", "test": "torch_gloo_allreduce", "status": "pass"}
        assert one(series, "pav_test_status", **where, **status) == 1
        assert pick(series, "pav_busbw_bytes_per_second", **where, host="localhost", op="all_reduce")


def exec_calls(trace: Path) -> list[str]:
    """strace's execve lines, every process of the run in the order each began (the CLI's own first): the
    program, its argv and (strace -v) its environment, as strace quotes them."""
    return [ln for ln in trace.read_text().splitlines() if re.match(r"^\d+ +execve\(", ln)]


@pytest.mark.slow
@pytest.mark.parametrize("given", ("environment", "file"))
def test_the_password_authenticates_the_push_and_shows_in_no_command_line(given: str, tmp_path: Path) -> None:
    """The real CLI (the report stage alone: the run's record, the inventory Ansible reads, the reaper) with
    the pushgateway's password in PAV_PUSHGATEWAY_AUTH or in a mode-0600 auth file: the push authenticates to
    a gateway that takes nothing else, and the password is in the command line of no process the run starts
    (strace: every execve), nor in their environment, nor in any file of the run dir or what the run
    prints."""
    run_dir, trace = tmp_path / "run", tmp_path / "execve.trace"
    flags, env = [], {}
    if given == "file":
        auth_file = tmp_path / "pushgateway-auth"
        auth_file.write_text(f"{AUTH.user}:{AUTH.password}\n")
        auth_file.chmod(0o600)
        flags = ["--pushgateway-auth-file", str(auth_file)]
    else:
        env = {"PAV_PUSHGATEWAY_AUTH": f"{AUTH.user}:{AUTH.password}"}
    strace = (binary("strace"), "-f", "-qq", "-v", "-s", "65536", "-e", "trace=execve", "-o", str(trace))
    with guarded_gateway(tmp_path) as url:
        run = run_cli(
            "--env", "local", "--stages", "report", "--run-dir", str(run_dir),
            "--results-root", str(tmp_path / "root"), "--pushgateway", url, *flags,
            env=env, under=(*strace, "--"),
        )  # fmt: skip
        series = parse(scrape(url, AUTH))
    assert run.rc == 0, run.stdout + run.stderr
    assert f"metrics: pushgateway {url}: 2 groups pushed" in run.stdout
    assert one(series, "pav_run_verdict", job="pav", env="local", verdict="NONE") == 1

    cli, *started = exec_calls(trace)
    argv = cli.split("], [")[0]  # the CLI's own argv, without its environment (the user's, password and all)
    assert '"-m", "pav"' in argv and AUTH.password not in argv
    assert any("pav.reaper" in c for c in started) and any("ansible-inventory" in c for c in started)
    assert [c[:200] for c in started if AUTH.password in c] == []
    assert AUTH.password not in run.stdout + run.stderr
    files = [p for p in run_dir.rglob("*") if p.is_file()]
    assert (run_dir / "results.json") in files
    holding = [p for p in files if AUTH.password in p.read_text(errors="replace")]
    assert [str(p.relative_to(run_dir)) for p in holding] == []
