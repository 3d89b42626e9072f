"""Whose an env's hosts are, for a run's life, before any stage touches them.

An env that provisions: one run at a time holds its state (a lock in the state dir, let go by the kernel
however the driver ends); hosts a run kept (--keep) are that run's until their expiry, and another run
refuses them unless asked (--reuse RUN_ID, or a teardown given the kept run's --run-dir); what a gone run
left (its driver died, or its teardown failed) is named and destroyed before the next run provisions, never
used silently. A static inventory: every run registers while it lives; the next run finds the gone ones and
kills their launches on the hosts at its first contact (pav.stages.cleanup).
"""

from __future__ import annotations

import getpass
import os
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pav import locks, rundir
from pav.context import RunContext
from pav.errors import PavError
from pav.locks import Holder
from pav.processes import alive
from pav.provisioning import keeper
from pav.provisioning.keeper import Keep, StateRecord
from pav.results import utc_now

LOCK = "lock"
RUNS = "runs"  # a static env's registry: RUN_ID.lock per live run


@dataclass(frozen=True)
class Asked:
    """What the command line allows a run to do with hosts another run kept or left."""

    reuse: str | None  # --reuse RUN_ID
    acts_on: frozenset[str]  # the kept run whose --run-dir a run of stages that launch nothing was given
    stages: frozenset[str]


@dataclass(frozen=True)
class Assessment:
    kept: Keep | None = None  # the keep this run works under (--reuse, or the kept run's own teardown)
    leftover: str = ""  # what a gone run left: destroyed before this run provisions, or by its teardown
    dead: tuple[Holder, ...] = ()  # gone runs on these hosts whose launches this run kills on them


def holder(ctx: RunContext) -> Holder:
    """Absolute: the record names the run dir to runs started from any folder (a teardown of kept hosts
    writes its link there, pav.run_links)."""
    return Holder(ctx.results.run_id, str(ctx.run_dir.absolute()), os.getpid(), _user_at_host(), utc_now())


@contextmanager
def claimed(ctx: RunContext) -> Iterator[None]:
    if ctx.env.provisions:
        with _state_held(ctx):
            yield
    else:
        with _registered(ctx):
            yield


@contextmanager
def _state_held(ctx: RunContext) -> Iterator[None]:
    state = ctx.env.state_dir
    me = holder(ctx)
    other = locks.take(state / LOCK, me)
    if other is not None:
        raise PavError(busy(ctx.env.name, state, other))
    try:
        before = keeper.read(state)
        wanted = asked(ctx)
        found = assess(state, before, ctx.env.name, wanted, datetime.now(UTC))
        ctx.leftover, ctx.dead_runs = found.leftover, list(found.dead)
        keep = found.kept or before.kept  # an expired keep too: --reuse of it still destroys that run's hosts
        if keep is not None and keep.run_id in {wanted.reuse, *wanted.acts_on}:
            ctx.kept_dir = keep.run_dir
        if found.leftover:
            then = "before this run provisions" if ctx.wants("provision") else "by this run's teardown"
            print(f"env {ctx.env.name}: destroying what {found.leftover}, {then}", flush=True)
        keeper.write(state, StateRecord(running=me, kept=found.kept))
        try:
            yield
        finally:
            settle(ctx, state, me, before, found.kept)
    finally:
        locks.release(state / LOCK)


def preview(ctx: RunContext) -> str:
    """What --dry-run says of the env's state: whether this run could take it, and what it would do first."""
    state = ctx.env.state_dir
    other = locks.read(state / LOCK)
    if other is not None and other.pid != os.getpid() and alive(other.pid):
        return f"this run would stop: {busy(ctx.env.name, state, other)}"
    try:
        found = assess(state, keeper.read(state), ctx.env.name, asked(ctx), datetime.now(UTC))
    except PavError as exc:
        return f"this run would stop: {exc}"
    if found.leftover:
        return f"this run would first destroy what {found.leftover}"
    if found.kept:
        return f"kept by run {found.kept.run_id} until {found.kept.until}: this run may take them"
    return ""


def asked(ctx: RunContext) -> Asked:
    acts_on = set()
    if ctx.results.kept_run:
        kept_dir = Path(ctx.results.kept_run["run_dir"])
        acts_on = {ctx.results.kept_run["run_id"], rundir.reused_by(kept_dir)} - {""}
    return Asked(ctx.options.reuse, frozenset(acts_on), frozenset(ctx.options.stages))


