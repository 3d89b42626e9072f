"""Isolation's pair re-runs are judged as the run judged the test: by the profile's gates and by the gates
the hosts' facts derive. A host whose links are slower than its RDMA ports' rate fails only the derived
inter-node gate (no profile gate sets a number for it), so the pairs must be judged by that gate to name it.
The re-runs themselves are faked here: each pair's raw results are written where collect would put them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pav.launch import Launch
from pav.results import HostRecord, TestResult
from pav.stages import collect, isolate, report, validate
from pav.thresholds.derive import SIZE
from tests.driver.contexts import context
from tests.thresholds.test_derive import NDR, hgx

TEST = "torch_nccl_allreduce_multi"
GPUS = 8
SLOW = "h2"  # every pair with this host measures 60 GB/s where its 8 NDR ports allow 400


def rank(r: int, world: int, host: str, busbw: float) -> dict[str, Any]:
    row = {"op": "all_reduce", "size_bytes": SIZE, "busbw_gbps": busbw, "wrong": 0}
    return {"rank": r, "world_size": world, "hostname": host, "kind": "collectives", "status": "pass",
            "reason": "", "metrics": {"results": [row]}}  # fmt: skip


def fake_round(run_dir: Path, rounds: list[list[str]]):
    """validate.launch_tests for isolation's rounds: every group of the launch runs, a group with the
    slow host at its speed, the others at full speed."""

    def launch_tests(ctx: Any, launches: list[Launch], stage: str = "", extravars: Any = None) -> None:
        [launch] = launches
        assert stage == "isolate" and launch.gates_of == ""
        rounds.append(list(launch.members))
        members = launch.members
        groups = [members[i : i + 2] for i in range(0, len(members), 2)]
        for group in groups:
            busbw = 60.0 if SLOW in group else 380.0
            world = GPUS * len(group)
            for k, host in enumerate(group):
                folder = run_dir / "hosts" / host / "results" / launch.test
                folder.mkdir(parents=True)
                (folder / "launcher.rc").write_text("0\n")
                for local in range(GPUS):
                    r = k * GPUS + local
                    report = rank(r, world, host, busbw)
                    (folder / f"{launch.test}.rank{r}.json").write_text(json.dumps(report))

    return launch_tests


@pytest.fixture
def four_hosts(tmp_path: Path) -> Any:
    ctx = context(hosts=4, threshold_profile="auto", tests=[TEST])
    ctx.run_dir = tmp_path
    ctx.results.hosts = {h.name: HostRecord(h.name, facts=hgx(GPUS, ports=NDR)) for h in ctx.hosts}
    return ctx


def test_a_host_only_a_derived_gate_catches_is_named_by_its_pairs(
    four_hosts: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx = four_hosts
    names = [h.name for h in ctx.hosts]
    failed = TestResult(TEST, names, "fail", "fabric: busbw_gbps.all_reduce.8589934592 60 GB/s, ...")
    ctx.results.tests.append(failed)
    rounds: list[list[str]] = []
    monkeypatch.setattr(validate, "launch_tests", fake_round(tmp_path, rounds))
    monkeypatch.setattr(collect, "run", lambda ctx: "")
    assert isolate.run(ctx) == f"suspect host(s): {SLOW}"
    [suspect] = ctx.results.isolation["suspects"]
    assert suspect["host"] == SLOW
    steps = ctx.results.isolation["steps"]
    slow_steps = [s for s in steps if SLOW in s["hosts"]]
    assert slow_steps and all(s["status"] == "fail" for s in slow_steps)
    # The pair failed on the gate the facts derive: 8 active NDR ports on the slower host of the pair.
    assert all("fabric: busbw_gbps.all_reduce.8589934592 60 GB/s" in s["detail"] for s in slow_steps)
    assert all(s["status"] == "pass" for s in steps if SLOW not in s["hosts"])
    assert len(rounds) == 2  # pairs, then the failing pair's hosts with cleared partners


def test_the_profile_is_resolved_and_read_once_per_run(
    four_hosts: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Isolation and the report share the run's one Judge: resolved (auto) and read once."""
    from pav import judging

    reads: list[str] = []
    real = judging.read_profile
    monkeypatch.setattr(judging, "read_profile", lambda name: reads.append(name) or real(name))
    ctx = four_hosts
    ctx.options.results_root = tmp_path / "no-earlier-runs"
    isolate.run(ctx)
    report.judge(ctx)
    assert reads == ["gpu-correctness"]
    assert ctx.results.threshold_profile == "gpu-correctness"
