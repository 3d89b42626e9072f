"""Folding host tests of one world shape into one suite launch per host (src/pav/suites.py)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from pav import catalog
from pav.launch import Launch
from pav.launches import HostView, plan_launches
from pav.run_inputs import Timeouts
from pav.settings import Settings
from pav.suites import fold

FACTS = {"gpu": {"count": 4}, "nccl_tests": {"available": True, "bin_dir": "/opt/nccl-tests"}}


def planned(names: list[str]) -> list[Launch]:
    hosts = [HostView(f"h{i}", f"10.0.0.{i}", FACTS) for i in range(2)]
    timeouts = Timeouts(900, {"gpu_probe": 50})
    launches, _ = plan_launches(catalog.select(names), hosts, Settings(), "r1", timeouts.for_test)
    return launches


def plan_of(launch: Launch, host: str = "h0") -> list[dict[str, Any]]:
    return json.loads(launch.argv_by_host[host][-1])


def test_a_hosts_tests_of_one_world_shape_share_a_suite_and_keep_their_own_limits() -> None:
    names = [
        "torch_gloo_allreduce", "gpu_probe", "torch_nccl_allreduce", "train_gpu_single", "ddp_cpu_train",
        "train_gpu_ddp", "nccl_tests_all_reduce", "torch_nccl_allreduce_multi",
    ]  # fmt: skip
    runs = fold(planned(names))
    # One launch of suites where the first folded test stood; nccl-tests keep a launch each, and a test of
    # another world (every GPU of every host) stays alone.
    assert [r.test for r in runs] == ["pav_suites_1", "nccl_tests_all_reduce", "torch_nccl_allreduce_multi"]
    suites = plan_of(runs[0])
    # One GPU, every GPU (nccl), then CPU (gloo) last: its start-up overlaps GPU tests, not CPU ones.
    assert [[t["test"] for t in s["tests"]] for s in suites] == [
        ["gpu_probe", "train_gpu_single"],
        ["torch_nccl_allreduce", "train_gpu_ddp"],
        ["torch_gloo_allreduce", "ddp_cpu_train"],
    ]
    assert [(s["nproc"], s["cpu_only"]) for s in suites] == [(1, False), (4, False), (2, True)]
    assert runs[0].argv_by_host["h1"][:3] == ["{python}", "-m", "pav_payload.suite_launch"]
    probe = suites[0]["tests"][0]
    assert probe["timeout_s"] == 50  # each test's own limit, enforced by the suite's watchdog
    assert probe["args"][:1] == ["probe"] and probe["args"][-4:] == [
        "--out", "results/gpu_probe", "--test-id", "gpu_probe",
    ]  # fmt: skip
    assert runs[0].timeout_s == 50 + 5 * 900 + 6 * 60 and runs[0].env == {}


def test_a_lone_test_and_other_launchers_are_left_alone() -> None:
    launches = planned(["torch_gloo_allreduce", "nccl_tests_all_reduce", "torch_nccl_allreduce_multi"])
    assert fold(launches) == launches


def test_suites_fold_from_the_launches_fields_not_their_argv() -> None:
    """What a suite runs is each test's Launch.payload_args and ranks, as planned: its argv is never read
    back (a launcher's argv may change form without changing what is folded)."""
    launches = planned(["torch_gloo_allreduce", "ddp_cpu_train"])
    opaque = [
        dataclasses.replace(la, argv_by_host={h: ["opaque"] for h in la.argv_by_host}) for la in launches
    ]
    [suite] = fold(opaque)
    [cpu] = plan_of(suite)
    assert cpu["nproc"] == launches[0].ranks_by_host["h0"] and cpu["cpu_only"] is True
    assert [t["args"] for t in cpu["tests"]] == [la.payload_args for la in launches]
    assert launches[0].payload_args[0] == "collectives" and launches[1].payload_args[0] == "train"
    # Without payload_args (a launch pav.launches did not plan as a payload test alone) nothing is folded.
    bare = [dataclasses.replace(la, payload_args=[]) for la in launches]
    assert fold(bare) == bare