def assess(state: Path, record: StateRecord, env: str, asked: Asked, now: datetime) -> Assessment:
    """What this run may do with the env's state, or the one line that refuses it. The caller holds the
    lock: a run the record names as running is gone."""
    if not keeper.resources(state):  # nothing there: whatever the record says is over
        if asked.reuse:
            raise PavError(f"--reuse {asked.reuse}: env {env} keeps no hosts (its state {state} is empty)")
        return Assessment()
    gone, kept = record.running, record.kept
    dead = (gone,) if gone else ()
    if kept is not None and not kept.expired(now):
        if kept.run_id == asked.reuse or kept.run_id in asked.acts_on:
            return Assessment(kept=kept, dead=dead)
        wrong = f"--reuse {asked.reuse} names another run; " if asked.reuse else ""
        raise PavError(
            f"{wrong}env {env}: its hosts are kept by {kept.describe(now)}: pass --reuse {kept.run_id} "
            f"to run on them, or destroy them with --stages teardown --run-dir {kept.run_dir}"
        )
    who = _who_left(record)
    what = f"{who} left ({keeper.left(state)})"
    owners = {h.run_id for h in dead} | ({kept.run_id} if kept else set())
    if asked.reuse:
        if asked.reuse in owners:
            return Assessment(dead=dead)
        raise PavError(f"--reuse {asked.reuse}: env {env} holds no hosts of that run, but what {what}")
    if asked.stages & {"provision", "teardown"}:
        return Assessment(leftover=what, dead=dead)
    some = f" {next(iter(owners))}" if owners else " RUN_ID"
    raise PavError(
        f"env {env} holds what {what}: a run with the provision stage destroys it first, --stages "
        f"teardown destroys it, --reuse{some} runs on it"
    )


def _who_left(record: StateRecord) -> str:
    if record.running is not None:
        gone = record.running
        how = f"ended {record.ended} without tearing down" if record.ended else "its driver is gone"
        return f"run {gone.run_id} (pid {gone.pid}, {gone.by}, started {gone.since}; {how})"
    if record.kept is not None:
        return f"run {record.kept.run_id} kept until {record.kept.until} (expired; {record.kept.by})"
    return "a run that left no record"


def settle(ctx: RunContext, state: Path, me: Holder, before: StateRecord, kept: Keep | None) -> None:
    """The record as the run leaves the state: gone with it; kept (--keep, or no teardown among --stages);
    as it was, where the run stopped before its teardown could run (its run dir unusable); or this run's,
    ended without tearing down, for the next run to name and destroy."""
    if not keeper.resources(state):
        keeper.clear(state)
    elif ctx.options.keep or not ctx.wants("teardown"):
        hours = keeper.keep_hours(state, ctx.options.max_hours)
        until = (datetime.now(UTC) + timedelta(hours=hours)).isoformat(timespec="seconds")
        until = until.replace("+00:00", "Z")
        mine = Keep(me.run_id, me.run_dir, me.by, utc_now(), until)
        keeper.write(state, StateRecord(kept=replace(kept, until=until) if kept else mine))
    elif not any(s.name == "teardown" for s in ctx.results.stages):
        keeper.write(state, before)
    else:
        keeper.write(state, StateRecord(running=me, ended=utc_now()))


def clear_leftover(ctx: RunContext, destroy: Callable[[], list[str]]) -> str:
    """Destroy what a gone run left in the env's state (pav.ownership named it) before provisioning anew:
    its hosts are never used silently. What the detail says of it, or ""."""
    if not ctx.leftover:
        return ""
    destroyed = destroy()
    said = f"first destroyed {len(destroyed)} resource(s), what {ctx.leftover}; "
    ctx.leftover, ctx.dead_runs = "", []  # their hosts, and any launches on them, are gone
    return said


def busy(env: str, state: Path, other: Holder) -> str:
    return (
        f"env {env}'s state ({state}) is in use by {other.describe()}: wait for it to end; two runs on one "
        "env's hosts at once would disturb each other's tests"
    )


@contextmanager
def _registered(ctx: RunContext) -> Iterator[None]:
    """A static env's live runs, each a lock file of its own; one whose lock is free is a gone run."""
    folder = ctx.env.state_dir / RUNS
    made = _missing_parents(folder)
    mine = folder / f"{ctx.results.run_id}.lock"
    locks.take(mine, holder(ctx))
    others = [p for p in sorted(folder.glob("*.lock")) if p != mine]
    ctx.dead_runs = [h for h in (locks.take_over(p) for p in others) if h is not None]
    try:
        yield
    finally:
        locks.release(mine, remove=True)
        for path in others:
            locks.release(path)
        # The registry's folder, and those above it this run made, where nothing else is left.
        for path in dict.fromkeys([folder, *made]):
            try:
                path.rmdir()
            except OSError:
                break


def registry_entry(ctx: RunContext, run_id: str) -> Path:
    return ctx.env.state_dir / RUNS / f"{run_id}.lock"


def _missing_parents(folder: Path) -> list[Path]:
    """Make folder; the folders that did not exist, deepest first."""
    missing = [p for p in (folder, *folder.parents) if not p.exists()]
    folder.mkdir(parents=True, exist_ok=True)
    return missing


def _user_at_host() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    return f"{user}@{socket.gethostname()}"
