"""Scaling gates bounded by what bounds them (issue 46): DDP within a host against the bound its own step
time and all_reduce bandwidth set, and, on every shape a user can have, a baseline for every scaling gate
the default test sets plan."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pav import catalog
from pav.launches import HostView, plan_launches
from pav.results import TestResult
from pav.run_inputs import Timeouts
from pav.settings import Settings
from pav.thresholds.scaling import BusFloor, add_scaling
from pav.yamlfile import load_mapping

ROOT = Path(__file__).resolve().parents[2]
RESNET_PARAMS = 25_557_032  # ResNet-50 at 1000 classes: 102.2 MB of float32 gradients


def sets() -> dict[str, list[str]]:
    """The test sets a user runs without --tests: every env's pav_tests, and the default for inventories."""
    found = {"inventory default": list(catalog.DEFAULT_TESTS)}
    for path in sorted(ROOT.glob("inventories/*/group_vars/all/pav.yml")):
        tests = load_mapping(path).get("pav_tests")
        if tests:
            found[path.parts[-4]] = list(tests)
    return found


def hosts_of(count: int, gpus: int) -> list[HostView]:
    facts = {
        "gpu": {"count": gpus},
        "cpu": {"vcpus": 16},
        "nccl_tests": {"available": True, "mpi": True, "bin_dir": "/nt"},
    }
    return [HostView(f"node-{i}", f"10.0.0.{i + 1}", facts) for i in range(count)]


@pytest.mark.parametrize("name", sorted(sets()))
@pytest.mark.parametrize("count", [1, 2])
@pytest.mark.parametrize("gpus", [1, 2, 4, 8])
def test_no_gate_divides_by_a_figure_the_plan_skips(name: str, count: int, gpus: int) -> None:
    """Each scaling test the set plans on this shape has, on each of its hosts, a baseline that is planned
    there too (not skipped): its gate then always has a figure to divide by."""
    specs = catalog.select(sets()[name])
    launches, _ = plan_launches(specs, hosts_of(count, gpus), Settings(), "run", Timeouts(900).for_test)
    planned = {(la.test, host) for la in launches for host in la.argv_by_host} | {
        (la.test, host) for la in launches if la.scope == "cluster" for host in la.members
    }
    for launch in launches:
        spec = catalog.CATALOG[launch.test]
        if not spec.scaling_baselines:
            continue
        wanted = spec.scaling_baselines[:1] if spec.scope == "host" else spec.scaling_baselines
        for host in launch.members:
            assert any((b, host) in planned for b in wanted), (
                f"{name}, {count} x {gpus} GPUs: {launch.test} is planned on {host} but none of its "
                f"baselines {wanted} is"
            )


def result(name: str, metrics: dict[str, Any], hosts: tuple[str, ...] = ("gpu-host",)) -> TestResult:
    return TestResult(name, list(hosts), "pass", metrics=metrics)  # type: ignore[arg-type]


def resnet_run(per_rank: float, world: int = 4, busbw: float | None = 300.0) -> list[TestResult]:
    single = result(
        "train_gpu_resnet50_single", {"samples_per_s_total": 2180.0, "step_time_s_median": 0.1174}
    )
    ddp = result(
        "train_gpu_resnet50_ddp",
        {"samples_per_s_per_rank_min": per_rank, "parameters": RESNET_PARAMS, "world_size": world},
    )
    tests = [single, ddp]
    if busbw is not None:
        sizes = {str(512 << 20): busbw, str(8 << 30): busbw + 40}
        tests.insert(0, result("torch_nccl_allreduce", {"busbw_gbps": {"all_reduce": sizes}}))
    return tests


def test_ddp_is_held_to_a_fraction_of_the_bound_its_own_figures_set() -> None:
    tests = resnet_run(per_rank=1744.0)  # 0.8 of one GPU's 2,180: what batch 64 gave on 4x H200
    add_scaling(tests, {})
    ddp = tests[-1]
    # 102.2 MB x 2 x 3/4 at 300 GB/s (the smallest size torch measured) = 0.51 ms against a 117.4 ms step
    bound = 0.1174 / (0.1174 + RESNET_PARAMS * 4 * 1.5 / 300e9)
    [gate] = [g for g in ddp.threshold["gates"] if g["metric"] == "scaling_efficiency"]
    assert gate["limit"] == round(bound, 3) and gate["min"] == round(bound * 0.9, 3)
    assert ddp.status == "fail"
    assert ddp.reason.startswith(
        f"host: scaling_efficiency 0.8, expected >= {round(bound * 0.9, 3):.4g} = 0.9 x "
    )
    assert "one GPU's step 117.4 ms (train_gpu_resnet50_single)" in ddp.reason
    assert "102.2 MB of gradients all-reduced over 4 GPUs at 300 GB/s" in ddp.reason
    assert "(torch_nccl_allreduce at 512 MiB)" in ddp.reason

    healthy = resnet_run(per_rank=2140.0)
    add_scaling(healthy, {})
    assert healthy[-1].status == "pass", healthy[-1].reason


def test_a_slow_link_lowers_the_bound_only_as_far_as_its_own_figures_say() -> None:
    """P2P off (26 GB/s): 5.9 ms of exposed all_reduce at most; the link's own gate fails the host."""
    tests = resnet_run(per_rank=2000.0, busbw=26.0)
    add_scaling(tests, {})
    [gate] = [g for g in tests[-1].threshold["gates"] if g["metric"] == "scaling_efficiency"]
    assert 0.95 < gate["limit"] < 0.96


def test_without_a_measured_all_reduce_the_hosts_gate_minimum_bounds_it() -> None:
    tests = resnet_run(per_rank=2140.0, busbw=None)
    add_scaling(tests, {}, floors={"gpu-host": BusFloor(315.0, "0.7 x 450 GB/s, NVLink")})
    [gate] = [g for g in tests[-1].threshold["gates"] if g["metric"] == "scaling_efficiency"]
    assert "at 315 GB/s bus bandwidth (the host's all_reduce gate, 0.7 x 450 GB/s, NVLink)" in gate["source"]


def test_gpu_correctness_chosen_derives_no_scaling_gate_and_a_profile_gate_wins() -> None:
    tests = resnet_run(per_rank=1744.0)
    add_scaling(tests, {}, derive=False)
    assert tests[-1].status == "pass" and tests[-1].metrics["scaling_efficiency"] == 0.8
    assert not tests[-1].threshold.get("gates")


def test_a_baseline_not_in_the_run_makes_the_gate_not_applicable_never_a_fail() -> None:
    tests = resnet_run(per_rank=1000.0)[::2]  # the collective and the DDP run, no 1-GPU baseline
    add_scaling(tests, {})
    ddp = tests[-1]
    assert ddp.status == "pass" and "scaling_efficiency" not in ddp.metrics
    [ruled_out] = ddp.threshold["not_applicable"]
    assert ruled_out["not_applicable"] == (
        "not measured: no run of train_gpu_resnet50_single on gpu-host in this run: add it to pav_tests"
    )


def test_fsdp_runs_on_one_gpu_so_a_one_gpu_node_has_its_baseline() -> None:
    [launch], skipped = plan_launches(
        catalog.select(["train_gpu_fsdp"]), hosts_of(1, 1), Settings(), "run", Timeouts(900).for_test
    )
    assert skipped == [] and launch.ranks_by_host == {"node-0": 1}
