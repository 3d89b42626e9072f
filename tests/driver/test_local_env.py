"""The embedded default: the whole pipeline on this machine through Ansible's local connection."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from pav import __version__
from tests.conftest import ROOT, LocalRun, run_cli

pytestmark = pytest.mark.slow

FAULT_TESTS = {"PAV_FAULT_TESTS": "1"}  # fault_plain: plain Python ranks, FOR TESTING (catalog.py)
RECORD = ("results.json", "summary.txt", "junit.xml", "report.html")  # a run's record, written by it only


@pytest.fixture(scope="module")
def local_run(local_run: LocalRun) -> tuple[int, Path, str]:
    """The session's real local run (tests/conftest.py), shared with tests/report."""
    return local_run.rc, local_run.run_dir, local_run.output


def test_exits_zero_with_pass(local_run: tuple[int, Path, str]) -> None:
    rc, run_dir, output = local_run
    assert rc == 0, output
    results = json.loads((run_dir / "results.json").read_text())
    assert results["schema_version"] == "1.5"
    assert results["tool_version"] == __version__
    assert results["verdict"] == "PASS"
    # Each test that ran records what it measured with (issue 61): the ranks' parameters and a fingerprint.
    ran = [t for t in results["tests"] if t["status"] == "pass" and t["name"] == "torch_gloo_allreduce"]
    assert ran and ran[0]["workload"]["params"]["sizes"] == "1K,64K,1M"
    assert len(ran[0]["workload"]["fingerprint"]) == 12
    assert [s["name"] for s in results["stages"]] == [
        "provision", "configure", "validate", "collect", "isolate", "report", "teardown",
    ]  # fmt: skip
    assert all(s["status"] == "ok" for s in results["stages"]), results["stages"]
    assert "VERDICT: PASS" in (run_dir / "summary.txt").read_text()


def test_cpu_tests_pass_and_gpu_tests_skip_with_reason(local_run: tuple[int, Path, str]) -> None:
    _, run_dir, _ = local_run
    tests = {t["name"]: t for t in json.loads((run_dir / "results.json").read_text())["tests"]}
    assert tests["torch_gloo_allreduce"]["status"] == "pass"
    assert tests["torch_gloo_allreduce"]["metrics"]["wrong_total"] == 0
    assert tests["torch_gloo_allreduce"]["threshold"]["gates"] == [{"metric": "wrong_total", "max": 0.0}]
    assert tests["ddp_cpu_train"]["status"] == "pass"
    assert tests["ddp_cpu_train"]["metrics"]["loss_ratio"] < 0.9
    for gpu_test in ("torch_nccl_allreduce", "nccl_tests_all_reduce"):
        assert tests[gpu_test]["status"] == "skipped"
        assert tests[gpu_test]["reason"] == "no GPU"


def test_facts_and_check_mode_changes_recorded(local_run: tuple[int, Path, str]) -> None:
    _, run_dir, _ = local_run
    host = json.loads((run_dir / "results.json").read_text())["hosts"]["localhost"]
    assert host["status"] == "ok"
    assert host["facts"]["gpu"]["count"] == 0
    assert host["facts"]["torch"]["version"].startswith("2.")
    assert int(host["facts"]["shm"]["size_bytes"]) > 0
    # Check mode: the tuning it would apply is listed, and none of it reached this machine's /etc.
    assert host["tuning_applied"] is False
    assert any(c.startswith("host_tuning :") for c in host["changes"])
    assert not Path("/etc/security/limits.d/90-pav-gpu.conf").exists()
    assert not Path("/etc/pav/nccl.env").exists()
    # What tuning would write, as readable diffs, in results.json and report.html.
    limits = next(d for d in host["diffs"] if d["path"] == "/etc/security/limits.d/90-pav-gpu.conf")
    assert any(ln.startswith("+") and "memlock" in ln for ln in limits["text"].splitlines())
    assert "what configure changed in files" in (run_dir / "report.html").read_text()


