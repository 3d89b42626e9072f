"""--recheck's decisions (pav.slurm.recheck): which drained nodes are the tool's (reason "pav ... [tests]")
and which tests each failed, from scontrol's own output; which pass again and may return. A node drained by
anyone else is listed, never rechecked. The real slurmctld resuming and keeping nodes is
tests/sim/test_slurm.py's."""

from __future__ import annotations

from typing import Any

from pav.context import Options
from pav.launches import HostView
from pav.results import HostRecord
from pav.slurm import drain, recheck
from pav.stages import recheck as recheck_stage
from tests.driver.contexts import context

# As slurmctld 22.05 prints them (scontrol show node --oneliner), fields cut short to the ones read.
SHOWN = "\n".join(
    [
        "NodeName=n0 Arch=x86_64 CoresPerSocket=1 State=IDLE+DRAIN ThreadsPerCore=1 "
        "Reason=pav 20261126-1: GPU 3 gemm_bf16_tflops.3 277 TFLOP/s < 692.6 [gpu_gemm,torch_nccl_allreduce] "
        "[root@2026-11-26T19:00:01]",
        "NodeName=n1 Arch=x86_64 CoresPerSocket=1 State=IDLE ThreadsPerCore=1",
        "NodeName=n2 Arch=x86_64 State=DRAIN Reason=bad fan, ticket 42 [slurm@2026-11-20T08:00:00]",
        "NodeName=n3 Arch=x86_64 State=DOWN+DRAIN Reason=pav 20261126-1: host timeout [ddp_cpu_train] "
        "[root@2026-11-26T19:00:01]",
        "NodeName=n4 State=IDLE+DRAIN Reason=pav 20261126-1: host x [torch_gloo_allreduce] "
        "[root@2026-11-26T19:00:01]",
    ]
)
HOSTS = {"n0": "gpu-0", "n1": "gpu-1", "n2": "gpu-2", "n3": "gpu-3"}  # n4 is no host of the inventory


def test_parse_reads_name_state_and_the_whole_reason() -> None:
    nodes = {n.name: n for n in recheck.parse_nodes(SHOWN)}
    assert nodes["n0"].state == "IDLE+DRAIN"
    assert nodes["n0"].reason.endswith("< 692.6 [gpu_gemm,torch_nccl_allreduce]")
    assert nodes["n1"].reason == "" and nodes["n2"].reason == "bad fan, ticket 42"


def test_only_the_tools_drained_nodes_of_the_inventory_are_rechecked() -> None:
    found = recheck.plan(recheck.parse_nodes(SHOWN), HOSTS)
    assert found.tests == {"gpu-0": ("gpu_gemm", "torch_nccl_allreduce"), "gpu-3": ("ddp_cpu_train",)}
    assert [n.name for n in found.others] == ["n2"]  # drained by hand: left alone, listed
    assert [n.name for n in found.outside] == ["n4"]
    assert found.reasons["gpu-3"].startswith("pav 20261126-1: ")


def test_a_reason_the_drain_wrote_reads_back_its_tests() -> None:
    gemm = {"name": "gpu_gemm", "hosts": ["b"], "status": "fail", "reason": "wrong bytes", "metrics": {}}
    [planned] = drain.plan({"run_id": "r1", "verdict": "FAIL", "tests": [gemm], "isolation": {}})
    shown = f"NodeName=b State=IDLE+DRAIN Reason={planned.reason} [root@2026-11-26T19:00:01]"
    assert recheck.plan(recheck.parse_nodes(shown), {"b": "b"}).tests == {"b": ("gpu_gemm",)}


def run(*tests: dict[str, Any]) -> dict[str, Any]:
    return {"run_id": "r2", "verdict": "FAIL", "tests": list(tests), "isolation": {}}


def test_passing_every_failed_test_again_returns_the_node() -> None:
    ok = {"name": "ddp_cpu_train", "hosts": ["gpu-3"], "status": "pass", "metrics": {}}
    bad = {"name": "gpu_gemm", "hosts": ["gpu-0"], "status": "fail", "reason": "slow", "metrics": {}}
    assert recheck.passed("gpu-3", ("ddp_cpu_train",), run(ok, bad)) == (True, "passed ddp_cpu_train")
    good, why = recheck.passed("gpu-0", ("gpu_gemm",), run(ok, bad))
    assert not good and why.startswith("still failing: gpu-0")


def test_a_test_not_run_again_keeps_the_node() -> None:
    skipped = {"name": "gpu_gemm", "hosts": ["gpu-0"], "status": "skipped", "reason": "no GPU", "metrics": {}}
    good, why = recheck.passed("gpu-0", ("gpu_gemm", "torch_nccl_allreduce"), run(skipped))
    assert not good
    assert why == "not passed again: gpu_gemm skipped, torch_nccl_allreduce not run"


def test_the_recheck_run_narrows_to_the_drained_hosts_and_their_tests() -> None:
    """The run's hosts, limit and tests become the rechecked ones', resolved as any run's inputs are, with
    direct launches (Slurm would run no job on a drained node)."""
    ctx = context(3, options=Options(recheck=True, launcher="slurm"))
    ctx.results.hosts = {h.name: HostRecord(h.name) for h in ctx.hosts}
    recheck_stage._narrow(
        ctx, {"h1": ("torch_gloo_allreduce",), "h2": ("ddp_cpu_train", "torch_gloo_allreduce")}
    )
    assert ctx.host_names == ["h1", "h2"] and list(ctx.results.hosts) == ["h1", "h2"]
    assert ctx.limit == "h1,h2"  # every playbook skips the other hosts
    assert [t.name for t in ctx.inputs.tests] == ["torch_gloo_allreduce", "ddp_cpu_train"]
    assert ctx.inputs.launcher == "direct"


def test_with_no_drained_node_of_the_tool_nothing_runs() -> None:
    ctx = context(2, options=Options(recheck=True))
    recheck_stage._narrow(ctx, {})
    assert ctx.hosts == [] and not ctx.wants("validate") and ctx.wants("report")


def test_each_test_launches_only_on_the_hosts_that_failed_it() -> None:
    ctx = context(3, options=Options(recheck=True))
    ctx.results.hosts = {h.name: HostRecord(h.name) for h in ctx.hosts}
    wanted = {"h1": ("torch_gloo_allreduce",), "h2": ("ddp_cpu_train", "torch_gloo_allreduce")}
    for host, tests in wanted.items():
        ctx.results.actions.append(recheck_stage._entry(host, tests, "pav r1: host x"))
    recheck_stage._narrow(ctx, wanted)
    views = [HostView(h.name, h.address, {}) for h in ctx.hosts]
    plan = recheck_stage.planner(ctx)
    launches, _ = plan(list(ctx.inputs.tests), views, ctx.settings, "r2", ctx.inputs.timeouts.for_test)
    assert {la.test: la.hosts for la in launches} == {
        "torch_gloo_allreduce": ["h1", "h2"],
        "ddp_cpu_train": ["h2"],
    }
