"""The one pipeline (pav.pipeline.execute), in process: a Platform whose stage functions are small real
functions that record what they saw. Stage order, the wrap-up that always runs (after a failure, a bug, a
signal), results.json rewritten after every stage, and the exit code. The report stage is the real one."""

from __future__ import annotations

import json
import signal
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from pav import pipeline
from pav.context import STAGES, Options, RunContext
from pav.errors import PavError
from pav.launches import Launch
from pav.platform import Platform, StageFn
from pav.results import TestResult
from tests.driver.contexts import context
from tests.driver.signals import forget, pav_handlers

PASSING = TestResult("torch_gloo_allreduce", ["h0"], "pass")


def add_launch(ctx: RunContext) -> None:
    """What validate leaves for the wrap-up: one launch on h0 (nothing of it is collected here)."""
    ctx.launches.append(Launch("torch_gloo_allreduce", "torchrun", "host", 60, argv_by_host={"h0": ["x"]}))


@pytest.fixture(autouse=True)
def no_signal_left() -> Iterator[None]:
    """execute marks the process as wrapping up; the next test starts a run afresh."""
    yield
    forget()


class Recorder:
    """The platform's stages: each records its name and the stage statuses results.json held as it began."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.calls: list[str] = []
        self.seen: dict[str, dict[str, str]] = {}
        self.in_progress: dict[str, str] = {}  # results.json's stage_in_progress as each stage began
        self.doing: dict[str, Callable[[RunContext], None]] = {}

    def stage(self, name: str) -> StageFn:
        def fn(ctx: RunContext) -> str:
            self.calls.append(name)
            self.seen[name] = on_disk(self.run_dir)
            self.in_progress[name] = json.loads((self.run_dir / "results.json").read_text())[
                "stage_in_progress"
            ]
            if name in self.doing:
                self.doing[name](ctx)
            return f"{name} done"

        return fn

    def platform(self, isolate: bool = True) -> Platform:
        names = ["provision", "configure", "validate", "collect", "teardown"]
        names += ["isolate"] if isolate else []
        return Platform(
            "test",
            {name: self.stage(name) for name in names},
            after={"provision": lambda ctx: self.calls.append("after provision")},
            finish=lambda ctx: self.calls.append("finish"),
            dry_run=lambda ctx: 0,
        )


def on_disk(run_dir: Path) -> dict[str, str]:
    path = run_dir / "results.json"
    if not path.is_file():
        return {}
    return {s["name"]: s["status"] for s in json.loads(path.read_text())["stages"]}


def stages(ctx: RunContext) -> dict[str, str]:
    return {s.name: s.status for s in ctx.results.stages}


@pytest.fixture
def ctx(tmp_path: Path) -> RunContext:
    made = context(1, options=Options(results_root=tmp_path / "runs"))
    made.run_dir = tmp_path
    return made


def test_stages_run_in_order_then_report_and_teardown(ctx: RunContext, tmp_path: Path) -> None:
    rec = Recorder(tmp_path)
    rec.doing["validate"] = lambda c: c.results.tests.append(PASSING)
    assert pipeline.execute(ctx, rec.platform()) == 0
    assert rec.calls == ["provision", "after provision", "configure", "validate", "teardown", "finish"]
    assert list(stages(ctx)) == ["provision", "configure", "validate", "report", "teardown"]
    assert set(stages(ctx).values()) == {"ok"}
    assert ctx.results.verdict == "PASS" and not ctx.results.error
    for name in ("results.json", "summary.txt", "junit.xml", "report.html"):
        assert (tmp_path / name).is_file(), name


def test_results_json_is_rewritten_after_every_stage(ctx: RunContext, tmp_path: Path) -> None:
    rec = Recorder(tmp_path)
    pipeline.execute(ctx, rec.platform())
    # Issue 64: each stage is on disk as it starts (a driver killed in it leaves a record naming it).
    assert rec.seen["provision"] == {"provision": "running"}
    assert rec.seen["configure"] == {"provision": "ok", "configure": "running"}
    assert rec.seen["validate"] == {"provision": "ok", "configure": "ok", "validate": "running"}
    assert rec.seen["teardown"] == {
        "provision": "ok", "configure": "ok", "validate": "ok", "report": "ok", "teardown": "running",
    }  # fmt: skip
    assert [rec.in_progress[name] for name in ("provision", "validate", "teardown")] == [
        "provision", "validate", "teardown",
    ]  # fmt: skip
    # Written once more after teardown: the files show its outcome too, and no stage in progress.
    assert on_disk(tmp_path)["teardown"] == "ok"
    assert json.loads((tmp_path / "results.json").read_text())["stage_in_progress"] == ""
    assert "teardown" in (tmp_path / "summary.txt").read_text()


def test_a_stage_that_raises_past_every_handler_is_recorded_failed(ctx: RunContext, tmp_path: Path) -> None:
    """What no handler takes (a BaseException) leaves the stage failed, never `running`, in the record."""
    rec = Recorder(tmp_path)

    def stop(c: RunContext) -> None:
        raise SystemExit(3)

    rec.doing["configure"] = stop
    with pytest.raises(SystemExit):
        pipeline._stage(ctx, "configure", rec.stage("configure"))
    assert on_disk(tmp_path) == {"configure": "failed"}
    assert json.loads((tmp_path / "results.json").read_text())["stage_in_progress"] == ""


def test_a_run_that_ran_nothing_is_nothing_run_exit_2(ctx: RunContext, tmp_path: Path) -> None:
    """Issue 48: nothing measured is neither a pass nor a FAIL with no bad part to name."""
    assert pipeline.execute(ctx, Recorder(tmp_path).platform()) == 2
    assert ctx.results.verdict == "NOTHING RUN"


def test_launches_bring_collect_and_isolate_before_the_report(ctx: RunContext, tmp_path: Path) -> None:
    rec = Recorder(tmp_path)
    rec.doing["validate"] = add_launch
    assert pipeline.execute(ctx, rec.platform()) == 1
    assert rec.calls[-4:] == ["collect", "isolate", "teardown", "finish"]
    assert list(stages(ctx))[-4:] == ["collect", "isolate", "report", "teardown"]
    # The report judged the launch: collect brought nothing back for it.
    [test] = ctx.results.tests
    assert test.status == "error" and "no result came back from h0" in test.reason


def test_a_platform_without_isolate_skips_it(ctx: RunContext, tmp_path: Path) -> None:
    rec = Recorder(tmp_path)
    rec.doing["validate"] = add_launch
    pipeline.execute(ctx, rec.platform(isolate=False))
    assert "isolate" not in rec.calls and "isolate" not in stages(ctx)


def test_a_stage_error_stops_the_run_and_teardown_still_runs(ctx: RunContext, tmp_path: Path) -> None:
    rec = Recorder(tmp_path)

    def fail(c: RunContext) -> None:
        raise PavError("configure failed on h0: apt is locked")

    rec.doing["configure"] = fail
    assert pipeline.execute(ctx, rec.platform()) == 2
    assert rec.calls == ["provision", "after provision", "configure", "teardown", "finish"]
    assert stages(ctx) == {"provision": "ok", "configure": "failed", "report": "ok", "teardown": "ok"}
    assert ctx.results.error == "configure failed on h0: apt is locked"
    assert ctx.results.verdict == "ERROR"
    assert on_disk(tmp_path)["configure"] == "failed"


def test_a_bug_in_a_stage_is_one_line_and_a_traceback_file(ctx: RunContext, tmp_path: Path) -> None:
    rec = Recorder(tmp_path)
    rec.doing["validate"] = lambda c: {}["no such key"]
    assert pipeline.execute(ctx, rec.platform()) == 2
    assert rec.calls[-2:] == ["teardown", "finish"]
    assert ctx.results.error.startswith("internal error: KeyError('no such key'); see driver-error.txt")
    assert "KeyError: 'no such key'" in (tmp_path / "driver-error.txt").read_text()
    assert stages(ctx)["validate"] == "failed"


def test_a_bug_in_a_wrap_up_step_does_not_cost_the_teardown(ctx: RunContext, tmp_path: Path) -> None:
    rec = Recorder(tmp_path)
    rec.doing["validate"] = add_launch
    rec.doing["collect"] = lambda c: [][1]
    assert pipeline.execute(ctx, rec.platform()) == 2
    assert rec.calls[-3:] == ["isolate", "teardown", "finish"]
    assert ctx.results.error.startswith("internal error in collect: IndexError(")
    assert stages(ctx)["teardown"] == "ok"


def test_a_failed_teardown_is_the_runs_error(ctx: RunContext, tmp_path: Path) -> None:
    rec = Recorder(tmp_path)
    rec.doing["validate"] = lambda c: c.results.tests.append(PASSING)

    def fail(c: RunContext) -> None:
        raise PavError("destroy failed: the API said 503; run --stages teardown again")

    rec.doing["teardown"] = fail
    assert pipeline.execute(ctx, rec.platform()) == 2
    assert ctx.results.error.startswith("destroy failed")
    # The report ran before teardown; the last write shows teardown's failure anyway.
    assert on_disk(tmp_path)["teardown"] == "failed"
    assert "destroy failed" in (tmp_path / "summary.txt").read_text()


def test_stages_not_asked_for_are_skipped_but_the_after_hook_runs(tmp_path: Path) -> None:
    ctx = context(1, options=Options(stages=("configure", "validate"), results_root=tmp_path / "runs"))
    ctx.run_dir = tmp_path
    rec = Recorder(tmp_path)
    assert pipeline.execute(ctx, rec.platform()) == 2  # no test ran: NOTHING RUN
    assert rec.calls == ["after provision", "configure", "validate", "finish"]
    assert list(stages(ctx)) == ["configure", "validate", "report"]


def test_a_signal_stops_the_run_stages_and_wrap_up_still_runs(ctx: RunContext, tmp_path: Path) -> None:
    rec = Recorder(tmp_path)

    def interrupted_configure(c: RunContext) -> None:
        add_launch(c)
        signal.raise_signal(signal.SIGINT)

    rec.doing["configure"] = interrupted_configure
    with pav_handlers():
        code = pipeline.execute(ctx, rec.platform())
    assert code == 128 + signal.SIGINT
    # validate never starts; collect keeps what finished; isolation needs a run that was let finish.
    assert rec.calls == ["provision", "after provision", "configure", "collect", "teardown", "finish"]
    assert list(stages(ctx)) == ["provision", "configure", "collect", "report", "teardown"]
    assert set(stages(ctx).values()) == {"ok"}
    assert ctx.results.error == "interrupted by SIGINT"
    [test] = ctx.results.tests
    assert test.status == "interrupted" and "the run was interrupted by SIGINT" in test.reason


def test_a_tool_the_signal_stopped_makes_its_stage_interrupted(ctx: RunContext, tmp_path: Path) -> None:
    """A halted terraform apply fails the provision stage: the stage says the signal stopped it."""
    rec = Recorder(tmp_path)

    def apply_halted(c: RunContext) -> None:
        signal.raise_signal(signal.SIGTERM)
        raise PavError("terraform apply failed (exit 1)")

    rec.doing["provision"] = apply_halted
    with pav_handlers():
        code = pipeline.execute(ctx, rec.platform())
    assert code == 128 + signal.SIGTERM
    record = next(s for s in ctx.results.stages if s.name == "provision")
    assert record.status == "interrupted"
    assert record.detail == "interrupted by SIGTERM (terraform apply failed (exit 1))"
    assert rec.calls[-2:] == ["teardown", "finish"]


def test_a_second_ctrl_c_during_teardown_does_not_cancel_it(ctx: RunContext, tmp_path: Path) -> None:
    from pav import interrupts

    rec = Recorder(tmp_path)
    cancelled: list[bool] = []

    def teardown(c: RunContext) -> None:
        signal.raise_signal(signal.SIGINT)
        cancelled.append(interrupts.CANCEL.is_set())

    rec.doing["configure"] = lambda c: signal.raise_signal(signal.SIGINT)
    rec.doing["teardown"] = teardown
    with pav_handlers():
        pipeline.execute(ctx, rec.platform())
    assert cancelled == [False] and stages(ctx)["teardown"] == "ok"


def test_the_run_dir_is_scrubbed_last(
    ctx: RunContext, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "tok-0123456789abcdef"
    monkeypatch.setenv("PAV_TEST_API_TOKEN", secret)
    rec = Recorder(tmp_path)
    seen_by_finish: list[str] = []
    rec.doing["provision"] = lambda c: (tmp_path / "tool.log").write_text(f"token={secret}\n")
    platform = replace(
        rec.platform(), finish=lambda c: seen_by_finish.append((tmp_path / "tool.log").read_text())
    )
    pipeline.execute(ctx, platform)
    assert seen_by_finish == [f"token={secret}\n"]  # teardown and finish may still need it
    assert secret not in (tmp_path / "tool.log").read_text()
    assert "<redacted>" in (tmp_path / "tool.log").read_text()


def test_every_stage_name_the_pipeline_runs_is_a_known_stage() -> None:
    assert set(pipeline.RUN_STAGES) <= set(STAGES)
    assert pipeline.exit_code(context(), PavError("x")) == 2


def test_nothing_run_says_why_each_test_was_skipped() -> None:
    """`--tests sdc_check --burn-in 1m` on a machine without a GPU: the summary names each skip, where it
    ended FAIL with no bad part, no reason and an empty error (issue 48)."""
    from pav.reporting import summary
    from pav.results import RunResults, TestResult, verdict_of

    tests = [TestResult(name, ["box"], "skipped", "no GPU") for name in ("sdc_check", "gpu_burn")]
    results = RunResults("r1", "local", "hosts.yml", "/tmp/r1", tests=tests, verdict=verdict_of(tests))
    text = summary.render(results)
    assert "nothing was run: every planned test was skipped: no GPU (sdc_check, gpu_burn on box)" in text
    assert text.rstrip().endswith("VERDICT: NOTHING RUN")


def test_a_stage_that_finds_the_disk_full_is_the_runs_error_not_a_bug(
    ctx: RunContext, tmp_path: Path
) -> None:
    """Issue 64: ENOSPC in a stage was `internal error: OSError(28, ...)`, with a traceback file: the user's
    disk read as the tool's bug. The file's folder is named where the error names one."""
    import errno

    rec = Recorder(tmp_path)

    def full(c: RunContext) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "hosts" / "h0" / "x.json"))

    rec.doing["validate"] = full
    assert pipeline.execute(ctx, rec.platform()) == 2
    assert ctx.results.error == (
        f"run dir {tmp_path}: its disk is full (No space left on device); free space or pass --run-dir "
        "elsewhere; what the run wrote before stays in it"
    )
    assert stages(ctx)["teardown"] == "ok" and not (tmp_path / "driver-error.txt").exists()
