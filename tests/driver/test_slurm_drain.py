"""--on-fail drain: which nodes a FAIL drains and the reason scontrol records (pav.slurm.drain), and the
drain step in the one pipeline: nothing without the flag; a drain that fails is a line of summary.txt and
an entry of results.json `actions`, never the verdict, the exit code or the run's results.

The Slurm cluster itself (a real slurmctld draining the node) is tests/sim/test_slurm.py's; a failure across
its 2 hosts, which drains neither, is a decision alone: the CLI run of it is here, in process (issue 49)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from pav import cli, pipeline
from pav.context import Options, RunContext
from pav.marking import decide, flow
from pav.platform import Platform
from pav.reporting import summary
from pav.results import TestResult
from pav.stages import isolate, provision
from tests.driver.contexts import context
from tests.driver.test_metrics_flags import FAILING, PASSING, no_signal_left, platform, run_with
from tests.summary_lines import unfolded

__all__ = ["no_signal_left"]  # its autouse fixture, for this module's pipeline runs too


def gate(metric: str, value: float, low: float, part: str = "host") -> dict[str, Any]:
    return {"metric": metric, "value": value, "min": low, "basis": "absolute", "status": "fail", "part": part,
            "source": "datasheet"}  # fmt: skip


def failing(name: str, hosts: list[str], gates: list[dict[str, Any]], reason: str = "") -> dict[str, Any]:
    return {"name": name, "hosts": hosts, "status": "fail", "reason": reason, "metrics": {},
            "threshold": {"gates": gates}}  # fmt: skip


def run(tests: list[dict[str, Any]], verdict: str = "FAIL", suspects: tuple[str, ...] = ()) -> dict[str, Any]:
    ok = {"name": "torch_gloo_allreduce", "hosts": ["a", "b", "c"], "status": "pass", "metrics": {}}
    isolation = {"suspects": [{"host": h} for h in suspects]}
    return {"run_id": "20261126-1", "verdict": verdict, "tests": [ok, *tests], "isolation": isolation}


def test_a_slow_gpu_drains_its_host_with_figure_and_gate() -> None:
    gemm = failing("gpu_gemm", ["b"], [gate("gemm_bf16_tflops.3", 277.0, 692.6, "GPU 3")])
    [only] = decide.decide(run([gemm])).marks
    assert only.host == "b" and only.tests == ("gpu_gemm",)
    assert only.reason == "pav 20261126-1: GPU 3 gemm_bf16_tflops.3 277 TFLOP/s < 692.6 [gpu_gemm]"
    assert decide.is_ours(only.reason)


def test_isolation_names_the_host_of_a_test_across_hosts() -> None:
    """A cross-host test that failed drains the host isolation named, never the others it ran on."""
    multi = failing("torch_gloo_collectives_multi", ["a", "b", "c"], [], reason="wrong bytes on c")
    planned = decide.decide(run([multi], suspects=("c",))).marks
    assert [d.host for d in planned] == ["c"]
    assert planned[0].reason.startswith("pav 20261126-1: host ")
    assert planned[0].reason.endswith(" [torch_gloo_collectives_multi]")


NAMING = (
    "a host is named by a test of its own, or by isolation's re-runs on pairs (3 or more hosts, --platform "
    "hosts, --launcher direct, pav_isolate: true; docs/isolation.md)"
)


def test_a_failure_across_two_hosts_that_names_neither_drains_neither() -> None:
    """Two hosts cannot be told apart by pairs: the test that failed across them says nothing of which is
    bad, so neither drains (both did, the healthy one too) and one line says which hosts are spared, why, and
    how a host gets named."""
    multi = failing("torch_gloo_collectives_multi", ["a", "b"], [], reason="rank 1 exited 1")
    results = run([multi]) | {"isolation": {"suspects": [], "note": "torch_gloo_collectives_multi: 2 hosts "
                                            "are too few to tell apart by pairs"}}  # fmt: skip
    assert decide.decide(results).marks == []
    decided = decide.decide(results)
    assert decided.marks == [] and decided.unnamed is not None
    assert decided.unnamed.line("draining") == (
        "not draining a,b: torch_gloo_collectives_multi failed across them, which does not say which host "
        f"is bad (2 hosts are too few to tell apart by pairs); {NAMING}"
    )


def test_a_host_whose_own_test_failed_drains_and_its_partner_does_not() -> None:
    """b's own test names it; a took part only in the failure across both, which isolation (here: none ran,
    under --launcher slurm) named no host of: a is spared, and the line says why in isolation's words."""
    gemm = failing("gpu_gemm", ["b"], [gate("gemm_bf16_tflops.3", 277.0, 692.6, "GPU 3")])
    multi = failing("torch_gloo_collectives_multi", ["a", "b"], [], reason="rank 1 exited 1")
    note = "pair re-runs are not done under --launcher slurm"
    decided = decide.decide(run([gemm, multi]) | {"isolation": {"suspects": [], "note": note}})
    assert [(m.host, m.tests) for m in decided.marks] == [("b", ("gpu_gemm",))]
    assert decided.unnamed is not None and decided.unnamed.hosts == ("a",)
    assert decided.unnamed.line("draining").startswith(
        "not draining a: torch_gloo_collectives_multi failed across them, which does not say which host is "
        f"bad ({note}); "
    )
    # Isolation's suspect among 3 hosts is named: it drains, the others are cleared, no line.
    three = failing("torch_gloo_collectives_multi", ["a", "b", "c"], [], reason="wrong bytes on c")
    assert decide.decide(run([three], suspects=("c",))).unnamed is None


