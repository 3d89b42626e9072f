"""--launcher slurm planning: tests become sbatch jobs submitted by a node, scripts in RUN/slurm/."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from pav import catalog
from pav.catalog import NCCL_CHOICES_LOGGED, RING, with_slurm_checks
from pav.errors import PavError
from pav.launch import Launch
from pav.launches import HostView, plan_launches
from pav.results import TestResult
from pav.run_inputs import Timeouts
from pav.settings import Settings, settings_from
from pav.slurm.plan import plan_slurm

INTER_NODE_ENV = RING | NCCL_CHOICES_LOGGED  # Ring, and NCCL's INFO lines of what it chose

LIMIT = Timeouts(900).for_test


def hosts(n: int, gpus: int = 0) -> list[HostView]:
    facts = {"gpu": {"count": gpus}, "cpu": {"vcpus": 16}}
    return [HostView(f"h{i}", f"10.0.0.{i + 1}", {**facts, "hostname": f"node{i}"}) for i in range(n)]


def plan(
    specs: list[catalog.TestSpec], views: list[HostView], settings: Settings, run_id: str, run_dir: Path
) -> tuple[list[Launch], list[Launch], list[TestResult]]:
    """plan_slurm as the validate stage calls it: the run's tests with the Slurm checks folded in (as the
    run's inputs fold them), each test with the settings' limit."""
    limit = Timeouts(settings.test_timeout_s).for_test
    return plan_slurm(with_slurm_checks(specs), views, settings, run_id, run_dir, limit)


def slurm_settings(shared: str = "/shared") -> Settings:
    return Settings(launcher="slurm", shared_dir=shared, test_timeout_s=300)


def test_cluster_run_is_one_job_submitted_from_the_first_host(tmp_path: Path) -> None:
    specs = catalog.select(["ddp_cpu_train_multi"])
    launches, _, _ = plan(specs, hosts(3), slurm_settings(), "r1", tmp_path)
    [launch] = [la for la in launches if la.test == "ddp_cpu_train_multi"]
    assert list(launch.argv_by_host) == ["h0"] and launch.members == ["h0", "h1", "h2"]
    assert launch.ranks_by_host == {"h0": 6}  # 3 nodes x pav_cpu_procs_per_host
    argv = launch.argv_by_host["h0"]
    assert argv[1:3] == ["-m", "pav_payload.slurm_job"]
    shared = argv[argv.index("--private-dir") + 1]  # unguessable, made 0700 by the job (issue 47)
    assert re.fullmatch(r"/shared/pav-r1-[0-9a-f]{16}", shared)
    assert argv[argv.index("--gather") + 1] == f"{shared}/ddp_cpu_train_multi"
    script = (tmp_path / "slurm" / "ddp_cpu_train_multi.sbatch").read_text()
    wanted = ["#SBATCH --nodes=3", "#SBATCH --ntasks-per-node=1", "#SBATCH --cpus-per-task=16"]
    wanted += ["#SBATCH --exclusive", "#SBATCH --time=6", "--nproc-per-node 2", "--rdzv-backend c10d"]
    for line in wanted:
        assert line in script, line
    assert "--gpus-per-node" not in script
    subprocess.run(["bash", "-n", str(tmp_path / "slurm" / "ddp_cpu_train_multi.sbatch")], check=True)


def test_host_tests_are_one_pinned_job_per_host(tmp_path: Path) -> None:
    specs = catalog.select(["torch_nccl_allreduce"])
    launches, _, _ = plan(specs, hosts(2, gpus=8), slurm_settings(), "r1", tmp_path)
    [launch] = [la for la in launches if la.test == "torch_nccl_allreduce"]
    assert set(launch.argv_by_host) == {"h0", "h1"} and launch.ranks_by_host == {"h0": 8, "h1": 8}
    script = (tmp_path / "slurm" / "torch_nccl_allreduce.h1.sbatch").read_text()
    assert "#SBATCH --nodelist=node1" in script and "#SBATCH --gpus-per-node=8" in script
    assert '"$PAV_PYTHON" -m pav_payload.torchrun --standalone' in script
    subprocess.run(["bash", "-n", str(tmp_path / "slurm" / "torch_nccl_allreduce.h1.sbatch")], check=True)


def test_a_hosts_torch_tests_of_one_shape_are_one_job_on_each_host(tmp_path: Path) -> None:
    """As the direct launcher folds them (pav.suites): one sbatch per host runs both tests as a suite, and
    the job's record goes to each test's results; each test is still judged as its own launch."""
    specs = catalog.select(["torch_gloo_allreduce", "ddp_cpu_train", "ddp_cpu_train_multi"])
    launches, runs, _ = plan(specs, hosts(2), slurm_settings(), "r1", tmp_path)
    judged = [la.test for la in launches if la.test in ("torch_gloo_allreduce", "ddp_cpu_train")]
    assert judged == ["torch_gloo_allreduce", "ddp_cpu_train"]
    [suite] = [run for run in runs if run.test.startswith("pav_suites")]
    assert [run.test for run in runs if run.scope == "host"] == [
        suite.test
    ]  # neither test has a job of its own
    assert set(suite.argv_by_host) == {"h0", "h1"}
    assert all(la.ranks_by_host == {"h0": 2, "h1": 2} for la in launches if la.test == "ddp_cpu_train")
    argv = suite.argv_by_host["h1"]
    assert argv[argv.index("--out") + 1] == f"results/{suite.test}"
    assert argv[argv.index("--record-to") :] == ["--record-to", "results/torch_gloo_allreduce",
                                                 "--record-to", "results/ddp_cpu_train"]  # fmt: skip
    script = (tmp_path / "slurm" / f"{suite.test}.h1.sbatch").read_text()
    assert "#SBATCH --nodelist=node1" in script and "pav_payload.suite_launch" in script
    assert not list((tmp_path / "slurm").glob("ddp_cpu_train.*")), "a folded test got a job script of its own"
    subprocess.run(["bash", "-n", str(tmp_path / "slurm" / f"{suite.test}.h1.sbatch")], check=True)
    # pav_fold_launches: false gives each test its jobs back.
    unfolded = Settings(launcher="slurm", shared_dir="/shared", test_timeout_s=300, fold_launches=False)
    _, runs, _ = plan(specs, hosts(2), unfolded, "r2", tmp_path / "unfolded")
    assert {run.test for run in runs if run.scope == "host"} == {"torch_gloo_allreduce", "ddp_cpu_train"}


def test_slurm_checks_come_first_and_gpu_check_skips_without_gpus(tmp_path: Path) -> None:
    launches, _, skipped = plan(catalog.select(["mpi_allreduce"]), hosts(2), slurm_settings(), "r", tmp_path)
    assert [la.test for la in launches] == ["slurm_cluster_state", "slurm_cpu_binding", "slurm_shared_fs",
                                            "mpi_allreduce"]  # fmt: skip
    assert [(s.name, s.reason) for s in skipped] == [("slurm_gpu_binding", "no GPU on h[0-1]")]
    mpi = launches[-1]
    assert mpi.launcher == "mpirun" and "pav-mpirun" in mpi.argv_by_host["h0"][0]  # mpirun stays as it is


def test_each_slurm_check_runs_its_payload_check_where_the_catalog_says(tmp_path: Path) -> None:
    """The cluster state on the first host alone, outside any job; shared-fs one task per node; the rest a
    task per process, each with its pav_payload.slurm_check argument."""
    launches, _, _ = plan([], hosts(3), slurm_settings(), "r", tmp_path)
    by_test = {la.test: la for la in launches}
    state = by_test["slurm_cluster_state"]
    assert state.ranks_by_host == {"h0": 1} and state.members == ["h0", "h1", "h2"]
    argv = state.argv_by_host["h0"]
    assert argv[1:6] == ["-m", "pav_payload.slurm_check", "cluster-state", "--expect-nodes", "3"]
    assert not (tmp_path / "slurm" / "slurm_cluster_state.sbatch").exists()
    assert by_test["slurm_shared_fs"].ranks_by_host == {"h0": 3}
    assert by_test["slurm_cpu_binding"].ranks_by_host == {"h0": 6}  # 3 nodes x pav_cpu_procs_per_host
    for test, check, tasks, cpus in (
        ("slurm_shared_fs", "shared-fs", 1, 8),
        ("slurm_cpu_binding", "cpu-binding", 2, 8),
    ):
        script = (tmp_path / "slurm" / f"{test}.sbatch").read_text()
        assert f"pav_payload.slurm_check {check} " in script, test
        assert f"#SBATCH --ntasks-per-node={tasks}\n" in script, test
        assert f"#SBATCH --cpus-per-task={cpus}\n" in script, test


def test_nccl_tests_across_nodes_run_a_rank_per_gpu_with_the_tests_env(tmp_path: Path) -> None:
    views = hosts(2, gpus=8)
    for view in views:
        view.facts["nccl_tests"] = {"available": True, "mpi": True, "bin_dir": "/opt/nt/build"}
    settings = slurm_settings()
    settings.slurm_mpi = "pmi2"
    launches, _, _ = plan(catalog.select(["nccl_tests_all_reduce_multi"]), views, settings, "r", tmp_path)
    [multi] = [la for la in launches if la.test == "nccl_tests_all_reduce_multi"]
    assert multi.env == INTER_NODE_ENV  # sbatch passes it on to every rank
    script = (tmp_path / "slurm" / "nccl_tests_all_reduce_multi.sbatch").read_text()
    for line in ("#SBATCH --ntasks-per-node=8", "#SBATCH --gpus-per-node=8", "srun --mpi=pmi2"):
        assert line in script, line
    assert "/opt/nt/build/all_reduce_perf -b 512M -e 8G -f 2 -g 1" in script and "torchrun" not in script


def test_every_slurm_launch_carries_its_tests_env(tmp_path: Path) -> None:
    specs = catalog.select(["torch_nccl_allreduce_multi"])
    direct, _ = plan_launches(specs, hosts(2, gpus=8), Settings(), "r", LIMIT)
    launches, _, _ = plan(specs, hosts(2, gpus=8), slurm_settings(), "r", tmp_path)
    [slurm] = [la for la in launches if la.test == "torch_nccl_allreduce_multi"]
    assert slurm.env == direct[0].env == INTER_NODE_ENV


def test_gpu_binding_asks_one_gpu_per_task(tmp_path: Path) -> None:
    launches, _, _ = plan([], hosts(2, gpus=8), slurm_settings(), "r", tmp_path)
    [check] = [la for la in launches if la.test == "slurm_gpu_binding"]
    assert check.ranks_by_host == {"h0": 16}
    script = (tmp_path / "slurm" / "slurm_gpu_binding.sbatch").read_text()
    assert "#SBATCH --gpus-per-task=1" in script and "#SBATCH --cpus-per-task=2" in script


def test_without_shared_dir_spanning_jobs_are_errors_naming_the_fix(tmp_path: Path) -> None:
    launches, _, skipped = plan(catalog.select([]), hosts(2), slurm_settings(shared=""), "r", tmp_path)
    assert [la.test for la in launches] == ["slurm_cluster_state"]
    errors = {s.name: s.reason for s in skipped if s.status == "error"}
    assert set(errors) == {"slurm_cpu_binding", "slurm_shared_fs"}
    assert "pav_shared_dir" in errors["slurm_shared_fs"]


def test_direct_launcher_skips_slurm_checks() -> None:
    launches, skipped = plan_launches(catalog.select(["slurm_shared_fs"]), hosts(2), Settings(), "r", LIMIT)
    assert launches == [] and [(s.status, s.reason) for s in skipped] == [
        ("skipped", "needs --launcher slurm")
    ]


def test_unknown_launcher_is_one_clear_error() -> None:
    with pytest.raises(PavError, match="pav_launcher must be one of direct, slurm"):
        settings_from({"pav_launcher": "pbs"}, "group_vars/all.yml")
