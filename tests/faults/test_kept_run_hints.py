"""Issue 64: a kept run's teardown and reuse take everything from the run's record. Every command a kept run
prints at its end runs as printed, from a shell that sets another state dir, and together they leave
nothing up; a teardown whose recorded state is gone refuses, naming where the hosts are recorded, never
"ok"."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import CliRun, assert_one_line_error, run_cli_here
from tests.faults.conftest import Sandbox
from tests.summary_lines import unfolded


def printed(stdout: str, what: str) -> str:
    """The command a kept run printed on its summary's `  WHAT: ` line (exactly one)."""
    [line] = [ln for ln in stdout.splitlines() if ln.startswith(f"  {what}: ")]
    return line.removeprefix(f"  {what}: ")


def pasted(command: str, shell_env: dict[str, str], cwd: Path) -> CliRun:
    """The command as an operator pastes it into a shell of their own: the venv's bin on PATH (as README's
    `. .venv/bin/activate` puts it), another folder, and the shell's own environment."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    proc = subprocess.run(
        ["bash", "-c", command],
        capture_output=True,
        text=True,
        env={**os.environ, **shell_env, "PATH": path},
        cwd=cwd,
        timeout=900,
        check=False,
    )
    return CliRun(proc.returncode, proc.stdout, proc.stderr)


@pytest.mark.slow
def test_every_command_a_kept_run_prints_runs_as_printed(sim_deps: None, sandbox: Sandbox) -> None:
    # Provision only, kept: before issue 64 such a run printed no command at all.
    kept = sandbox.cli("--env", "sim", "--hosts", "1", "--stages", "provision", "--keep", run="kept")
    assert kept.rc == 0, kept.stdout + kept.stderr
    kept_id = sandbox.results("kept")["run_id"]
    [host] = sandbox.results("kept")["hosts"]
    reuse, teardown = printed(kept.stdout, "reuse"), printed(kept.stdout, "teardown")

    # The operator's shell: its own state dir (empty) and results root, run from another folder.
    elsewhere = sandbox.base / "shell"
    (elsewhere / "state").mkdir(parents=True)
    shell = {**sandbox.env(), "PAV_STATE_DIR": str(elsewhere / "state"), "PAV_RESULTS_ROOT": str(elsewhere)}

    again = pasted(reuse, shell, elsewhere)
    assert again.rc in (0, 1), again.stdout + again.stderr  # ran its tests on the kept host: PASS or FAIL
    [reused_dir] = [p for p in elsewhere.iterdir() if p.name != "state"]
    reused = json.loads((reused_dir / "results.json").read_text())
    assert reused["reused"] == kept_id and list(reused["hosts"]) == [host], again.stdout
    assert printed(again.stdout, "reuse") == reuse  # kept again: the same hosts, the same command

    down = pasted(teardown, shell, elsewhere)
    assert down.rc == 0, down.stdout + down.stderr
    assert f"state dir: {sandbox.state}, as kept run {kept_id} recorded it (not PAV_STATE_DIR=" in down.stdout
    assert f"teardown of kept run {kept_id} (" in "\n".join(unfolded(down.stdout.splitlines()))
    assert "  destroyed terraform_data.host[0]" in down.stdout
    assert not list((elsewhere / "state").iterdir())  # the shell's own state dir was never used
    assert not (sandbox.state / "owner.json").exists()
    assert sandbox.left(("kept",)) == []


# A kept sim run's record as the driver wrote it before issue 64 (no `kept`), and as it writes it now.
BEFORE_64 = {"stages": [{"name": "provision", "status": "ok"}, {"name": "report", "status": "ok"}]}
NOW = {"kept": {"resources": ["null_resource.host[0]", "null_resource.net"], "hosts": ["sim-x-0"]}}


RUN_ID = "20261129T021500.000Z-sim"
# Each names the kept run alone, no --env: the teardown by its dir, --reuse by its id (its record is found
# under the results root, $PAV_RESULTS_ROOT here).
ACTS_ON = {
    "teardown": ("--stages", "teardown", "--run-dir", f"runs/{RUN_ID}"),
    "reuse": ("--reuse", RUN_ID, "--stages", "provision,report", "--keep"),
}


@pytest.mark.parametrize("record", [BEFORE_64, NOW], ids=["before-64", "now"])
@pytest.mark.parametrize("gone", ["missing", "empty"])
@pytest.mark.parametrize("command", sorted(ACTS_ON))
def test_a_kept_run_whose_recorded_state_is_gone_is_refused(
    tmp_path: Path, record: dict[str, object], gone: str, command: str
) -> None:
    state = tmp_path / "nightly-state"  # where the nightly unit's PAV_STATE_DIR put the hosts
    if gone == "empty":
        state.mkdir()
    kept_dir = tmp_path / "runs" / RUN_ID
    kept_dir.mkdir(parents=True)
    fields = {"run_id": RUN_ID, "env": "sim", "inventory": "terraform/envs/sim", "state_dir": str(state)}
    (kept_dir / "results.json").write_text(json.dumps(fields | record))
    # The operator's shell has a state dir of its own, with nothing in it.
    shell = {"PAV_STATE_DIR": str(tmp_path / "shell-state"), "PAV_RESULTS_ROOT": str(tmp_path / "runs")}

    args = [str(tmp_path / a) if a.startswith("runs/") else a for a in ACTS_ON[command]]
    down = run_cli_here(*args, env=shell)
    found = "does not exist" if gone == "missing" else "holds none for it"
    assert_one_line_error(
        down,
        f"kept run {RUN_ID} recorded its Terraform state in {state}, which {found}: restore that folder",
        "nothing was destroyed",
        documented=True,
    )
    assert "ok" not in down.stdout
    # Refused before anything: no record of its own, no state dir made, the kept run's record alone.
    assert [p.name for p in (tmp_path / "runs").iterdir()] == [RUN_ID]
    assert not (tmp_path / "shell-state").exists()
    assert state.exists() == (gone == "empty") and [p.name for p in kept_dir.iterdir()] == ["results.json"]


def hint(stderr: str, after: str) -> str:
    """The command an error line ends with, after `after`."""
    [line] = [ln for ln in stderr.splitlines() if ln.startswith("error: ")]
    return line.split(after, 1)[1]


def test_historys_hint_for_an_inventory_run_runs_as_printed(tmp_path: Path) -> None:
    """Item 3 of issue 64: a run given --inventory records env `custom`; history's hint said `--env custom`,
    an env that does not exist. Pasted, the hint it prints now is accepted and plans that inventory's run
    (as a dry run: the run itself would configure this machine)."""
    from tests.report.test_history_command import nothing_run

    inventory = tmp_path / "my hosts.yml"  # a space: the hint quotes it
    inventory.write_text("all:\n  hosts:\n    localhost: {ansible_connection: local}\n")
    root, run_id = tmp_path / "runs", "20261126T000000.000Z-custom"
    nothing_run(root, "h100x4-healthy", run_id, "2026-11-26T00:00:00Z", env="custom")
    record = root / run_id / "results.json"
    record.write_text(json.dumps(json.loads(record.read_text()) | {"inventory": str(inventory)}))
    said = run_cli_here("history", "--env", "custom", "--results-root", str(root))
    assert said.rc == 2, said.stdout + said.stderr
    command = hint(said.stderr, "once its tests can run there: ")
    planned = pasted(f"{command} --dry-run", {}, tmp_path)
    assert planned.rc == 0, planned.stdout + planned.stderr
    assert "localhost" in planned.stdout and "error" not in planned.stderr


@pytest.mark.slow
def test_the_no_torch_hint_runs_as_printed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Item 7 of issue 64: the install a local run without torch names, pasted, installs the `local` extra's
    torch into the driver's Python (here it is there already: pip finds it satisfied, offline)."""
    from pav import torch_python

    monkeypatch.setattr(torch_python, "choose", lambda: None)
    said = run_cli_here("--env", "local", "--run-dir", str(tmp_path / "run"))
    command = hint(said.stderr, "install the local extra's torch into the driver's Python (").split(";")[0]
    assert command.startswith(f"{sys.executable} -m pip install ")
    installed = pasted(command, {}, tmp_path)
    assert installed.rc == 0, installed.stdout + installed.stderr
    assert "Requirement already satisfied: torch==" in installed.stdout
