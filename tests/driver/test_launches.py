"""Planning: GPU tests skip on GPU-less hosts, cluster tests span hosts with a c10d rendezvous."""

from __future__ import annotations

import pytest

from pav import catalog, suites
from pav.launches import HostView, plan_launches
from pav.run_inputs import Timeouts
from pav.settings import Settings

LIMIT = Timeouts(900).for_test


def hosts(n: int, gpus: int = 0) -> list[HostView]:
    return [HostView(f"h{i}", f"10.0.0.{i + 1}", {"gpu": {"count": gpus}}) for i in range(n)]


def test_gpu_tests_skip_without_gpus() -> None:
    launches, skipped = plan_launches(
        catalog.select(["torch_nccl_allreduce"]), hosts(2), Settings(), "r", LIMIT
    )
    assert launches == []
    assert [(s.hosts, s.status, s.reason) for s in skipped] == [
        (["h0"], "skipped", "no GPU"),
        (["h1"], "skipped", "no GPU"),
    ]


def test_gpu_test_uses_every_gpu() -> None:
    [launch], _ = plan_launches(
        catalog.select(["torch_nccl_allreduce"]), hosts(1, gpus=8), Settings(), "r", LIMIT
    )
    argv = launch.argv_by_host["h0"]
    assert argv[argv.index("--nproc_per_node") + 1] == "8"
    assert launch.ranks_by_host == {"h0": 8}


def test_cluster_test_rendezvous_on_first_host() -> None:
    [launch], _ = plan_launches(catalog.select(["ddp_cpu_train_multi"]), hosts(3), Settings(), "run1", LIMIT)
    assert launch.members == ["h0", "h1", "h2"]
    for i, name in enumerate(launch.members):
        argv = launch.argv_by_host[name]
        assert argv[argv.index("--rdzv_endpoint") + 1] == "10.0.0.1:29400"
        assert argv[argv.index("--local-addr") + 1] == f"10.0.0.{i + 1}"
        assert argv[argv.index("--nnodes") + 1] == "3"


def test_cluster_test_needs_two_hosts() -> None:
    launches, [skip] = plan_launches(catalog.select(["mpi_allreduce"]), hosts(1), Settings(), "r", LIMIT)
    assert launches == [] and skip.reason == "needs 2 or more hosts"


def test_mpirun_starts_on_first_host_only() -> None:
    [launch], _ = plan_launches(catalog.select(["mpi_allreduce"]), hosts(3), Settings(), "r", LIMIT)
    assert list(launch.argv_by_host) == ["h0"]
    argv = launch.argv_by_host["h0"]
    assert argv[argv.index("-np") + 1] == "6"


def nccl_hosts(n: int, mpi: bool) -> list[HostView]:
    tests = {"available": True, "bin_dir": "/opt/nt/build", "mpi": mpi}
    return [
        HostView(f"h{i}", f"10.0.0.{i + 1}", {"gpu": {"count": 8}, "nccl_tests": tests}) for i in range(n)
    ]


def test_inter_node_tests_pin_ring() -> None:
    names = ["torch_nccl_allreduce_multi", "nccl_tests_all_reduce_multi"]
    launches, _ = plan_launches(catalog.select(names), nccl_hosts(2, mpi=True), Settings(), "r", LIMIT)
    # Ring, and NCCL's INFO lines of INIT and NET: what it chose is judged against the hosts' fabric.
    logged = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET"}
    assert [launch.env for launch in launches] == [{"NCCL_ALGO": "Ring", **logged}] * 2
    # Host-scope tests keep NCCL's own algorithm choice.
    [local], _ = plan_launches(
        catalog.select(["torch_nccl_allreduce"]), nccl_hosts(1, True), Settings(), "r", LIMIT
    )
    assert local.env == {}


