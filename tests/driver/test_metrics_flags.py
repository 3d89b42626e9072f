"""--metrics-textfile and --pushgateway through the one pipeline (pav.pipeline.execute), in process: the run's
metrics leave once its files are final; a write or push that fails is a line of summary.txt naming the fix,
and never the verdict, the exit code or the run's results; without a flag nothing is written or sent."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from pav import cli, pipeline
from pav.context import Options, RunContext
from pav.errors import PavError
from pav.platform import Platform
from pav.reporting import pushgateway
from pav.results import TestResult
from pav.stages import report
from tests.conftest import ROOT, CliRun, assert_one_line_error
from tests.driver.contexts import context
from tests.driver.signals import forget
from tests.driver.test_report_stage import RUN_DIRS, collected
from tests.report.prom import PUSHGATEWAY, daemon, one, parse, pick, scrape, unwritable_dir
from tests.summary_lines import unfolded

PASSING = TestResult("torch_gloo_allreduce", ["h0"], "pass", metrics={"wall_s": 2.0})
FAILING = TestResult("torch_gloo_allreduce", ["h0"], "fail", "wrong bytes", metrics={"wrong_total": 1})


@pytest.fixture(autouse=True)
def no_signal_left() -> Iterator[None]:
    """execute marks the process as wrapping up; the next test starts a run afresh."""
    yield
    forget()


def platform(outcome: TestResult) -> Platform:
    def validate(ctx: RunContext) -> str:
        ctx.results.tests.append(outcome)
        return "validated"

    stages = {name: (lambda ctx: "done") for name in ("provision", "configure", "collect", "teardown")}
    return Platform("test", stages | {"validate": validate}, dry_run=lambda ctx: 0)


def run_with(tmp_path: Path, outcome: TestResult, **flags: object) -> tuple[int, RunContext]:
    options = Options(results_root=tmp_path / "runs", **flags)  # type: ignore[arg-type]
    ctx = context(1, options=options)
    ctx.run_dir = tmp_path / "run"
    ctx.run_dir.mkdir()
    return pipeline.execute(ctx, platform(outcome)), ctx


def on_disk(ctx: RunContext) -> tuple[dict[str, object], str]:
    return json.loads((ctx.run_dir / "results.json").read_text()), (ctx.run_dir / "summary.txt").read_text()


def test_the_flags_export_the_run_as_its_files_end_it(tmp_path: Path) -> None:
    textfiles = tmp_path / "textfile_collector"
    textfiles.mkdir()
    with daemon(PUSHGATEWAY, "--persistence.file=") as url:
        code, ctx = run_with(tmp_path, PASSING, metrics_textfile=textfiles, pushgateway=url)
        pushed = parse(scrape(url))
    assert code == 0
    results, summary = on_disk(ctx)
    assert [e["ok"] for e in results["exports"]] == [True, True]  # type: ignore[index]
    written = parse((textfiles / "pav-t.prom").read_text())
    # The end the metrics carry is the one results.json records: exported after the last write.
    ended = datetime.fromisoformat(str(results["ended"]).replace("Z", "+00:00")).timestamp()
    assert one(written, "pav_run_timestamp_seconds", env="t") == ended
    assert one(written, "pav_run_verdict", env="t", verdict="PASS") == 1
    assert one(written, "pav_test_status", host="h0", test="torch_gloo_allreduce", status="pass") == 1
    assert one(pushed, "pav_run_verdict", job="pav", env="t", verdict="PASS") == 1
    assert one(pushed, "pav_test_duration_seconds", job="pav", env="t", host="h0") == 2
    lines = unfolded(summary.splitlines())  # a long line goes on below it at 120 columns
    textfile = next(ln for ln in lines if ln.startswith(f"metrics: textfile {textfiles / 'pav-t.prom'}: "))
    assert "samples written" in textfile
    assert any(ln.startswith(f"metrics: pushgateway {url}: 2 groups pushed") for ln in lines), summary
    assert lines[-1] == "VERDICT: PASS"


@pytest.mark.parametrize("outcome", (PASSING, FAILING), ids=("pass", "fail"))
def test_a_failed_write_or_push_is_a_line_not_the_verdict(outcome: TestResult, tmp_path: Path) -> None:
    with daemon(PUSHGATEWAY, "--persistence.file=") as url:
        pass  # stopped: nothing listens on its port any more
    blocked = unwritable_dir(tmp_path)
    code, ctx = run_with(tmp_path, outcome, metrics_textfile=blocked, pushgateway=url)
    verdict = "PASS" if outcome.status == "pass" else "FAIL"
    assert code == (0 if verdict == "PASS" else 1)
    results, summary = on_disk(ctx)
    assert results["verdict"] == verdict and not results["error"]
    assert [t["status"] for t in results["tests"]] == [outcome.status]  # type: ignore[union-attr]
    assert [(e["to"], e["ok"]) for e in results["exports"]] == [("textfile", False), ("pushgateway", False)]  # type: ignore[index]
    failed = [ln for ln in unfolded(summary.splitlines()) if ln.startswith("metrics: ")]  # folded at 120
    assert failed[0].startswith(f"metrics: textfile {blocked / 'pav-t.prom'} FAILED: Not a directory; fix: ")
    assert failed[1].startswith(f"metrics: pushgateway {url} FAILED: PUT group env/t/host/h0: ")
    assert "Connection refused" in failed[1] and "fix: check the URL" in failed[1]
    assert summary.splitlines()[-1] == f"VERDICT: {verdict}"
    assert blocked.read_text() == "a file, not a directory\n"  # untouched, and no temp file beside it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run", "textfile-dir"]


def test_without_a_flag_nothing_is_written_or_sent(tmp_path: Path) -> None:
    code, ctx = run_with(tmp_path, PASSING)
    assert code == 0
    results, summary = on_disk(ctx)
    assert results["exports"] == [] and "metrics:" not in summary
    assert not list(tmp_path.rglob("*.prom")) and not list(tmp_path.rglob(".pav-*"))


def test_the_report_stage_exports_a_real_gpu_run(tmp_path: Path) -> None:
    """The busy-GPU run as the report stage judges it: GPU 1 at 277 TFLOP/s, as FLOP/s."""
    busy = next(run for run in RUN_DIRS if run.fixture == "h100x2b-gpu-busy-gpu1")
    textfiles = tmp_path / "textfiles"
    textfiles.mkdir()
    ctx = collected(busy, tmp_path, Options(results_root=tmp_path / "none", metrics_textfile=textfiles))
    report.run(ctx)
    report.export_metrics(ctx)
    series = parse((textfiles / "pav-local.prom").read_text())
    flops = one(series, "pav_gpu_gemm_bf16_flops_per_second", host="localhost", gpu="1", test="gpu_probe")
    assert flops == pytest.approx(2.77e14)
    assert one(series, "pav_gpu_verdict", host="localhost", gpu="1", verdict="FAIL") == 1
    assert pick(series, "pav_gate_margin_ratio", gpu="1", gate="gemm_bf16_tflops.1")


def test_the_flags_reach_the_options_and_a_bad_url_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    args = cli.build_parser().parse_args(
        ["--metrics-textfile", "/var/lib/node_exporter", "--pushgateway", "http://gw:9091"]
    )
    options = cli.make_context(args).options
    assert options.metrics_textfile == Path("/var/lib/node_exporter")
    assert options.pushgateway == "http://gw:9091"
    assert cli.main(["--pushgateway", "gw:9091", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "error: --pushgateway: gw:9091 is not an http(s) URL with a host" in err


def test_the_dry_run_checks_the_textfile_folder_the_run_would_write(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 48: --dry-run printed the textfile's path whatever it was; the run found out at its end, hours
    on, as a FAILED summary line. The write makes no folder (it is node_exporter's): one must be there."""
    missing = tmp_path / "no-such-dir"
    run = main(["--metrics-textfile", str(missing), "--dry-run"], capsys)
    assert_one_line_error(
        run, f"--metrics-textfile {missing} does not exist; create it (node_exporter's ", documented=True
    )
    assert run.stdout == "" and not missing.exists()
    blocked = unwritable_dir(tmp_path)
    run = main(["--metrics-textfile", str(blocked), "--dry-run"], capsys)
    assert_one_line_error(
        run, f"--metrics-textfile {blocked} is not a folder; pass node_exporter's ", documented=True
    )
    textfiles = tmp_path / "textfile_collector"
    textfiles.mkdir()
    run = main(["--metrics-textfile", str(textfiles), "--dry-run"], capsys)
    assert run.rc == 0, run.stderr
    assert (
        f"  metrics textfile: {textfiles}/pav-local.prom (written, then renamed)" in run.stdout.splitlines()
    )
    assert list(textfiles.iterdir()) == []  # a dry run writes nothing there
    # A folder this user may not write (root writes any: the check is the kernel's own, access(2)).
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    run = main(["--metrics-textfile", str(textfiles), "--dry-run"], capsys)
    assert_one_line_error(
        run, f"--metrics-textfile {textfiles} is not writable by this user (uid ", documented=True
    )


