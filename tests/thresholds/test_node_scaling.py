"""Training across hosts (issue 19): planned as one torchrun over every GPU of every host, and its scaling
from one node to N judged against each host's own run of the same training; a slow network fails it."""

from __future__ import annotations

from typing import Any

from pav import catalog
from pav.launches import HostView, plan_launches
from pav.results import TestResult
from pav.run_inputs import Timeouts
from pav.settings import Settings
from pav.thresholds.profiles import load_profile
from pav.thresholds.scaling import add_scaling, split_gates

HOSTS = ["node-0", "node-1"]


def train(name: str, hosts: list[str], per_rank_min: float, status: str = "pass") -> TestResult:
    metrics: dict[str, Any] = {
        "tokens_per_s_per_rank_min": per_rank_min,
        "tokens_per_s_total": per_rank_min,
        "loss_ratio": 0.5,
        "replicas_equal": 1,
    }
    return TestResult(name, hosts, status, metrics=metrics)  # type: ignore[arg-type]


def judged(multi: float, node0: float, node1: float, node1_status: str = "pass") -> TestResult:
    tests = [
        train("train_gpu_ddp", ["node-0"], node0),
        train("train_gpu_ddp", ["node-1"], node1, node1_status),
        train("train_gpu_ddp_multi", HOSTS, multi),
    ]
    _, derived = split_gates(load_profile("h100-sxm-8gpu")["train_gpu_ddp_multi"])
    add_scaling(tests, {"train_gpu_ddp_multi": derived}, derive=False)  # node scaling alone
    return tests[-1]


def test_efficiency_is_per_gpu_throughput_over_the_median_node() -> None:
    """Over the median node, not the slowest (issue 63): a straggler is no baseline for itself."""
    test = judged(multi=19_000.0, node0=20_500.0, node1=20_000.0)
    assert test.metrics["scaling_efficiency_nodes"] == 19_000.0 / 20_250.0
    assert test.status == "pass", test.reason
    assert any(g["metric"] == "scaling_efficiency_nodes" for g in test.threshold["gates"])


def test_a_slow_network_between_the_hosts_fails_the_gate() -> None:
    test = judged(multi=10_000.0, node0=20_000.0, node1=20_000.0)  # half the per-GPU rate across hosts
    assert test.status == "fail"
    assert test.reason == "scaling_efficiency_nodes=0.5 below the minimum 0.9"


def test_without_every_hosts_baseline_the_gate_is_not_applicable_saying_why() -> None:
    """The baseline's own failure fails the run and names its host; the figure it would divide by was never
    measured, so the gate on it says so instead of blaming the network or the GPUs (issue 46)."""
    test = judged(multi=19_000.0, node0=20_000.0, node1=20_000.0, node1_status="fail")
    assert "scaling_efficiency_nodes" not in test.metrics
    assert test.status == "pass", test.reason
    [ruled_out] = test.threshold["not_applicable"]
    assert ruled_out["metric"] == "scaling_efficiency_nodes"
    assert ruled_out["not_applicable"].startswith("not measured: train_gpu_ddp on node-1 did not pass (fail")


def test_nodes_of_one_gpu_use_their_one_gpu_run() -> None:
    """A node of one GPU (a machine split into nodes, a 1-GPU VM) skips train_gpu_ddp; its train_gpu_single
    of the same model is that node's throughput. A DDP run that ran wins over it."""
    skipped = TestResult("train_gpu_ddp", ["node-0"], "skipped", "needs 2 GPUs, the host has 1")
    tests = [
        skipped,
        TestResult("train_gpu_ddp", ["node-1"], "skipped", "needs 2 GPUs, the host has 1"),
        train("train_gpu_single", ["node-0"], 40_000.0),
        train("train_gpu_single", ["node-1"], 32_000.0),
        train("train_gpu_ddp_multi", HOSTS, 16_000.0),
    ]
    _, derived = split_gates(load_profile("h100-sxm-8gpu")["train_gpu_ddp_multi"])
    add_scaling(tests, {"train_gpu_ddp_multi": derived}, derive=False)  # node scaling alone
    assert tests[-1].metrics["scaling_efficiency_nodes"] == 16_000.0 / 36_000.0  # over the median node
    assert tests[-1].status == "fail"
    tests[0] = train("train_gpu_ddp", ["node-0"], 20_000.0)
    tests[-1] = train("train_gpu_ddp_multi", HOSTS, 16_000.0)
    add_scaling(tests, {"train_gpu_ddp_multi": derived}, derive=False)  # node scaling alone
    # node-0 by its DDP run (20,000), node-1 by its 1-GPU run (32,000): their median is 26,000
    assert tests[-1].metrics["scaling_efficiency_nodes"] == 16_000.0 / 26_000.0


def host(name: str, address: str, gpus: int) -> HostView:
    return HostView(name, address, {"gpu": {"count": gpus}, "cpu": {"vcpus": 16}})


def test_planned_as_one_torchrun_over_every_gpu_of_every_host() -> None:
    specs = catalog.select(["train_gpu_ddp_multi", "train_gpu_fsdp_multi"])
    hosts = [host("node-0", "10.0.0.1", 8), host("node-1", "10.0.0.2", 8)]
    launches, skipped = plan_launches(specs, hosts, Settings(), "run1", Timeouts(900).for_test)
    assert skipped == [] and [la.test for la in launches] == ["train_gpu_ddp_multi", "train_gpu_fsdp_multi"]
    for launch in launches:
        assert launch.scope == "cluster" and launch.members == HOSTS
        assert launch.ranks_by_host == {"node-0": 8, "node-1": 8}
        argv = launch.argv_by_host["node-1"]
        assert argv[argv.index("--nnodes") + 1] == "2" and argv[argv.index("--nproc_per_node") + 1] == "8"
        assert argv[argv.index("--rdzv_endpoint") + 1] == "10.0.0.1:29400"


def test_hosts_without_gpus_skip_it_naming_them() -> None:
    specs = catalog.select(["train_gpu_ddp_multi"])
    launches, [skip] = plan_launches(
        specs,
        [host("sim-0", "10.1.0.2", 0), host("sim-1", "10.1.0.3", 0)],
        Settings(),
        "r",
        Timeouts(900).for_test,
    )
    assert launches == [] and skip.status == "skipped" and skip.reason == "no GPU on sim-[0-1]"
