"""The run, on any platform: stages in order; whatever happens, collect what exists, write the report,
tear down."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import suppress
from typing import Any

from pav import interrupts
from pav.context import RunContext
from pav.errors import Interrupted, PavError, out_of_space
from pav.marking import flow as marking
from pav.platform import Platform, StageFn, hosts_platform, k8s_platform
from pav.results import exit_of, utc_now
from pav.stages import report, scrub, teardown

# Stages a signal stops; collect, report and teardown still run after it.
RUN_STAGES = ("provision", "configure", "validate")


def platform_for(ctx: RunContext) -> Platform:
    """The platform the run's settings name; k8s's stages load only for a k8s run."""
    if ctx.inputs.platform == "k8s":
        return k8s_platform()
    return hosts_platform()


def execute(ctx: RunContext, platform: Platform) -> int:
    error: PavError | None = None
    try:
        error = guarded(ctx, lambda c: _run_stages(c, platform))
    finally:
        error = wrap_up(ctx, error, _wrap_up_steps(ctx, platform))
        ctx.results.kept = _left_up(ctx)
        report.write(ctx)  # once more, so the files show teardown's outcome too
        report.export_metrics(ctx)  # only with its flags, from the files as final
        if platform.finish is not None:
            platform.finish(ctx)
        scrub.scrub_run(ctx)  # last, on every platform: teardown may still have needed the secrets
    return exit_code(ctx, error)


def _left_up(ctx: RunContext) -> dict[str, Any]:
    """What the run leaves up and how to act on it; a state unreadable here must not cost the report."""
    try:
        return teardown.left_up(ctx)
    except (OSError, PavError):
        return {}


def _run_stages(ctx: RunContext, platform: Platform) -> None:
    for name in RUN_STAGES:
        _stage(ctx, name, platform.stages[name])
        if name in platform.after:
            platform.after[name](ctx)
        if name == "provision":  # whether or not --stages asked for it: the run's hosts are known now
            marking.select(ctx)  # only with --recheck: the tool's marked nodes and their tests


def _wrap_up_steps(ctx: RunContext, platform: Platform) -> list[tuple[str, StageFn]]:
    """Collect and report keep partial results (also after a signal: the tests that finished before it
    keep their results); teardown runs after any failure or interrupt. Isolation's re-runs need a run
    that was let finish."""
    interrupted = interrupts.requested()
    interrupts.wrapping_up()  # from here a signal no longer cancels a playbook: teardown must finish
    report_stage = platform.stages.get("report", report.run)

    def reported(c: RunContext) -> str:
        detail = report_stage(c)
        marking.after_report(c)  # --on-fail or --recheck, once the run's files hold its verdict; never raises
        return detail

    steps: list[tuple[str, StageFn]] = [("report", reported), ("teardown", platform.stages["teardown"])]
    if ctx.launches:
        isolate = [] if interrupted or "isolate" not in platform.stages else ["isolate"]
        steps[:0] = [(name, platform.stages[name]) for name in ("collect", *isolate)]
    return steps


def guarded(ctx: RunContext, body: Callable[[RunContext], None]) -> PavError | None:
    """Run the stages that may stop the run; their error (a bug too, as one line) is the run's error."""
    try:
        body(ctx)
    except PavError as exc:
        ctx.results.error = str(exc)
        return exc
    except Exception as exc:
        if (full := out_of_space(exc, ctx.run_dir)) is not None:  # the user's disk, not a bug
            ctx.results.error = str(full)
            return full
        _save_traceback(ctx)
        error = PavError(f"internal error: {exc!r}; see driver-error.txt in the run dir")
        ctx.results.error = str(error)
        return error
    return None


def wrap_up(ctx: RunContext, error: PavError | None, steps: list[tuple[str, StageFn]]) -> PavError | None:
    """Every step runs whatever the ones before it did; the first error is kept."""
    for name, fn in steps:
        try:
            _stage(ctx, name, fn)
        except PavError as exc:
            error = error or exc
            ctx.results.error = ctx.results.error or str(exc)
        except Exception as exc:  # a bug must not cost the teardown after it
            bug = out_of_space(exc, ctx.run_dir)
            if bug is None:
                bug = PavError(f"internal error in {name}: {exc!r}; see driver-error.txt in the run dir")
                _save_traceback(ctx)
            error = error or bug
            ctx.results.error = ctx.results.error or str(bug)
    return error


def exit_code(ctx: RunContext, error: PavError | None) -> int:
    if error is not None:
        return error.exit_code
    return exit_of(ctx.results.verdict)


def _save_traceback(ctx: RunContext) -> None:
    import traceback

    with suppress(OSError), (ctx.run_dir / "driver-error.txt").open("a") as out:
        out.write(traceback.format_exc() + "\n")


def _stage(ctx: RunContext, name: str, fn: StageFn) -> None:
    # The report always runs: every run, however it ends, leaves results.json and summary.txt.
    if not ctx.wants(name) and name != "report":
        return
    if name in RUN_STAGES:
        interrupts.raise_if_requested()
    record = ctx.results.stage(name)
    record.started, record.ended, record.status = utc_now(), None, "running"
    ctx.results.stage_in_progress = name
    report.write_partial(ctx)  # a driver killed in this stage leaves a record that names it
    try:
        record.detail = fn(ctx)
        record.status = "ok"
    except PavError as exc:
        stop = interrupts.interruption() if name in RUN_STAGES else None
        if stop is not None and not isinstance(exc, Interrupted):
            # The tool the stage ran failed because the signal stopped it (a halted terraform apply).
            record.detail, record.status = f"{stop} ({exc})", "interrupted"
            raise stop from exc
        record.detail = str(exc)
        record.status = "interrupted" if isinstance(exc, Interrupted) else "failed"
        raise
    except Exception as exc:
        record.detail = str(exc)
        raise
    finally:
        if record.status == "running":  # what no handler above took: a bug, or a BaseException
            record.status = "failed"
        record.ended = utc_now()
        ctx.results.stage_in_progress = ""
        report.write_partial(ctx)