def test_a_run_checks_the_textfile_folder_before_it_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 64: only the dry run checked it; a real run ran to its end and wrote no metrics, one summary
    line said so. Now the run stops first, as the dry run does, and makes no run dir."""
    missing, run_dir = tmp_path / "no-such-dir", tmp_path / "run"
    args = ["--stages", "report", "--run-dir", str(run_dir), "--metrics-textfile", str(missing)]
    run = main(args, capsys)
    assert_one_line_error(run, f"--metrics-textfile {missing} does not exist; create it (node_exporter's ")
    assert run.stdout == "" and not run_dir.exists() and not missing.exists()


PASSWORD = "pw-7c41d0e9a5"  # of the pushgateway's user pav; must show nowhere


def main(args: list[str], capsys: pytest.CaptureFixture[str]) -> CliRun:
    """The CLI in process, as the user runs it: its exit code and what it printed."""
    code = cli.main(args)
    said = capsys.readouterr()
    return CliRun(code, said.out, said.err)


def auth_file(where: Path, mode: int, name: str = "pushgateway-auth") -> Path:
    path = where / name
    text = f"pav:{PASSWORD}\n"
    path.write_text(text)
    path.chmod(mode)
    return path


def test_a_url_with_a_password_is_refused_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """ps shows every user the command line for the whole run: a password in --pushgateway's URL is refused
    before anything runs, naming the URL without it and the safe ways to give it."""
    run = main(["--pushgateway", f"https://pav:{PASSWORD}@gw.example:9091", "--dry-run"], capsys)
    assert_one_line_error(
        run, "error: --pushgateway: the URL carries credentials", "give it as https://gw.example:9091 and",
        "PAV_PUSHGATEWAY_AUTH=USER:PASSWORD in the environment", "--pushgateway-auth-file FILE",
        documented=True,
    )  # fmt: skip
    assert PASSWORD not in run.stdout + run.stderr


@pytest.mark.parametrize("mode", (0o644, 0o640, 0o604))
def test_an_auth_file_others_can_read_is_refused(
    mode: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = auth_file(tmp_path, mode)
    run = main(["--pushgateway", "http://gw:9091", "--pushgateway-auth-file", str(path), "--dry-run"], capsys)
    said = f"error: pushgateway auth file {path} has mode {mode:04o}: others than its owner can read the "
    assert_one_line_error(run, said, f"chmod 600 {path}", documented=True)
    assert PASSWORD not in run.stdout + run.stderr


def test_the_dry_run_names_where_the_credentials_come_from_never_the_password(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = auth_file(tmp_path, 0o600)
    run = main(["--pushgateway", "http://gw:9091", "--pushgateway-auth-file", str(path), "--dry-run"], capsys)
    assert run.rc == 0, run.stderr
    where = "job pav, one group per env and host"
    line = f"  pushgateway: http://gw:9091 ({where}; basic auth as pav, from {path})"
    assert line in run.stdout.splitlines()
    # From the environment: read, and taken out of it, so nothing the run starts inherits it.
    monkeypatch.setenv("PAV_PUSHGATEWAY_AUTH", f"pav:{PASSWORD}")
    args = cli.build_parser().parse_args(["--pushgateway", "http://gw:9091"])
    auth = cli.make_context(args).options.pushgateway_auth
    assert auth is not None and (auth.user, auth.password) == ("pav", PASSWORD)
    assert "PAV_PUSHGATEWAY_AUTH" not in os.environ and PASSWORD not in repr(auth)
    monkeypatch.setenv("PAV_PUSHGATEWAY_AUTH", f"pav:{PASSWORD}")
    run = main(["--pushgateway", "http://gw:9091", "--dry-run"], capsys)
    assert run.rc == 0 and "basic auth as pav, from PAV_PUSHGATEWAY_AUTH)" in run.stdout
    assert PASSWORD not in run.stdout + run.stderr


def test_a_systemd_credential_is_taken_as_systemd_made_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LoadCredential= writes the file 0400 and lets the service's user read it by an ACL, which stat shows as
    group read (0440): in $CREDENTIALS_DIRECTORY that mode is the service's alone, elsewhere it is refused."""
    creds = tmp_path / "credentials"
    creds.mkdir()
    path = auth_file(creds, 0o440)
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(creds))
    auth = pushgateway.credentials("http://gw:9091", path, os.environ)
    assert auth is not None and (auth.user, auth.password, auth.source) == ("pav", PASSWORD, str(path))
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(tmp_path / "elsewhere"))
    with pytest.raises(PavError, match=r"has mode 0440: others than its owner can read the password"):
        pushgateway.credentials("http://gw:9091", path, os.environ)