def test_the_drain_step_says_which_hosts_it_spares_in_the_run_and_the_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The drain stage with a 2-host FAIL no host of which was named: no playbook runs, no node drains,
    and one line, printed as the run goes and in summary.txt, names both hosts and why."""
    ctx = context(2, options=Options(on_fail="drain"))
    ctx.run_dir = tmp_path
    ctx.results.verdict = "FAIL"
    multi = TestResult("torch_gloo_collectives_multi", ["h0", "h1"], "fail", "rank 1 exited 1")
    ctx.results.tests = [multi]
    ctx.results.isolation = {"suspects": [], "steps": [], "note": "torch_gloo_collectives_multi: 2 hosts "
                             "are too few to tell apart by pairs"}  # fmt: skip
    flow.after_report(ctx)
    line = (
        "slurm drain: not draining h[0-1]: torch_gloo_collectives_multi failed across them, which does not "
        f"say which host is bad (2 hosts are too few to tell apart by pairs); {NAMING}"
    )
    assert capsys.readouterr().out.splitlines() == [line]
    [action] = ctx.results.actions
    assert (action.action, action.hosts, action.ok) == ("slurm drain", ("h0", "h1"), None)
    assert not (tmp_path / "ansible").exists()  # no drain playbook
    assert line in unfolded(summary.render(ctx.results).splitlines())  # folded at 120 columns


def test_a_failure_across_the_two_slurm_hosts_drains_neither_through_the_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run as tests/sim/test_slurm.py makes (fault_rank_exit_multi, its job FAILED, --launcher slurm
    --on-fail drain on 2 hosts) but whose launcher recorded no rank that failed first (a log cut short: with
    torchrun's record, the host of that rank drains, tests/driver/test_first_failure.py), through the CLI in
    process: only the stages that reach the hosts are stood in for; the real isolate stage (no pair re-runs
    under --launcher slurm), the report and its drain step, and the CLI's own printing run. Neither host
    drains: no drain playbook runs, so scontrol is asked to change no node; one line, printed as the run went
    and in the summary printed at its end, names both hosts and why; the run is a FAIL, exit 1."""
    monkeypatch.setenv("PAV_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("PAV_FAULT_TESTS", "1")  # fault_rank_exit_multi is FOR TESTING
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(json.dumps({"all": {"hosts": {"h0": {"ansible_host": "10.0.0.1"},
                                                       "h1": {"ansible_host": "10.0.0.2"}}}}))  # fmt: skip
    multi = "fault_rank_exit_multi"

    def validate(ctx: RunContext) -> str:
        ctx.launches = [None]  # type: ignore[list-item]  # collect and isolate run after launches
        return "validated"

    def collect(ctx: RunContext) -> str:  # the job's results, as collect and judging leave them
        reason = "slurm job 7 FAILED (exit code 3:0); rank 2: RuntimeError: Connection reset by peer"
        ctx.results.tests.append(TestResult(multi, ["h0", "h1"], "error", reason))
        ctx.launches = []
        return "collected"

    stages = {name: (lambda ctx: "done") for name in ("provision", "configure", "teardown")}
    stages |= {"validate": validate, "collect": collect, "isolate": isolate.run}
    hosts = Platform("hosts", stages, {"provision": provision.resolve}, dry_run=lambda c: 0)
    monkeypatch.setattr(pipeline, "platform_for", lambda ctx: hosts)
    run_dir = tmp_path / "run"
    rc = cli.run(["--inventory", str(inventory), "--launcher", "slurm", "--on-fail", "drain",
                  "--tests", multi, "--run-dir", str(run_dir)])  # fmt: skip
    out = capsys.readouterr().out
    assert rc == 1, out
    results = json.loads((run_dir / "results.json").read_text())
    assert results["verdict"] == "FAIL" and sorted(results["hosts"]) == ["h0", "h1"]
    [spared] = results["actions"]
    assert (spared["action"], spared["ok"]) == ("slurm drain", None), spared
    assert sorted(spared["hosts"]) == sorted(results["hosts"])
    line = f"slurm drain: {spared['detail']}"
    assert line == (
        f"slurm drain: not draining h[0-1]: {multi} failed across them, which does not say which host is bad "
        f"(pair re-runs are not done under --launcher slurm); {NAMING}"
    )
    # As the run went, and in the summary printed (folded at 120 columns there).
    assert out.count(line + "\n") == 1 and unfolded(out.splitlines()).count(line) == 2
    assert line in unfolded((run_dir / "summary.txt").read_text().splitlines())
    assert not (run_dir / "ansible" / "drain").exists()  # no drain playbook: no node drained


def test_a_host_with_two_bad_parts_drains_once_naming_every_failed_test() -> None:
    gemm = failing("gpu_gemm", ["b"], [gate("gemm_bf16_tflops.0", 100.0, 692.6, "GPU 0")])
    nccl = failing("torch_nccl_allreduce", ["b"], [], reason="timeout")
    [only] = decide.decide(run([gemm, nccl])).marks
    assert only.tests == ("gpu_gemm", "torch_nccl_allreduce")
    assert "GPU 0" in only.reason and "+1 more" in only.reason
    assert only.reason.endswith("[gpu_gemm,torch_nccl_allreduce]")


def test_no_drain_unless_the_verdict_is_fail() -> None:
    """An ERROR run (interrupted, broken) names hosts for what happened to the run: nothing drains."""
    nccl = failing("torch_nccl_allreduce", ["b"], [], reason="the run was interrupted")
    assert decide.decide(run([nccl], verdict="ERROR")).marks == []
    assert decide.decide(run([], verdict="PASS")).marks == []


def test_the_reason_is_short_plain_and_keeps_run_id_and_tests() -> None:
    long = failing("torch_nccl_allreduce", ["b"], [], reason="x" * 300 + ' "quoted" … ü')
    [only] = decide.decide(run([long])).marks
    assert len(only.reason) <= decide.REASON_CHARS
    assert only.reason.startswith("pav 20261126-1: ") and only.reason.endswith(" [torch_nccl_allreduce]")
    assert only.reason.isascii() and '"' not in only.reason and "'" not in only.reason


def test_a_figure_above_its_max_reads_as_above() -> None:
    assert decide.bound("<= 0") == " > 0"
    assert decide.bound(">= 692.6 = 0.7 x 989.4") == " < 692.6"
    assert decide.bound(">= 1 and <= 5") == " (gate >= 1 and <= 5)"
    assert not decide.is_ours("hand drained: bad fan")


def test_nothing_without_the_flag(tmp_path: Path) -> None:
    rc, ctx = run_with(tmp_path, FAILING)
    assert rc == 1 and ctx.results.actions == []
    assert not (ctx.run_dir / "ansible" / "drain").exists()


def local_inventory(tmp_path: Path) -> Path:
    path = tmp_path / "hosts.yml"
    path.write_text(json.dumps({"all": {"hosts": {"h0": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}}))  # fmt: skip
    return path


def test_a_drain_that_fails_is_a_summary_line_not_the_verdict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The real playbook on a local host that is no Slurm node (no slurmctld answers scontrol): the run
    keeps its FAIL and exit code 1, results.json and summary.txt name the failed drain and its fix; the
    drain's progress says the host once (issue 48: its failure, then the same as its end line)."""
    ctx = context(1, options=Options(results_root=tmp_path / "runs", on_fail="drain"))
    ctx.inventory_file = local_inventory(tmp_path)
    ctx.run_dir = tmp_path / "run"
    ctx.run_dir.mkdir()
    rc = pipeline.execute(ctx, platform(FAILING))
    assert rc == 1 and ctx.results.verdict == "FAIL"
    results = json.loads((ctx.run_dir / "results.json").read_text())
    [action] = results["actions"]
    assert action["action"] == "slurm drain" and action["host"] == "h0" and action["ok"] is False
    assert action["reason"].startswith(f"pav {ctx.results.run_id}: host ")
    # Slurm's own client ran and its failure is named (before scontrol update: the node list is read first).
    detail = action["detail"]
    assert detail.startswith("List the nodes the controller knows: ") and "fix: " in detail
    assert results["tests"][0]["status"] == "fail"  # the run's results stay
    summary = (ctx.run_dir / "summary.txt").read_text()
    assert "slurm drain FAILED: h0: " in summary and summary.rstrip().endswith("VERDICT: FAIL")
    [said] = [line for line in capsys.readouterr().out.splitlines() if line.startswith("[drain] ")]
    assert said == "[drain] h0: failed      ok=1 changed=0 failed=1  List the nodes the controller knows"


def test_a_passing_run_drains_nothing_even_with_the_flag(tmp_path: Path) -> None:
    rc, ctx = run_with(tmp_path, PASSING, on_fail="drain")
    assert rc == 0 and ctx.results.actions == []


def test_no_inventory_is_a_failed_drain_not_an_error(tmp_path: Path) -> None:
    ctx = context(1)
    ctx.options.on_fail = "drain"
    ctx.run_dir = tmp_path
    ctx.results.verdict = "FAIL"
    ctx.results.tests = [TestResult("torch_gloo_allreduce", ["h0"], "fail", "wrong bytes")]
    flow.after_report(ctx)
    [action] = ctx.results.actions
    assert action.ok is False and "no inventory" in action.detail


def test_a_bug_in_a_marking_step_is_an_action_and_a_log_never_an_exception(tmp_path: Path) -> None:
    """Slurm's drain and recheck and Kubernetes' taint all run after the report through flow.guard: a bug
    there must not cost the teardown after it, and the run says what it left unchanged."""
    ctx = context(1)
    ctx.run_dir = tmp_path

    def broken() -> None:
        raise KeyError("gone")

    flow.guard(ctx, "slurm drain", broken, "no node was drained by it")
    assert [a.to_dict() for a in ctx.results.actions] == [
        {"action": "slurm drain", "host": "", "reason": "", "tests": [], "ok": False,
         "detail": "internal error: KeyError('gone'); see driver-error.txt (no node was drained by it)"}
    ]  # fmt: skip
    assert "KeyError: 'gone'" in (tmp_path / "driver-error.txt").read_text()
    flow.guard(ctx, "slurm drain", lambda: None, "-")
    assert len(ctx.results.actions) == 1
