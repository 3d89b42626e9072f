"""Whose an env's hosts are (pav.ownership): a run refuses hosts another run kept or left unless asked, two
runs never hold one env's state at once, a driver's processes die with it (pav.reaper), and what a gone run
left on static hosts ends at the next run's first contact. The runs on sim hosts: tests/faults/."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from pav import locks, rundir
from pav.locks import Holder
from pav.processes import alive
from pav.provisioning import keeper
from pav.provisioning.keeper import Keep, StateRecord
from tests.conftest import assert_one_line_error, run_cli, run_cli_here

KEPT = "20260101T000000.000Z-sim"
# Terraform's state of one sim host, as the sim root leaves it (what pav.provisioning.keeper reads).
TFSTATE = {
    "version": 4,
    "resources": [
        {"mode": "managed", "type": "terraform_data", "name": "network", "instances": [{"attributes": {}}]},
        {"mode": "managed", "type": "terraform_data", "name": "host", "instances": [{"index_key": 0}]},
    ],
    "outputs": {"hosts": {"value": {"sim-abcde-0": {"name": "sim-abcde-0"}}}},
}


def held_state(state: Path, record: StateRecord) -> bytes:
    """An env's state holding one host, with the record given; the state's bytes."""
    state.mkdir(parents=True)
    (state / "terraform.tfstate").write_text(json.dumps(TFSTATE))
    keeper.write(state, record)
    return (state / "terraform.tfstate").read_bytes()


def until(hours: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + hours * 3600))


def poll(what: str, check: Callable[[], bool], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.1)


def test_a_run_refuses_hosts_another_run_kept(tmp_path: Path) -> None:
    state, kept_dir = tmp_path / "state", tmp_path / "kept"
    keep = Keep(KEPT, str(kept_dir), "me@box", "2026-01-01T00:00:00Z", until(11.5))
    before = held_state(state, StateRecord(kept=keep))
    env = {"PAV_STATE_DIR": str(state)}
    run = run_cli_here("--env", "sim", "--hosts", "1", "--run-dir", str(tmp_path / "run"), env=env)
    assert_one_line_error(
        run,
        f"env sim: its hosts are kept by run {KEPT} (me@box, kept ",
        f" ago, until {keep.until}; its run dir {kept_dir}): pass --reuse {KEPT} to run on them, or destroy "
        f"them with --stages teardown --run-dir {kept_dir}",
        documented=True,
    )
    # Nothing was touched: no run dir, the state and its record as they were.
    assert not (tmp_path / "run").exists()
    assert (state / "terraform.tfstate").read_bytes() == before
    assert keeper.read(state).kept == keep
    # A teardown given another run's dir, and --reuse of another run, are refused the same way.
    (tmp_path / "other").mkdir()  # another run's dir (a run dir that does not exist is refused first)
    record = {"run_id": "20251231T000000.000Z-sim", "env": "sim", "inventory": "terraform/envs/sim"}
    (tmp_path / "other" / "results.json").write_text(json.dumps(record))
    other = run_cli_here(
        "--env", "sim", "--stages", "teardown", "--run-dir", str(tmp_path / "other"), env=env
    )
    assert_one_line_error(other, f"its hosts are kept by run {KEPT}")
    other_run = "20250101T000000.000Z-sim"
    wrong = run_cli_here("--env", "sim", "--reuse", other_run, "--run-dir", str(tmp_path / "w"), env=env)
    assert_one_line_error(wrong, f"--reuse {other_run} names another run; env sim: its hosts are kept")
    assert keeper.read(state).kept == keep
    # The dry run says so before a run is tried.
    plan = run_cli_here("--env", "sim", "--dry-run", env=env)
    stop = f"  this run would stop: env sim: its hosts are kept by run {KEPT} ("
    assert plan.rc == 0 and stop in plan.stdout, plan.stdout
    plan = run_cli_here("--env", "sim", "--reuse", KEPT, "--dry-run", env=env)
    assert f"  kept by run {KEPT} until {keep.until}: this run may take them" in plan.stdout, plan.stdout
    assert "  1 host(s) in the env's state" in plan.stdout


def test_a_reuse_that_stops_before_its_stages_leaves_the_keep_as_it_was(tmp_path: Path) -> None:
    state, blocked = tmp_path / "state", tmp_path / "a-file"
    keep = Keep(KEPT, str(tmp_path / "kept"), "me@box", "2026-01-01T00:00:00Z", until(11.5))
    held_state(state, StateRecord(kept=keep))
    blocked.write_text("")  # the run dir's parent is a file: the run stops before any stage
    run = run_cli_here("--env", "sim", "--reuse", KEPT, "--run-dir", str(blocked / "run"),
                       env={"PAV_STATE_DIR": str(state)})  # fmt: skip
    assert_one_line_error(run, f"run dir {blocked / 'run'} is not writable")
    assert keeper.read(state) == StateRecord(kept=keep)


def test_what_a_gone_run_left_is_named_and_never_used_silently(tmp_path: Path) -> None:
    state = tmp_path / "state"
    gone = Holder(KEPT, str(tmp_path / "gone"), 4242, "me@box", "2026-01-01T00:00:00Z")
    held_state(state, StateRecord(running=gone))
    env = {"PAV_STATE_DIR": str(state)}
    # A run that would use the hosts without making them (configure) is refused, naming the gone run.
    run = run_cli_here("--env", "sim", "--stages", "configure", "--run-dir", str(tmp_path / "run"), env=env)
    assert_one_line_error(
        run,
        f"env sim holds what run {gone.run_id} (pid 4242, me@box, started {gone.since}; its driver is gone) "
        "left (2 resource(s): hosts sim-abcde-0): a run with the provision stage destroys it first, --stages "
        f"teardown destroys it, --reuse {gone.run_id} runs on it",
        documented=True,
    )
    # A keep past its expiry is the same: the next run may clear it.
    keeper.write(state, StateRecord(kept=Keep(KEPT, "/x", "me@box", "2026-01-01T00:00:00Z", until(-1))))
    late = run_cli_here("--env", "sim", "--stages", "configure", "--run-dir", str(tmp_path / "late"), env=env)
    assert_one_line_error(late, f"env sim holds what run {KEPT} kept until ", "(expired; me@box) left")


def test_reuse_is_for_envs_that_make_their_hosts() -> None:
    run = run_cli_here("--reuse", KEPT, "--dry-run")
    assert_one_line_error(run, "--reuse applies to envs that create their hosts (sim, nebius-*)")
    hosts = run_cli_here("--env", "sim", "--reuse", KEPT, "--hosts", "2", "--dry-run")
    assert_one_line_error(hosts, f"--reuse {KEPT} runs on the hosts that run kept, as they are: drop --hosts")


def test_a_second_run_on_one_envs_state_stops_naming_the_first(tmp_path: Path) -> None:
    state = tmp_path / "state"
    first = Holder(KEPT, str(tmp_path / "first"), os.getpid(), "me@box", "2026-01-01T00:00:00Z")
    assert locks.take(state / "lock", first) is None
    try:  # a CLI process of its own: the state's holder is another process, as a first run's driver is
        run = run_cli("--env", "sim", "--stages", "teardown", "--results-root", str(tmp_path / "second"),
                      env={"PAV_STATE_DIR": str(state)})  # fmt: skip
    finally:
        locks.release(state / "lock")
    assert_one_line_error(
        run,
        f"env sim's state ({state}) is in use by run {first.run_id} (pid {os.getpid()}, me@box, since "
        f"{first.since}): wait for it to end",
        documented=True,
    )
    assert list((tmp_path / "second").glob("*")) == []  # no run dir under its results root


# A driver as the CLI runs one: marked and watched (pav.reaper), starting a child in a session of its own
# (as Ansible's workers and torchrun's ranks are), then dying or finishing as told.
DRIVER = """
import subprocess, sys, time
from pav import reaper
with reaper.watching(sys.argv[1]):
    child = subprocess.Popen(["sleep", "300"], start_new_session=True)
    print(child.pid, flush=True)
    if sys.argv[2] == "die":
        time.sleep(300)