def unit_argv(extra: str | None) -> list[str]:
    """The nightly unit's ExecStart as systemd expands it: ${X} one argument, $X split into words (none when
    empty or unset); X from the unit's Environment= lines and the example env file's settings."""
    unit = (ROOT / "deploy" / "systemd" / "pav-nightly.service").read_text()
    example = (ROOT / "deploy" / "systemd" / "nightly.env.example").read_text()
    env = dict(re.findall(r"^Environment=(\w+)=(.*)$", unit, re.M))
    env |= dict(re.findall(r"^(PAV_\w+)=(.*)$", example, re.M))
    if extra is not None:
        env["PAV_EXTRA_ARGS"] = extra
    found = re.search(r"^ExecStart=\S+ (.*)$", unit, re.M)
    assert found, "pav-nightly.service has no ExecStart"
    argv: list[str] = []
    for word in found.group(1).split():
        if braced := re.fullmatch(r"\$\{(\w+)\}", word):
            argv.append(env[braced.group(1)])
        elif bare := re.fullmatch(r"\$(\w+)", word):
            argv += env.get(bare.group(1), "").split()
        else:
            argv.append(word)
    return argv


def test_the_nightly_unit_exports_to_node_exporters_textfile_dir() -> None:
    args = cli.build_parser().parse_args(unit_argv(None))
    assert args.metrics_textfile == Path("/var/lib/prometheus/node-exporter") and args.pushgateway is None
    assert args.inventory == Path("/etc/provision-and-validate/hosts.yml")
    # The example env file's pushgateway line, as the unit passes it.
    example = (ROOT / "deploy" / "systemd" / "nightly.env.example").read_text()
    [extra] = re.findall(r"^# PAV_EXTRA_ARGS=(.*)$", example, re.M)
    args = cli.build_parser().parse_args(unit_argv(extra))
    assert args.pushgateway == "http://pushgateway.example:9091"
    assert pushgateway.check_url(args.pushgateway) is None


