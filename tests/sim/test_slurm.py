"""--env sim --launcher slurm: the slurm role brings up slurmctld + slurmd + munged on 2 sim hosts, the
env's own test list runs as Slurm jobs (the payload's multi-host run sbatch -> srun -> torchrun),
Slurm's own checks run, a rank that exits non-zero fails the job and the
verdict, and teardown leaves no daemon behind."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CliRun, run_cli
from tests.sim.conftest import SlurmCluster
from tests.sim.leftovers import alive, leftovers, slurm_daemons

pytestmark = pytest.mark.slow

MULTI = "torch_gloo_collectives_multi"
FAULT = "fault_rank_exit_multi"


@dataclass
class SlurmRuns:
    healthy: CliRun
    healthy_dir: Path
    failing: CliRun
    failing_dir: Path
    daemons: list[str]  # seen while the cluster was up
    down: CliRun
    state: Path

    def results(self, run_dir: Path) -> dict[str, Any]:
        return json.loads((run_dir / "results.json").read_text())


def tasks_run(run_dir: Path, stage: str) -> dict[str, set[str]]:
    """The tasks of a stage's playbook that ran (ok or changed), each with the hosts it ran on."""
    ran: dict[str, set[str]] = {}
    for path in (run_dir / "ansible" / stage).glob("artifacts/*/job_events/*.json"):
        event = json.loads(path.read_text())
        if event.get("event") == "runner_on_ok":
            data = event["event_data"]
            ran.setdefault(data["task"], set()).add(data["host"])
    return ran


def by_name(results: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in results["tests"]}


@pytest.fixture(scope="module")
def runs(slurm_cluster: SlurmCluster) -> SlurmRuns:
    """Validate twice on the shared, already configured Slurm sim cluster, then tear it down."""
    base, env = slurm_cluster.base, slurm_cluster.env
    kept = slurm_cluster.reuse()
    common = ("--env", "sim", "--launcher", "slurm", "--keep", "--stages", "validate,collect,report", *kept)
    healthy_dir, failing_dir = base / "healthy", base / "failing"
    try:
        assert slurm_cluster.first.rc == 0, slurm_cluster.first.stdout + slurm_cluster.first.stderr
        healthy = run_cli(*common, "--run-dir", str(healthy_dir), env=env, timeout=900)  # the env's tests
        daemons = slurm_daemons(slurm_cluster.state)
        failing = run_cli(*common, "--tests", FAULT, "--run-dir", str(failing_dir), env=env, timeout=600)
    finally:
        down = run_cli("--env", "sim", "--stages", "teardown", *kept, "--run-dir", str(base / "down"),
                       env=env)  # fmt: skip
        slurm_cluster.down = down
    return SlurmRuns(healthy, healthy_dir, failing, failing_dir, daemons, down, slurm_cluster.state)


def test_multi_host_run_is_a_slurm_job_and_passes(runs: SlurmRuns) -> None:
    assert runs.healthy.rc == 0, runs.healthy.stdout + runs.healthy.stderr
    results = runs.results(runs.healthy_dir)
    assert results["verdict"] == "PASS"
    test = by_name(results)[MULTI]
    assert test["status"] == "pass", test
    assert test["slurm"]["job_id"].isdigit() and test["slurm"]["state"] == "COMPLETED", test["slurm"]
    assert test["slurm"]["exit_code"] == 0
    # 2 nodes x 2 processes, ranks on both hosts: srun started one torchrun per node.
    assert test["metrics"]["world_size"] == 4
    assert set(test["metrics"]["rank_hosts"].values()) == set(results["hosts"])
    # The job's own output came back: both nodes' torchrun announce themselves in it.
    log = (runs.healthy_dir / test["slurm"]["log"]).read_text()
    assert log.count("OMP_NUM_THREADS") == 2, log[-2000:]
    script = (runs.healthy_dir / "slurm" / f"{MULTI}.sbatch").read_text()
    assert "#SBATCH --nodes=2" in script and "#SBATCH --exclusive" in script
    assert "srun --kill-on-bad-exit=1 --ntasks-per-node=1" in script
    # The job scripts reached each host as one self-unpacking script: no module run per file.
    ran = tasks_run(runs.healthy_dir, "validate")
    assert ran["Unpack the run's job scripts on the host"] == set(results["hosts"]), ran
    assert "Copy the job scripts" not in ran and "Create the run's slurm folder" not in ran
    assert not (runs.healthy_dir / "ansible" / "slurm-jobs.sh").exists()  # the driver removed its copy


def test_a_hosts_torch_tests_run_in_one_job(runs: SlurmRuns) -> None:
    """Each host's torch_gloo_allreduce and ddp_cpu_train run as one suite in one job (pav_fold_launches),
    each still with its own result and the record of the job it ran in."""
    results = runs.results(runs.healthy_dir)
    for host in results["hosts"]:
        mine = {t["name"]: t for t in results["tests"] if t["hosts"] == [host]}
        gloo, ddp = mine["torch_gloo_allreduce"], mine["ddp_cpu_train"]
        assert gloo["status"] == ddp["status"] == "pass", (gloo, ddp)
        assert gloo["slurm"]["job_id"] == ddp["slurm"]["job_id"] and gloo["slurm"]["state"] == "COMPLETED"
        assert gloo["metrics"]["world_size"] == ddp["metrics"]["world_size"] == 2
    detail = {s["name"]: s["detail"] for s in results["stages"]}["validate"]
    assert " launches (a host's torch tests in suites" in detail, detail


def test_slurm_checks_run_as_tests(runs: SlurmRuns) -> None:
    tests = by_name(runs.results(runs.healthy_dir))
    for name in ("slurm_cluster_state", "slurm_cpu_binding", "slurm_shared_fs"):
        assert tests[name]["status"] == "pass", tests[name]
        assert tests[name]["metrics"]["mismatches"] == 0
    assert tests["slurm_cluster_state"]["metrics"]["ranks_reported"] == 1
    assert tests["slurm_cpu_binding"]["metrics"]["ranks_reported"] == 4  # 2 tasks x 2 nodes, 1 CPU each
    assert tests["slurm_shared_fs"]["metrics"]["ranks_reported"] == 2  # one reader per node
    assert (
        tests["slurm_gpu_binding"]["status"] == "skipped" and "no GPU" in tests["slurm_gpu_binding"]["reason"]
    )


def test_rank_exiting_nonzero_fails_the_job_and_the_verdict(runs: SlurmRuns) -> None:
    assert runs.failing.rc == 1, runs.failing.stdout + runs.failing.stderr
    results = runs.results(runs.failing_dir)
    assert results["verdict"] == "FAIL"
    test = by_name(results)[FAULT]
    assert test["status"] in ("fail", "error"), test
    assert test["slurm"]["state"] == "FAILED", test["slurm"]
    assert test["slurm"]["exit_code"] != 0
    assert f"slurm job {test['slurm']['job_id']} FAILED" in test["reason"]
    # The cluster was idle again before this run's jobs: the earlier jobs left nothing allocated.
    assert by_name(results)["slurm_cluster_state"]["status"] == "pass"


def test_teardown_leaves_no_daemon(runs: SlurmRuns) -> None:
    assert runs.down.rc == 0, runs.down.stdout + runs.down.stderr
    names = {entry.split()[2] for entry in runs.daemons}
    assert {"slurmctld", "slurmd", "munged"} <= names, runs.daemons
    assert alive(runs.daemons) == []
    assert leftovers(runs.state) == []
    assert not (runs.state / "sim" / "shared").exists()
