"""Slurm job scripts (pav.slurm.jobs) and job records (pav.slurm.record). A script is rendered from its
template with every value the template names (a missing one is an error, never an empty line) and
shell-quoted; a job's record is slurm.json as pav_payload.slurm_job writes it on the submitting host,
attached to the launch's results and named in the reason of a failed test."""

from __future__ import annotations

import subprocess
from pathlib import Path

import jinja2
import pytest
from pav_payload import slurm_job

from pav.launches import Launch
from pav.results import TestResult
from pav.slurm.jobs import Job, minutes_for, render, write
from pav.slurm.record import attach_jobs, read_job

TEST = "torch_gloo_allreduce"


def host_job(argv: list[str]) -> Job:
    return Job(f"{TEST}.h0", TEST, "host", 1, 2, 8, 0, minutes_for(300), "/shared/run", "/shared/run/%j.log",
               "results/x", nodelist="node0", argv=argv)  # fmt: skip


def test_the_time_limit_is_a_backstop_behind_the_launch_timeout() -> None:
    assert minutes_for(300) == 6 and minutes_for(301) == 7 and minutes_for(1) == 2


def test_a_script_quotes_what_the_tasks_run(tmp_path: Path) -> None:
    argv = ["python3", "-m", "pav_payload", "--label", "it's a $HOME; rm -rf /"]
    path = write(host_job(argv), tmp_path)
    assert path == tmp_path / "slurm" / f"{TEST}.h0.sbatch"
    script = path.read_text()
    assert "#SBATCH --nodelist=node0\n" in script and "#SBATCH --time=6\n" in script
    assert "--gpus-per-node" not in script  # a CPU test asks for no GPU
    subprocess.run(["bash", "-n", str(path)], check=True)
    # What bash hands the task is the argv as given, character for character.
    tail = script.split("pav ", 1)[1].strip()
    echoed = subprocess.run(
        ["bash", "-c", f"printf '%s\\n' {tail}"], capture_output=True, text=True, check=True
    )
    assert echoed.stdout.splitlines() == argv


def test_a_value_the_template_needs_and_lacks_is_an_error() -> None:
    job = Job(
        "c", "slurm_shared_fs", "check", 2, 1, 8, 0, 6, "/w", "/w/%j.log", "/w/out"
    )  # extra lacks `check`
    with pytest.raises(jinja2.UndefinedError, match="check"):
        render(job)


def slurm_record(run_dir: Path, host: str, test: str, state: str, code: str) -> None:
    """The job's record as pav_payload.slurm_job leaves it in the host's results of the test."""
    out = run_dir / "hosts" / host / "results" / test
    out.mkdir(parents=True)
    script = out.parent / "job.sbatch.src"
    script.write_text("#!/bin/bash\n")
    job = {"JobState": state, "ExitCode": code, "Reason": "NonZeroExitCode", "NodeList": "node[0-1]",
           "BatchHost": "node0", "StartTime": "2026-01-01T00:00", "EndTime": "2026-01-01T00:01"}  # fmt: skip
    slurm_job.record(out, script, "4242", job, "2026-01-01T00:00:00Z", stopped=False)


def test_a_jobs_record_is_read_back_with_its_paths(tmp_path: Path) -> None:
    slurm_record(tmp_path, "h0", TEST, "COMPLETED", "0:0")
    job = read_job(tmp_path, "h0", TEST)
    assert job["job_id"] == "4242" and job["state"] == "COMPLETED" and job["nodes"] == "node[0-1]"
    assert job["submit_host"] == "h0" and job["stopped_by_timeout"] is False
    assert (
        job["log"] == f"hosts/h0/results/{TEST}/job.log"
        and job["script"] == f"hosts/h0/results/{TEST}/job.sbatch"
    )
    assert read_job(tmp_path, "h1", TEST) == {}  # no job ran there


def test_a_failed_job_is_named_first_in_the_reason(tmp_path: Path) -> None:
    slurm_record(tmp_path, "h0", TEST, "COMPLETED", "0:0")
    slurm_record(tmp_path, "h1", TEST, "FAILED", "1:0")
    launch = Launch(TEST, "torchrun", "host", 60, argv_by_host={"h0": ["x"], "h1": ["x"]})
    results = [TestResult(TEST, ["h0"], "pass"), TestResult(TEST, ["h1"], "fail", "rank 0: wrong result")]
    attach_jobs(results, launch, tmp_path)
    assert results[0].slurm["state"] == "COMPLETED" and results[0].reason == ""
    assert results[1].slurm["job_id"] == "4242"
    assert results[1].reason == "slurm job 4242 FAILED (exit code 1:0); rank 0: wrong result"