def test_the_nightly_unit_hands_the_pushgateway_password_over_as_a_systemd_credential(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The unit's pushgateway lines, uncommented as docs/nightly.md says: LoadCredential= copies the root-only
    file into the service's credentials directory (as systemd does: 0400 and an ACL, 0440 to stat),
    PAV_PUSHGATEWAY_AUTH_FILE names it there (%d), and the run reads its credentials from it; the example env
    file's URL, world-readable, carries none."""
    unit = (ROOT / "deploy" / "systemd" / "pav-nightly.service").read_text()
    [target] = re.findall(r"^# Environment=PAV_PUSHGATEWAY_AUTH_FILE=(\S+)$", unit, re.M)
    name = target.removeprefix("%d/")
    [source] = re.findall(rf"^# LoadCredential={re.escape(name)}:(\S+)$", unit, re.M)
    assert source == "/etc/provision-and-validate/pushgateway-auth" and target == f"%d/{name}"
    creds = tmp_path / "credentials" / "pav-nightly.service"
    creds.mkdir(parents=True)
    auth_file(creds, 0o440, name)
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(creds))
    monkeypatch.setenv("PAV_PUSHGATEWAY_AUTH_FILE", target.replace("%d", str(creds)))
    example = (ROOT / "deploy" / "systemd" / "nightly.env.example").read_text()
    [extra] = re.findall(r"^# PAV_EXTRA_ARGS=(.*)$", example, re.M)
    args = cli.build_parser().parse_args(unit_argv(extra))
    auth = pushgateway.credentials(args.pushgateway, args.pushgateway_auth_file, os.environ)
    assert auth is not None and (auth.password, auth.source) == (PASSWORD, str(creds / name))