def test_inter_node_nccl_tests_one_rank_per_gpu_under_mpirun() -> None:
    [launch], _ = plan_launches(
        catalog.select(["nccl_tests_all_reduce_multi"]), nccl_hosts(2, mpi=True), Settings(), "r", LIMIT
    )
    [argv] = launch.argv_by_host.values()
    assert argv[:3] == ["{mpi_bin_dir}/pav-mpirun", "-np", "16"]
    assert argv[3] == "/opt/nt/build/all_reduce_perf" and argv[-2:] == ["-g", "1"]


def test_inter_node_nccl_tests_need_an_mpi_build() -> None:
    launches, [error] = plan_launches(
        catalog.select(["nccl_tests_all_reduce_multi"]), nccl_hosts(2, mpi=False), Settings(), "r", LIMIT
    )
    assert launches == [] and error.status == "error" and "nccl_tests_mpi: true" in error.reason


def test_a_one_gpu_host_skips_multi_rank_gpu_tests_and_runs_the_probe() -> None:
    names = ["gpu_probe", "train_gpu_single", "torch_nccl_allreduce", "train_gpu_ddp", "nccl_tests_sendrecv"]
    launches, skipped = plan_launches(catalog.select(names), hosts(1, gpus=1), Settings(), "r", LIMIT)
    assert [launch.test for launch in launches] == ["gpu_probe", "train_gpu_single"]
    assert launches[0].ranks_by_host == {"h0": 1}
    assert {s.name: s.status for s in skipped} == dict.fromkeys(names[2:], "skipped")
    assert all("needs 2 GPUs, the host has 1" in s.reason for s in skipped)


def test_cpu_tests_stay_on_gloo_on_a_gpu_host() -> None:
    # Two NCCL ranks on a 1-GPU host fail with "Duplicate GPU detected"; CPU tests must not pick NCCL.
    for name in ("ddp_cpu_train", "torch_gloo_allreduce"):
        [launch], _ = plan_launches(catalog.select([name]), hosts(1, gpus=1), Settings(), "r", LIMIT)
        argv = launch.argv_by_host["h0"]
        assert argv[argv.index("--backend") + 1] == "gloo"


def test_plain_tests_start_no_torch_and_run_as_launches_of_their_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """FOR TESTING ONLY: the "plain" launcher's tests (pav_payload.plain, no torch) run its agent on each
    host, the ranks a CPU test has, never torchrun, and stay out of the torch tests' suites."""
    monkeypatch.setenv("PAV_FAULT_TESTS", "1")
    names = ["torch_gloo_allreduce", "fault_plain", "ddp_cpu_train", "fault_plain_hang"]
    specs = catalog.select([*names, "fault_plain_hang_multi"])
    launches, skipped = plan_launches(specs, hosts(2), Settings(), "r", LIMIT)
    assert skipped == []
    by_test = {launch.test: launch for launch in launches}
    host = by_test["fault_plain_hang"]
    assert host.argv_by_host["h1"] == [
        "{python}", "-m", "pav_payload.plain", "--nproc", "2", "--hang", "1",
        "--out", "results/fault_plain_hang", "--test-id", "fault_plain_hang",
    ]  # fmt: skip
    assert host.ranks_by_host == {"h0": 2, "h1": 2} and host.payload_args == []
    cluster = by_test["fault_plain_hang_multi"]
    for index, name in enumerate(("h0", "h1")):
        argv = cluster.argv_by_host[name]
        assert argv[:5] == ["{python}", "-m", "pav_payload.plain", "--nproc", "2"]
        world = ["--nnodes", "2", "--node-rank", str(index), "--master", "10.0.0.1:29400"]
        assert argv[5:11] == world
    assert cluster.ranks_by_host == {"h0": 2, "h1": 2} and cluster.members == ["h0", "h1"]
    # Beside torch tests of the same world shape on the same hosts, only the torch tests share a suite.
    folded = suites.fold_with_members(launches)
    assert [(run.test, [m.test for m in members]) for run, members in folded] == [
        ("pav_suites_1", ["torch_gloo_allreduce", "ddp_cpu_train"]),
        ("fault_plain", ["fault_plain"]),
        ("fault_plain_hang", ["fault_plain_hang"]),
        ("fault_plain_hang_multi", ["fault_plain_hang_multi"]),
    ]