"""


def driver(how: str) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen(
        [sys.executable, "-c", DRIVER, rundir.new_run_id("local"), how], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    return proc, int(proc.stdout.readline())


def test_a_killed_drivers_processes_die_with_it() -> None:
    proc, child = driver("die")
    assert alive(child)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    poll("the killed driver's child to die", lambda: not alive(child))


def test_a_driver_that_finishes_leaves_what_it_meant_to() -> None:
    """A kept run's SSH masters outlive it by design: the reaper ends only a driver that died."""
    proc, child = driver("finish")
    assert proc.wait() == 0
    try:
        time.sleep(1)  # the reaper has read "done" and exited: nothing of the run was killed
        assert alive(child)
    finally:
        os.kill(child, signal.SIGKILL)


REGISTER = """
import sys
from pathlib import Path
from pav import locks
from pav.locks import Holder
locks.take(Path(sys.argv[1]), Holder(sys.argv[2], "/gone", 4242, "me@box", "2026-01-01T00:00:00Z"))
"""


@pytest.mark.slow  # two pipeline runs with their playbooks: out of the fast lane (issue 49)
def test_the_next_run_ends_what_a_gone_run_left_on_static_hosts(tmp_path: Path) -> None:
    """A static env's run whose driver died ran no teardown: its launch still runs on the host and its folder
    is there. The next run that reaches the host names it, kills the launch and removes the folder."""
    state, gone = tmp_path / "state", rundir.new_run_id("local")
    # The gone run registered as every run does, and exited without letting its entry go.
    subprocess.run([sys.executable, "-c", REGISTER, str(state / "runs" / f"{gone}.lock"), gone], check=True)
    folder = Path("/var/lib/pav/runs") / gone
    (folder / "results").mkdir(parents=True)
    launch = subprocess.Popen(
        ["sleep", "300"], env={**os.environ, "PAV_LAUNCH": f"{gone}/localhost/torch_gloo_allreduce"},
        start_new_session=True,
    )  # fmt: skip
    try:
        env = {"PAV_STATE_DIR": str(state)}
        run = run_cli_here("--stages", "teardown", "--results-root", str(tmp_path / "next"), env=env)
        assert run.rc == 0, run.stdout + run.stderr
        assert (
            f"run {gone} (pid 4242, me@box, since 2026-01-01T00:00:00Z) ended without a teardown: killed its "
            "launches and removed its folder on 1 of 1 host(s)"
        ) in run.stdout
        assert launch.wait(timeout=30) == -signal.SIGKILL
        assert not folder.exists()
        assert not (state / "runs").exists()  # its entry went with its work; the next run finds none
    finally:
        launch.kill()
