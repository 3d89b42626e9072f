"""Folding host tests of one world shape into one suite launch per host (src/pav/suites.py)."""

from __future__ import annotations

import json

from pav import catalog
from pav.launches import HostView, Launch, plan_launches
from pav.settings import Settings
from pav.suites import fold

FACTS = {"gpu": {"count": 4}, "nccl_tests": {"available": True, "bin_dir": "/opt/nccl-tests"}}


def planned(names: list[str]) -> list[Launch]:
    hosts = [HostView(f"h{i}", f"10.0.0.{i}", FACTS) for i in range(2)]
    settings = Settings(test_timeouts_s={"gpu_probe": 50})
    launches, _ = plan_launches(catalog.select(names), hosts, settings, "r1")
    return launches


def suite_tests(launch: Launch) -> list[str]:
    if not launch.test.startswith("pav_suite"):
        return []
    return [t["test"] for t in json.loads(launch.argv_by_host["h0"][-1])]


def test_tests_of_one_world_shape_share_a_launch_and_keep_their_own_limits() -> None:
    names = [
        "torch_gloo_allreduce", "gpu_probe", "torch_nccl_allreduce", "train_gpu_single", "ddp_cpu_train",
        "train_gpu_ddp", "nccl_tests_all_reduce", "torch_nccl_allreduce_multi",
    ]  # fmt: skip
    runs = fold(planned(names))
    tests_of = {r.test: suite_tests(r) for r in runs}
    # Every GPU (nccl), one GPU, CPU (gloo): three suites, in the order their first test came.
    assert tests_of == {
        "pav_suite_1": ["torch_gloo_allreduce", "ddp_cpu_train"],
        "pav_suite_2": ["gpu_probe", "train_gpu_single"],
        "pav_suite_3": ["torch_nccl_allreduce", "train_gpu_ddp"],
        "nccl_tests_all_reduce": [],  # nccl-tests keep a launch each
        "torch_nccl_allreduce_multi": [],  # another world: every GPU of every host
    }
    probe = next(r for r in runs if r.test == "pav_suite_2")
    assert probe.argv_by_host["h1"][:5] == ["{python}", "-m", "pav_payload.suite_launch", "--nproc", "1"]
    plan = json.loads(probe.argv_by_host["h1"][-1])
    assert [t["timeout_s"] for t in plan] == [50, 900]  # each test's own limit, enforced by the suite
    assert plan[0]["args"][:1] == ["probe"] and "--out" in plan[0]["args"]
    assert probe.timeout_s == 50 + 900 + 2 * 60


def test_a_lone_test_and_other_launchers_are_left_alone() -> None:
    launches = planned(["torch_gloo_allreduce", "gpu_probe", "nccl_tests_all_reduce"])
    assert fold(launches) == launches
