"""--recheck's decisions (pav.slurm.recheck): which drained nodes are the tool's (reason "pav ... [tests]")
and which tests each failed, from scontrol's own output; which pass again and may return. A node drained by
anyone else is listed, never rechecked, never touched (a recheck run of it, in process: issue 49). The real
slurmctld resuming and keeping nodes is tests/sim/test_slurm.py's."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pav import catalog, pipeline
from pav.ansible_exec import PlaybookOutcome
from pav.context import Options, RunContext
from pav.errors import PavError
from pav.launches import HostView, only_where
from pav.marking import decide, flow
from pav.marking import slurm as slurm_marks
from pav.marking.scheduler import Found, rechecking
from pav.platform import Platform
from pav.results import HostRecord, TestResult
from pav.stages import provision
from tests.conftest import assert_one_line_error, run_cli_here
from tests.docs_quotes import assert_documented
from tests.driver.contexts import context
from tests.driver.test_slurm_drain import local_inventory, no_signal_left

__all__ = ["no_signal_left"]  # its autouse fixture, for this module's pipeline run too

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
    nodes = {n.name: n for n in slurm_marks.parse_nodes(SHOWN)}
    assert nodes["n0"].state == "IDLE+DRAIN"
    assert nodes["n0"].reason.endswith("< 692.6 [gpu_gemm,torch_nccl_allreduce]")
    assert nodes["n1"].reason == "" and nodes["n2"].reason == "bad fan, ticket 42"


def test_only_the_tools_drained_nodes_of_the_inventory_are_rechecked() -> None:
    found = slurm_marks.drained(slurm_marks.parse_nodes(SHOWN), HOSTS)
    assert found.tests == {"gpu-0": ("gpu_gemm", "torch_nccl_allreduce"), "gpu-3": ("ddp_cpu_train",)}
    # Drained by hand, or by the tool but not a host of the inventory: left alone, listed.
    assert [(a.host, a.detail.split(" (")[0], a.tests, a.ok) for a in found.listed] == [
        ("n2", "left alone: drained by someone else", (), None),
        ("n4", "left alone: drained by pav but not a host of the inventory", (), None),
    ]
    assert {a.host: a.reason for a in found.rechecking}["gpu-3"].startswith("pav 20261126-1: ")


def test_a_reason_the_drain_wrote_reads_back_its_tests() -> None:
    gemm = {"name": "gpu_gemm", "hosts": ["b"], "status": "fail", "reason": "wrong bytes", "metrics": {}}
    [planned] = decide.decide({"run_id": "r1", "verdict": "FAIL", "tests": [gemm], "isolation": {}}).marks
    shown = f"NodeName=b State=IDLE+DRAIN Reason={planned.reason} [root@2026-11-26T19:00:01]"
    assert slurm_marks.drained(slurm_marks.parse_nodes(shown), {"b": "b"}).tests == {"b": ("gpu_gemm",)}


def run(*tests: dict[str, Any]) -> dict[str, Any]:
    return {"run_id": "r2", "verdict": "FAIL", "tests": list(tests), "isolation": {}}


def test_passing_every_failed_test_again_returns_the_node() -> None:
    ok = {"name": "ddp_cpu_train", "hosts": ["gpu-3"], "status": "pass", "metrics": {}}
    bad = {"name": "gpu_gemm", "hosts": ["gpu-0"], "status": "fail", "reason": "slow", "metrics": {}}
    assert decide.passed("gpu-3", ("ddp_cpu_train",), run(ok, bad)) == (True, "passed ddp_cpu_train")
    good, why = decide.passed("gpu-0", ("gpu_gemm",), run(ok, bad))
    assert not good and why.startswith("still failing: gpu-0")


def test_a_test_not_run_again_keeps_the_node() -> None:
    skipped = {"name": "gpu_gemm", "hosts": ["gpu-0"], "status": "skipped", "reason": "no GPU", "metrics": {}}
    good, why = decide.passed("gpu-0", ("gpu_gemm", "torch_nccl_allreduce"), run(skipped))
    assert not good
    assert why == "not passed again: gpu_gemm skipped, torch_nccl_allreduce not run"


def test_the_recheck_run_narrows_to_the_drained_hosts_and_their_tests() -> None:
    """The run's hosts, limit and tests become the rechecked ones', resolved as any run's inputs are, with
    direct launches (Slurm would run no job on a drained node)."""
    ctx = context(3, options=Options(recheck=True, launcher="slurm"))
    ctx.results.hosts = {h.name: HostRecord(h.name) for h in ctx.hosts}
    narrow(ctx, {"h1": ("torch_gloo_allreduce",), "h2": ("ddp_cpu_train", "torch_gloo_allreduce")})
    assert ctx.host_names == ["h1", "h2"] and list(ctx.results.hosts) == ["h1", "h2"]
    assert ctx.limit == "h1,h2"  # every playbook skips the other hosts
    assert [t.name for t in ctx.inputs.tests] == ["torch_gloo_allreduce", "ddp_cpu_train"]
    assert ctx.inputs.launcher == "direct"


def test_a_node_drained_for_what_the_facts_showed_is_rechecked_by_reading_them_again() -> None:
    """A drain for gpu_leftovers (a GPU another process held) or gpu_health names no test to launch: the
    recheck configures the host, whose facts read judges both again, and launches only the catalog's tests
    the drains name (issue 50)."""
    ctx = context(2, options=Options(recheck=True, launcher="slurm"))
    ctx.results.hosts = {h.name: HostRecord(h.name) for h in ctx.hosts}
    narrow(ctx, {"h0": ("gpu_leftovers",), "h1": ("gpu_health", "torch_gloo_allreduce")})
    assert ctx.host_names == ["h0", "h1"]
    assert [t.name for t in ctx.inputs.tests] == ["torch_gloo_allreduce"]
    held = {"name": "gpu_leftovers", "hosts": ["h0"], "status": "pass", "metrics": {"gpus_held": 0}}
    assert decide.passed("h0", ("gpu_leftovers",), run(held)) == (True, "passed gpu_leftovers")
    alone = context(1, options=Options(recheck=True))
    alone.results.hosts = {"h0": HostRecord("h0")}
    narrow(alone, {"h0": ("gpu_leftovers",)})
    assert (alone.host_names, alone.inputs.tests) == (["h0"], ())  # configure and the facts' judgement only


def narrow(ctx: RunContext, tests: dict[str, tuple[str, ...]]) -> None:
    """What the recheck's select does with the drained nodes it found: the run's new inputs."""
    found = Found([rechecking(slurm_marks.RECHECK, h, "pav r1: host x", t) for h, t in tests.items()])
    ctx.inputs = flow.narrowed(ctx, slurm_marks.Slurm(), found)


def scontrol_showing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shown: str) -> None:
    """An scontrol on PATH that answers `show node --oneliner` as a controller would."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "scontrol").write_text(f"#!/bin/sh\ncat <<'EOF'\n{shown}\nEOF\n")
    (bindir / "scontrol").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")