def test_artifacts_and_junit(local_run: tuple[int, Path, str]) -> None:
    _, run_dir, _ = local_run
    results = (run_dir / "hosts" / "localhost" / "results").iterdir()
    # Each test's own folder, and the suite's that ran both in one process group (its whole log).
    assert {p.name for p in results} == {"torch_gloo_allreduce", "ddp_cpu_train", "pav_suites_1"}
    junit = (run_dir / "junit.xml").read_text()
    assert 'tests="17"' in junit and 'skipped="15"' in junit and 'failures="0"' in junit


def test_the_judge_command_gives_the_run_its_own_verdict(
    local_run: tuple[int, Path, str], tmp_path: Path
) -> None:
    """The run judged again by this release's gates: from its run dir (the raw host results read again
    through evaluate) and from its results.json alone (the recorded metrics), the recorded verdict."""
    _, run_dir, _ = local_run
    recorded = json.loads((run_dir / "results.json").read_text())
    run = run_cli("judge", str(run_dir), "--json")
    assert run.rc == 0, run.stdout + run.stderr
    judged = json.loads(run.stdout)
    assert judged["verdict"] == recorded["verdict"] == "PASS"
    assert judged["profile"] == recorded["threshold_profile"]
    as_recorded = [(t["name"], t["hosts"], t["status"], t["reason"]) for t in recorded["tests"]]
    assert [(t["name"], t["hosts"], t["status"], t["reason"]) for t in judged["tests"]] == as_recorded
    ran = {t["name"]: t["judged"] for t in judged["tests"] if t["status"] != "skipped"}
    assert ran == {"torch_gloo_allreduce": "gates", "ddp_cpu_train": "gates"}
    shutil.copy(run_dir / "results.json", tmp_path / "copy.json")
    bare = run_cli("judge", str(tmp_path / "copy.json"))
    assert bare.rc == 0 and "PASS (recorded PASS)" in bare.stdout, bare.stdout + bare.stderr


def test_dry_run_changes_nothing(tmp_path: Path) -> None:
    run = run_cli("--env", "local", "--dry-run", "--run-dir", str(tmp_path / "r"))
    assert run.rc == 0, run.stderr
    assert "localhost" in run.stdout and "torch_gloo_allreduce" in run.stdout
    assert "check mode" in run.stdout
    assert not (tmp_path / "r").exists()


def test_tuning_is_applied_only_on_opt_in() -> None:
    """This machine is someone's own: check mode unless --apply-tuning; a cluster env the other way round."""
    assert "configure: tuning applied" in run_cli("--env", "local", "--dry-run", "--apply-tuning").stdout
    assert "configure: tuning in check mode" in run_cli("--env", "sim", "--dry-run", "--check-tuning").stdout
    assert "configure: tuning applied" in run_cli("--env", "sim", "--dry-run").stdout


def test_where_orchestration_time_went_is_recorded(local_run: tuple[int, Path, str]) -> None:
    _, run_dir, _ = local_run
    spent = json.loads((run_dir / "results.json").read_text())["ansible_time"]
    # Collect and teardown rode on validate's playbook: no ansible-playbook start of their own.
    assert set(spent) == {"configure", "validate"}
    validate = {t["task"] for t in spent["validate"]["tasks"]}
    assert {"collect : Fetch the archive into the run dir", "Remove the run folder"} <= validate
    configure = spent["configure"]
    assert {"preflight", "torch_payload", "host_tuning"} <= set(configure["roles"])
    assert configure["task_runs"] >= 20 and configure["host_s"] > 0
    assert configure["tasks"][0]["host_s"] == max(t["host_s"] for t in configure["tasks"])


@pytest.fixture
def kept_dir(tmp_path: Path) -> Iterator[Path]:
    """A kept run's dir; a test that fails before its teardown of the run still leaves nothing on the host
    (this machine's /var/lib/pav)."""
    kept = tmp_path / "kept"
    yield kept
    if (kept / "results.json").exists() and not (kept / "torn-down.json").exists():
        run_cli("--stages", "teardown", "--run-dir", str(kept), env=FAULT_TESTS)


