"""A run dir is one run's (issue 48): a run given another run's dir acts on that run as a second record
beside it (stages that launch nothing) or is refused in one line, never writing over it; a teardown given a
kept run's dir takes its env from the run's record, so the line the kept run printed works as printed."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import assert_one_line_error, run_cli_here

KEPT = {
    "run_id": "20261127T000000.000Z-sim",
    "env": "sim",
    "inventory": "terraform/envs/sim",
    "verdict": "PASS",
}


def kept_run(tmp_path: Path) -> tuple[Path, bytes]:
    run_dir = tmp_path / "runs" / KEPT["run_id"]
    run_dir.mkdir(parents=True)
    (run_dir / "results.json").write_text(json.dumps(KEPT))
    return run_dir, (run_dir / "results.json").read_bytes()


def test_the_printed_teardown_line_takes_the_kept_runs_env(tmp_path: Path) -> None:
    """`--stages teardown --run-dir DIR`, as a kept run prints it, without --env: it ran as --env local and
    wrote a NONE record over the kept sim run's, leaving its hosts up."""
    run_dir, record = kept_run(tmp_path)
    plan = run_cli_here("--stages", "teardown", "--run-dir", str(run_dir), "--dry-run")
    assert plan.rc == 0, plan.stdout + plan.stderr
    assert "env: sim" in plan.stdout.splitlines()
    assert (run_dir / "results.json").read_bytes() == record


def test_a_launching_run_given_another_runs_dir_is_refused(tmp_path: Path) -> None:
    run_dir, record = kept_run(tmp_path)
    for argv in (["--env", "sim"], []):
        refused = run_cli_here(*argv, "--run-dir", str(run_dir), "--dry-run")
        assert_one_line_error(refused, f"holds run {KEPT['run_id']}'s record", "a run writes only its own")
    assert (run_dir / "results.json").read_bytes() == record


def test_another_env_on_a_kept_runs_dir_is_refused_naming_its_env(tmp_path: Path) -> None:
    run_dir, record = kept_run(tmp_path)
    refused = run_cli_here("--env", "local", "--stages", "teardown", "--run-dir", str(run_dir))
    assert_one_line_error(refused, "(env sim), not env local's")
    assert (run_dir / "results.json").read_bytes() == record and sorted(run_dir.iterdir()) == [
        run_dir / "results.json"
    ]


def test_a_teardown_given_a_dir_that_does_not_exist_is_refused_and_makes_none(tmp_path: Path) -> None:
    """Issue 48: `--stages teardown --run-dir MISTYPED` tore down nothing of the kept run, exit 0, into a dir
    it made. Refused in one line, naming the dir and the ways out; a dry run the same."""
    missing = tmp_path / "runs" / "20261127T000000.000Z-sm"
    state = {"PAV_STATE_DIR": str(tmp_path / "state")}
    for argv in ([], ["--dry-run"]):
        refused = run_cli_here("--stages", "teardown", "--run-dir", str(missing), *argv)
        assert_one_line_error(
            refused, f"--run-dir {missing} does not exist: a teardown given --run-dir acts on that run; "
            "pass the kept run's dir (its summary.txt names it), or leave --run-dir out to end what gone "
            "runs left (its record then goes under --results-root)", documented=True,
        )  # fmt: skip
    sim = run_cli_here("--env", "sim", "--stages", "teardown", "--run-dir", str(missing), env=state)
    assert_one_line_error(
        sim,
        "(its summary.txt names it) or --reuse RUN_ID, or leave --run-dir out to destroy",
        documented=True,
    )
    assert sorted(tmp_path.iterdir()) == []  # no run dir, no state
    # --reuse names the kept run itself: its --run-dir is its own record, made for it (the dry run: the plan).
    reuse = run_cli_here("--env", "sim", "--stages", "teardown", "--reuse", KEPT["run_id"], "--run-dir",
                         str(missing), "--dry-run", env=state)  # fmt: skip
    assert reuse.rc == 0 and f"run dir: {missing}" in reuse.stdout, reuse.stdout + reuse.stderr


def test_version_names_the_release_and_the_commit() -> None:
    shown = run_cli_here("--version")
    assert shown.rc == 0 and shown.stdout.startswith("provision-and-validate 0.1.0"), (
        shown.stdout + shown.stderr
    )
