"""In process, the parts behind kept hosts and killed drivers (issue 38): what a run may do with an env's
state (ownership.assess), the kept run's one link (run_links), the reaper's sweep of a run's marked
processes, and that the cleanup stage leaves hosts alone when no gone run is known."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from pav import cli, ownership, reaper, run_links
from pav.context import Options
from pav.errors import PavError
from pav.locks import Holder
from pav.processes import DRIVER_MARKER, alive
from pav.provisioning import keeper
from pav.provisioning.keeper import Keep, StateRecord
from pav.stages import cleanup
from tests.conftest import run_cli_here
from tests.driver.contexts import context

NOW = datetime(2026, 11, 26, 12, tzinfo=UTC)


def state_with_a_host(tmp_path: Path) -> Path:
    """A Terraform state holding one resource, as the sim env's root leaves it."""
    state = tmp_path / "state"
    state.mkdir()
    tfstate = {"version": 4, "resources": [{"type": "terraform_data", "name": "host", "instances": [{}]}]}
    (state / "terraform.tfstate").write_text(json.dumps(tfstate))
    return state


def keep(until: datetime) -> Keep:
    return Keep(
        "r-kept", "/runs/r-kept", "ops@ctl", "2026-11-26T10:00:00Z", until.strftime("%Y-%m-%dT%H:%M:%SZ")
    )


def asked(reuse: str | None = None, stages: tuple[str, ...] = ("provision", "validate")) -> ownership.Asked:
    return ownership.Asked(reuse, frozenset(), frozenset(stages))


def test_kept_hosts_are_refused_unless_reused(tmp_path: Path) -> None:
    state = state_with_a_host(tmp_path)
    record = StateRecord(kept=keep(NOW + timedelta(hours=2)))
    with pytest.raises(PavError) as exc:
        ownership.assess(state, record, "sim", asked(), NOW)
    said = str(exc.value)
    assert said.startswith("env sim: its hosts are kept by run r-kept (ops@ctl, kept ")
    assert (
        "pass --reuse r-kept to run on them, or destroy them with --stages teardown --run-dir /runs/r-kept"
        in said
    )
    assert ownership.assess(state, record, "sim", asked("r-kept"), NOW).kept == record.kept
    with pytest.raises(PavError, match=r"^--reuse r-other names another run; env sim: its hosts are kept"):
        ownership.assess(state, record, "sim", asked("r-other"), NOW)


def test_an_expired_keep_or_a_dead_run_is_a_leftover_a_provisioning_run_clears(tmp_path: Path) -> None:
    state = state_with_a_host(tmp_path)
    expired = ownership.assess(state, StateRecord(kept=keep(NOW - timedelta(minutes=1))), "sim", asked(), NOW)
    assert expired.leftover and expired.kept is None
    dead = Holder("r-dead", "/runs/r-dead", 4242, "ci@runner", "2026-11-26T11:00:00Z")
    found = ownership.assess(state, StateRecord(running=dead), "sim", asked(), NOW)
    assert found.dead == (dead,) and "r-dead" in found.leftover
    with pytest.raises(PavError, match="a run with the provision stage destroys it first"):
        ownership.assess(state, StateRecord(running=dead), "sim", asked(stages=("configure",)), NOW)


def test_an_empty_state_belongs_to_nobody(tmp_path: Path) -> None:
    assert ownership.assess(
        tmp_path, StateRecord(kept=keep(NOW + timedelta(hours=1))), "sim", asked(), NOW
    ) == (ownership.Assessment())


def test_the_kept_run_gets_one_link_and_its_record_stays(tmp_path: Path) -> None:
    kept, later = tmp_path / "kept", tmp_path / "later"
    kept.mkdir()
    later.mkdir()
    (kept / "results.json").write_text('{"verdict": "PASS"}\n')
    (kept / "report.html").write_text("<html><body><h1>PASS</h1></body></html>")
    assert run_links.link_teardown(kept, "r-later", later, "2026-11-26T12:00:00Z")
    assert (kept / "results.json").read_text() == '{"verdict": "PASS"}\n'
    link = json.loads((kept / run_links.LINK).read_text())
    assert link["by_run"] == "r-later" and link["torn_down_at"] == "2026-11-26T12:00:00Z"
    page = (kept / "report.html").read_text()
    assert 'torn down at 2026-11-26T12:00:00Z by run <a href="../later/report.html">r-later</a>' in page
    assert not run_links.link_teardown(kept, "r-third", later, "2026-11-27T00:00:00Z")  # the first one stays
    assert json.loads((kept / run_links.LINK).read_text())["by_run"] == "r-later"