def test_a_kept_stage_subset_names_the_missing_collect_and_its_teardown_keeps_its_record(
    kept_dir: Path, tmp_path: Path
) -> None:
    """One run carries two claims (issue 49): a stage subset without collect names the stage its verdict
    lacks, and --timings follows its summary; kept (its work stays on the host), its teardown by --run-dir
    removes that work and leaves its record. Its launch is plain Python ranks (fault_plain): torch is not
    what either claim is about."""
    stages = ("--stages", "configure,validate,report", "--keep", "--timings")
    # A relative --run-dir (as a user types it; run_cli runs in the checkout): every path the playbooks get
    # from it must still resolve on the controller.
    relative = os.path.relpath(kept_dir, ROOT)
    kept = run_cli(*stages, "--tests", "fault_plain", "--run-dir", relative, env=FAULT_TESTS)
    run_id = json.loads((kept_dir / "results.json").read_text())["run_id"]
    [test] = json.loads((kept_dir / "results.json").read_text())["tests"]
    assert test["status"] == "error"
    assert test["reason"] == (
        "no result came back from localhost: collect was not among --stages "
        "(add it: results stay on the hosts until collect fetches)"
    ), kept.stdout
    assert kept.rc == 1, kept.stdout + kept.stderr  # its one test has no result: verdict FAIL
    # --timings: after the summary, where the playbooks' time went.
    view = kept.stdout.split("VERDICT:")[1]
    assert "timings (host-s" in view and "configure  wall" in view and "validate   wall" in view
    assert "torch_payload" in view and "run_tests : Run fault_plain" in view
    work = Path("/var/lib/pav/runs") / run_id
    assert work.is_dir()
    record = {name: (kept_dir / name).read_bytes() for name in RECORD}
    # Another run's teardown (of no kept run: no --run-dir, its record under --results-root) does not touch
    # it, and says where a kept run's work goes.
    other = run_cli("--stages", "teardown", "--results-root", str(tmp_path / "other"), env=FAULT_TESTS)
    [other_dir] = (tmp_path / "other").iterdir()
    detail = {s["name"]: s["detail"] for s in json.loads((other_dir / "results.json").read_text())["stages"]}
    assert (
        work.is_dir()
        and "was on no host" in detail["teardown"]
        and "--run-dir ITS_RUN_DIR" in detail["teardown"]
    )
    assert other.rc == 0, other.stderr
    down = run_cli("--stages", "teardown", "--run-dir", str(kept_dir), env=FAULT_TESTS)
    assert down.rc == 0, down.stdout + down.stderr
    assert not work.exists()
    # The teardown wrote a record of its own beside the kept run's, naming the run it acted on...
    link = json.loads((kept_dir / "torn-down.json").read_text())
    teardown_dir = Path(link["by_run_dir"])
    assert teardown_dir == (kept_dir.parent / link["by_run"]).resolve()
    assert f"run dir: {kept_dir.parent / link['by_run']}" in down.stdout
    teardown = json.loads((teardown_dir / "results.json").read_text())
    assert teardown["run_id"] == link["by_run"] != run_id
    assert teardown["kept_run"] == {"run_id": run_id, "run_dir": str(kept_dir)}
    detail = {s["name"]: s["detail"] for s in teardown["stages"]}
    assert detail["teardown"] == f"removed /var/lib/pav/runs/{run_id} on 1 of 1 host(s)"
    # ...and left the kept run's record byte for byte as that run wrote it, its page but for one line.
    for name in ("results.json", "summary.txt", "junit.xml"):
        assert (kept_dir / name).read_bytes() == record[name], name
    page = (kept_dir / "report.html").read_text().splitlines(keepends=True)
    note = [ln for ln in page if 'class="torn-down"' in ln]
    assert len(note) == 1 and f"torn down at {link['torn_down_at']} by run" in note[0]
    assert f'<a href="../{link["by_run"]}/report.html">{link["by_run"]}</a>' in note[0]
    assert "".join(ln for ln in page if ln not in note).encode() == record["report.html"]
