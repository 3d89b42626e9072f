"""Slurm job records (slurm.json, written by pav_payload.slurm_job on the submitting host) into results."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pav.launch import Launch
from pav.results import TestResult

KEYS = ("job_id", "state", "exit_code", "signal", "reason", "nodes", "batch_host", "start_time", "end_time")


def attach_jobs(results: list[TestResult], launch: Launch, run_dir: Path) -> list[TestResult]:
    """Each result of a launch submitted through Slurm gets its job: id, state, exit code, log paths."""
    for result in results:
        for host in launch.hosts:
            if host in result.hosts:
                job = read_job(run_dir, host, launch.test)
                if job:
                    result.slurm = job
                    name_job_in_reason(result, job)
                    break
    return results


def read_job(run_dir: Path, host: str, test: str) -> dict[str, Any]:
    folder = Path("hosts") / host / "results" / test
    try:
        raw = json.loads((run_dir / folder / "slurm.json").read_text())
    except (OSError, json.JSONDecodeError):
        return {}
    job = {key: raw.get(key) for key in KEYS}
    job["submit_host"] = host
    job["log"] = str(folder / "job.log")
    job["script"] = str(folder / "job.sbatch")
    job["stopped_by_timeout"] = bool(raw.get("stopped_by_timeout"))
    return job


def name_job_in_reason(result: TestResult, job: dict[str, Any]) -> None:
    """A failed job says so in the reason: the rank reports alone may not show that Slurm ended it."""
    if result.status in ("fail", "error") and job.get("state") != "COMPLETED":
        code = f"exit code {job.get('exit_code')}:{job.get('signal')}"
        result.reason = f"slurm job {job.get('job_id')} {job.get('state')} ({code}); {result.reason}"