def test_with_no_drained_node_of_the_tool_the_run_stops_before_configure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real slurm_drained.yml on a local host (a static inventory: nothing to provision), its controller
    listing one idle node and one an operator drained: the run stops right after that read, exit 2, one
    error naming the mark, the nodes looked at and the fix; configure, validate and the drain/resume steps
    never run, and there is nothing on the host to tear down. It went on to the configure stage and ended
    with verdict NONE and exit 0."""
    name = socket.gethostname().split(".")[0]
    scontrol_showing(tmp_path, monkeypatch, "\n".join([
        f"NodeName={name} Arch=x86_64 State=IDLE ThreadsPerCore=1",
        "NodeName=n2 Arch=x86_64 State=IDLE+DRAIN Reason=bad fan [slurm@2026-11-20T08:00:00]",
    ]))  # fmt: skip
    ctx = context(1, options=Options(results_root=tmp_path / "runs", recheck=True))
    ctx.inventory_file = local_inventory(tmp_path)
    ctx.run_dir = tmp_path / "run"
    ctx.run_dir.mkdir()
    ran: list[str] = []

    def stage(name: str) -> Callable[[RunContext], str]:
        return lambda ctx: ran.append(name) or name

    stages = {n: stage(n) for n in ("provision", "configure", "validate", "collect", "teardown")}
    rc = pipeline.execute(
        ctx, Platform("hosts", stages, {"provision": provision.resolve}, dry_run=lambda c: 0)
    )
    assert rc == 2 and ctx.results.verdict == "ERROR"
    assert ran == ["provision", "teardown"] and ctx.hosts == []
    assert ctx.results.error == (
        '--recheck: no node carries this tool\'s drain (a Slurm reason "pav RUN_ID: ... [TESTS]"); looked at '
        f"2 node(s): {name} IDLE, n2 IDLE+DRAIN (bad fan); nothing was configured or tested: run with "
        "--on-fail drain first (it marks the nodes a FAIL names), then --recheck re-tests them"
    )
    assert_documented(f"error: {ctx.results.error}")
    summary = (ctx.run_dir / "summary.txt").read_text()
    assert "slurm recheck: n2: left alone: drained by someone else (bad fan)" in summary
    assert sorted(p.name for p in (ctx.run_dir / "ansible").iterdir() if p.is_dir()) == ["recheck"]


def test_each_test_launches_only_on_the_hosts_that_failed_it() -> None:
    ctx = context(3, options=Options(recheck=True))
    ctx.results.hosts = {h.name: HostRecord(h.name) for h in ctx.hosts}
    wanted = {"h1": ("torch_gloo_allreduce",), "h2": ("ddp_cpu_train", "torch_gloo_allreduce")}
    narrow(ctx, wanted)
    views = [HostView(h.name, h.address, {}) for h in ctx.hosts]
    plan = only_where(ctx.inputs.rechecked)
    launches, _ = plan(list(ctx.inputs.tests), views, ctx.settings, "r2", ctx.inputs.timeouts.for_test)
    assert {la.test: la.hosts for la in launches} == {
        "torch_gloo_allreduce": ["h1", "h2"],
        "ddp_cpu_train": ["h2"],
    }


def test_a_node_marked_for_its_error_counters_is_rechecked_by_the_tests_that_load_its_links() -> None:
    """error_counters is judged from two facts reads; its recheck launches the catalog's link_traffic tests on
    that node alone (before issue 51 the launches were pinned to the marks' own names, so a node marked for
    error_counters launched nothing)."""
    ctx = context(2, options=Options(recheck=True))
    ctx.results.hosts = {h.name: HostRecord(h.name) for h in ctx.hosts}
    narrow(ctx, {"h0": ("error_counters",), "h1": ("torch_gloo_allreduce",)})
    traffic = catalog.link_traffic()
    assert traffic and dict(ctx.inputs.rechecked) == {"h0": traffic, "h1": ("torch_gloo_allreduce",)}
    assert [t.name for t in ctx.inputs.tests] == [*traffic, "torch_gloo_allreduce"]


def test_a_recheck_that_would_create_its_hosts_is_refused_before_anything(tmp_path: Path) -> None:
    """Hosts a run creates were never marked: --recheck on an env that provisions them stops in one line
    before provision (on either platform), naming the fix; on the hosts a run kept (--reuse), or without
    the provision stage, the kept hosts are looked at after provision as on a static inventory. It created
    the hosts (the sim's namespaces and sshd, a paid cluster) to fail on them."""
    with pytest.raises(PavError) as refused:
        context(1, provisions=True, options=Options(recheck=True))
    assert str(refused.value) == (
        "--recheck: env t would create new hosts, and a new host carries no mark of this tool (nothing to "
        "recheck; nothing was created): recheck the hosts a run kept after --on-fail drain marked them "
        "(--reuse RUN_ID), or your cluster's own inventory (--inventory FILE)"
    )
    with pytest.raises(PavError, match="after --on-fail taint marked them"):
        context(
            1, provisions=True, options=Options(recheck=True), platform="k8s", tests=["torch_nccl_allreduce"]
        )
    context(1, provisions=True, options=Options(recheck=True, reuse="r1"))
    context(1, provisions=True, options=Options(recheck=True, stages=("validate", "collect", "report")))
    got = run_cli_here("--env", "sim", "--recheck", "--results-root", str(tmp_path / "runs"))
    assert_one_line_error(got, "--recheck: env sim would create new hosts", "--reuse RUN_ID", documented=True)
    assert not (tmp_path / "runs").exists()  # no run dir, nothing provisioned


class Controller:
    """slurmctld at the boundary the recheck already has (pav.stages.playbook.play): slurm_drained.yml reads
    each host's node name and `scontrol show node --oneliner`; slurm_drain.yml updates the hosts' nodes. Each
    update is kept, and changes the node's state as scontrol's would."""

    def __init__(self, nodes: dict[str, tuple[str, str]]) -> None:
        self.nodes = nodes  # node (the host's short hostname) -> (state, reason)
        self.updates: list[tuple[str, list[str]]] = []  # (State=, hosts asked)

    def shown(self) -> str:
        said = {
            name: f" Reason={why} [root@2026-11-26T19:00:01]" if why else ""
            for name, (_, why) in self.nodes.items()
        }
        return "\n".join(
            f"NodeName={name} Arch=x86_64 State={state}{said[name]}"
            for name, (state, _) in self.nodes.items()
        )

    def play(
        self, ctx: RunContext, stage: str, playbook: str, extra: dict[str, Any] | None = None,
        hosts: list[str] | None = None,
    ) -> PlaybookOutcome:  # fmt: skip
        targets = hosts or ctx.host_names
        done = PlaybookOutcome(0, "successful", stats={h: {"ok": 1} for h in targets})
        if playbook == "slurm_drained.yml":
            done.facts = {h: {"slurm_nodes_info": {"node": h, "shown": self.shown()}} for h in targets}
        else:
            assert playbook == "slurm_drain.yml" and extra is not None, (playbook, extra)
            self.updates.append((extra["pav_slurm_state"], list(targets)))
            for host in targets:
                if extra["pav_slurm_state"] == "RESUME":
                    self.nodes[host] = ("IDLE", "")
        return done


@pytest.mark.parametrize("passes", (False, True), ids=("still-failing", "passing"))
def test_a_node_drained_by_hand_is_listed_and_never_touched(
    passes: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The recheck tests/sim/test_slurm.py made after an operator drained one of its 2 nodes again ("bad
    fan"), in process: the other node carries the tool's drain. Only that node's host is rechecked, with only
    the test its reason names; the operator's node is listed and left alone: no scontrol update names it,
    whether the rechecked node fails again (kept drained, exit 1) or passes (the one RESUME is its own)."""
    gloo = "torch_gloo_allreduce"
    slurm = Controller({
        "h0": ("IDLE+DRAIN", f"pav 20261126-1: host wrong bytes [{gloo}]"),
        "h1": ("IDLE+DRAIN", "bad fan"),
    })  # fmt: skip
    monkeypatch.setattr(slurm_marks, "play", slurm.play)
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(json.dumps({"all": {"hosts": {"h0": {"ansible_host": "10.0.0.1"},
                                                       "h1": {"ansible_host": "10.0.0.2"}}}}))  # fmt: skip
    ctx = context(2, options=Options(results_root=tmp_path / "runs", recheck=True))
    ctx.inventory_file = inventory
    ctx.run_dir = tmp_path / "run"
    ctx.run_dir.mkdir()
    asked: list[tuple[list[str], list[str]]] = []

    def validate(ctx: RunContext) -> str:
        names = [spec.name for spec in ctx.inputs.tests]
        asked.append((ctx.host_names, names))
        status = "pass" if passes else "fail"
        ctx.results.tests += [TestResult(n, [h], status, "" if passes else "wrong bytes") for n in names
                              for h in ctx.host_names]  # fmt: skip
        return "validated"

    stages = {n: (lambda ctx: "done") for n in ("provision", "configure", "collect", "teardown")}
    rc = pipeline.execute(
        ctx, Platform("hosts", stages | {"validate": validate}, {"provision": provision.resolve},
                      dry_run=lambda c: 0)
    )  # fmt: skip
    assert rc == (0 if passes else 1), ctx.results.error
    assert asked == [(["h0"], [gloo])]  # only the tool's own drained node was rechecked
    acts = [a for a in ctx.results.actions if a.action == "slurm recheck"]
    [left] = [a for a in acts if a.host == "h1"]
    assert left.detail == "left alone: drained by someone else (bad fan)" and not left.tests
    assert left.ok is None
    [mine] = [a for a in acts if a.host == "h0"]
    assert len(acts) == 2
    assert slurm.nodes["h1"] == ("IDLE+DRAIN", "bad fan")
    if passes:
        assert mine.ok is True and mine.detail == f"resumed: passed {gloo}"
        assert slurm.updates == [("RESUME", ["h0"])]
    else:
        assert mine.ok is None and mine.detail.startswith("kept drained: "), mine
        assert slurm.updates == []
    summary = (ctx.run_dir / "summary.txt").read_text()
    assert "slurm recheck: h1: left alone: drained by someone else (bad fan)" in summary.splitlines()