def test_a_reuse_run_that_destroys_the_kept_hosts_links_the_kept_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 48: after `--reuse KEPT` (no --keep) destroyed the kept hosts, `--stages teardown --run-dir
    KEPT_DIR` destroyed nothing and stamped the kept run "torn down by" itself. The --reuse run's teardown
    links the kept run (the env's record names its dir); the later teardown says who did, and does nothing."""
    kept_id = "20261126T100000.000Z-sim"
    kept_dir = tmp_path / "runs" / kept_id
    kept_dir.mkdir(parents=True)
    record = {"run_id": kept_id, "env": "sim", "inventory": "terraform/envs/sim", "verdict": "PASS"}
    (kept_dir / "results.json").write_text(json.dumps(record))
    (kept_dir / "report.html").write_text("<html><body><h1>PASS</h1></body></html>")
    written = {p.name: p.read_bytes() for p in kept_dir.iterdir()}
    state = state_with_a_host(tmp_path)
    until = (datetime.now(UTC) + timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    keeper.write(
        state, StateRecord(kept=Keep(kept_id, str(kept_dir), "ops@ctl", "2026-11-26T10:00:00Z", until))
    )
    monkeypatch.setenv("PAV_STATE_DIR", str(state))
    ctx = context(provisions=True, options=Options(reuse=kept_id))
    ctx.run_dir, ctx.results.reused = tmp_path / "runs" / "r-reuse", kept_id
    with ownership.claimed(ctx):  # the --reuse run: its teardown destroys the kept hosts
        teardown = ctx.results.stage("teardown")
        teardown.status, teardown.ended = "ok", "2026-11-26T12:00:00Z"
        ctx.results.destroyed = ["terraform_data.host"]
        (state / "terraform.tfstate").write_text('{"version": 4, "resources": []}')
    cli.link_kept_run(ctx)
    link = json.loads((kept_dir / run_links.LINK).read_text())
    assert link == {"torn_down_at": "2026-11-26T12:00:00Z", "by_run": "id", "by_run_dir": str(ctx.run_dir)}
    assert not (state / "owner.json").exists()  # nothing kept any more
    # The kept run's teardown, as it printed it: nothing to do, and it says who did it; no record made.
    down = run_cli_here("--stages", "teardown", "--run-dir", str(kept_dir), env={"PAV_STATE_DIR": str(state)})
    assert down.rc == 0, down.stdout + down.stderr
    assert down.stdout == (
        f"nothing to tear down: run {kept_id}'s hosts were already torn down at 2026-11-26T12:00:00Z by run "
        f"id (its run dir {ctx.run_dir})\n"
    )
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == [kept_id]
    assert {p.name for p in kept_dir.iterdir()} == {*written, run_links.LINK}
    assert (kept_dir / "results.json").read_bytes() == written["results.json"]


def test_a_teardown_that_destroyed_nothing_links_no_kept_run(tmp_path: Path) -> None:
    kept_dir = tmp_path / "kept"
    kept_dir.mkdir()
    ctx = context(provisions=True)
    ctx.run_dir, ctx.results.kept_run = tmp_path / "later", {"run_id": "r-kept", "run_dir": str(kept_dir)}
    ctx.results.stage("teardown").status = "ok"
    cli.link_kept_run(ctx)  # "nothing to destroy": whoever took the kept run's hosts, it was not this run
    assert not (kept_dir / run_links.LINK).exists()
    ctx.results.destroyed = ["terraform_data.host"]
    cli.link_kept_run(ctx)
    assert json.loads((kept_dir / run_links.LINK).read_text())["by_run"] == "id"


def test_the_reaper_sweeps_what_carries_the_runs_marker_and_nothing_else(tmp_path: Path) -> None:
    marked = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"], env=os.environ | {DRIVER_MARKER: "r-swept"}
    )
    other = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"], env=os.environ | {DRIVER_MARKER: "r-other"}
    )
    try:
        reaper.sweep("r-swept")
        marked.wait(timeout=10)  # killed: reaped here so it is not left a zombie that still looks alive
        assert marked.returncode == -9
        time.sleep(0.2)
        assert alive(other.pid) and other.poll() is None
    finally:
        for proc in (marked, other):
            proc.kill()
            proc.wait()


def test_cleanup_leaves_the_hosts_alone_without_a_gone_run() -> None:
    ctx = context(2)
    cleanup.run(ctx)  # no dead run known: no playbook (none could start without an inventory here)
    assert ctx.dead_runs == []
