"""A killed driver's run dir loses its secrets too (issue 47): the reaper that notices the death scrubs the
run dir as the driver's end would have (pav.secrets.files.scrub_dead_run): ansible-runner's input files go
whole, known secret values (the driver's environment, which the reaper inherited) leave every file, and
Ansible's records lose every value kept under a secret-looking name, known or not."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pav import rundir
from pav.processes import alive, named
from pav.secrets.files import scrub_dead_run
from pav.secrets.redact import REDACTED

TOKEN = "secretvalue-4f1c9a7e2b"  # the dead run's NEBIUS_IAM_TOKEN
FACT_TOKEN = "hosttoken-8d2e61b0c3"  # a token of a host's own environment, in its gathered facts
IDENT = "c9ca3662-f46d-4623-845c-094816898c6b"  # ansible-runner's artifact dir of the playbook


def killed_run_dir(run_dir: Path) -> dict[str, str]:
    """A run dir as a driver killed mid-validate leaves it: its record says ERROR, and the validate
    playbook's private data dir holds ansible-runner's input files and artifacts, the last event cut off
    mid-write. Returns the record's text and where each secret was written."""
    playbook = run_dir / "ansible" / "validate"
    artifacts = playbook / "artifacts" / IDENT
    (playbook / "env").mkdir(parents=True)
    (artifacts / "job_events").mkdir(parents=True)
    (run_dir / "inventory").mkdir()
    (run_dir / "inventory" / "hosts.yml").write_text("all:\n  hosts:\n    localhost:\n")
    # Killed in validate: the record names it, written as the stage began (issue 64).
    stages = [
        {"name": "configure", "status": "ok"},
        {"name": "validate", "status": "running", "started": "T"},
    ]
    record = json.dumps(
        {"run_id": "r-killed", "verdict": "ERROR", "stages": stages, "stage_in_progress": "validate"}
    )
    (run_dir / "results.json").write_text(record)
    (run_dir / "results.json").chmod(0o644)
    # ansible-runner's inputs, as it writes them without suppress_env_files.
    (playbook / "env" / "envvars").write_text(f"NEBIUS_IAM_TOKEN: {TOKEN}\nANSIBLE_FORCE_COLOR: 'false'\n")
    (playbook / "env" / "extravars").write_text(json.dumps({"pav_run_id": "r-killed"}))
    # The environment Ansible ran with, as ansible-runner records it.
    command = {"command": ["ansible-playbook", "validate.yml"], "cwd": str(playbook),
               "env": {"NEBIUS_IAM_TOKEN": TOKEN, "PATH": "/usr/bin"}}  # fmt: skip
    (artifacts / "command").write_text(json.dumps(command))
    facts = {"ansible_env": {"HOME": "/root", "HF_TOKEN": FACT_TOKEN, "NEBIUS_IAM_TOKEN": TOKEN}}
    event = {"event": "runner_on_ok", "event_data": {"host": "localhost", "res": {"ansible_facts": facts}}}
    # Killed mid-write: the file ends inside the token's value (its closing quote and braces never written).
    (artifacts / "job_events" / "1-0001.json").write_text(json.dumps(event).removesuffix('"}}}}}'))
    # A task that printed the token: only its value can find it there.
    (artifacts / "stdout").write_text(f'ok: [localhost] => {{"msg": "token {TOKEN}"}}\n')
    return {"results.json": record}


def holding(run_dir: Path, secret: str) -> list[str]:
    files = (p for p in run_dir.rglob("*") if p.is_file())
    return [str(p.relative_to(run_dir)) for p in files if secret in p.read_text()]


# A driver as the CLI runs one (pav.cli.run): watched by a reaper told to scrub its run dir, with the cloud
# token in its environment, then killed.
DRIVER = """
import sys, time
from pathlib import Path
from pav import reaper
with reaper.watching(sys.argv[1], scrub=Path(sys.argv[2])):
    print("watched", flush=True)
    time.sleep(300)
"""


def wait_gone(pid: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while alive(pid):
        if time.monotonic() > deadline:
            pytest.fail(f"the reaper (pid {pid}) did not end")
        time.sleep(0.1)


def wait_ended(record: Path, timeout: float = 60) -> None:
    """Until the run's record has an end (the reaper's record_killed writes it after the scrub)."""
    deadline = time.monotonic() + timeout
    while not json.loads(record.read_text()).get("ended"):
        if time.monotonic() > deadline:
            pytest.fail(f"no reaper recorded the kill in {record} within {timeout:.0f} s")
        time.sleep(0.1)


def test_the_reaper_of_a_killed_driver_scrubs_its_run_dir(tmp_path: Path) -> None:
    run_dir, run_id = tmp_path / "run", rundir.new_run_id("local")
    record = killed_run_dir(run_dir)["results.json"]
    env = os.environ | {"NEBIUS_IAM_TOKEN": TOKEN}
    proc = subprocess.Popen(
        [sys.executable, "-c", DRIVER, run_id, str(run_dir)], env=env, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline() == "watched\n"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    # The reaper's last act, the record's end, waited for: in two loaded runs (a serial fast lane, a fresh
    # clone) the run dir was read unscrubbed after the look below had nothing to wait for. A reaper that died
    # without scrubbing still fails here, by name.
    wait_ended(run_dir / "results.json")
    for pid in named(run_id):  # the reaper, whose command line names the run; none if it already ended
        wait_gone(pid)

    assert holding(run_dir, TOKEN) == [] and holding(run_dir, FACT_TOKEN) == []
    assert not (run_dir / "ansible" / "validate" / "env").exists()
    command = json.loads((run_dir / "ansible" / "validate" / "artifacts" / IDENT / "command").read_text())
    assert command["env"] == {"NEBIUS_IAM_TOKEN": REDACTED, "PATH": "/usr/bin"}
    # The run's record as the driver left it, saying now that it was killed, and when (issue 48).
    found = json.loads((run_dir / "results.json").read_text())
    assert found["error"].startswith("killed during stage validate: the driver ended without finishing")
    assert found["ended"]
    assert {s["name"]: s["status"] for s in found["stages"]} == {"configure": "ok", "validate": "killed"}
    kept = ("error", "ended", "stages")
    assert {k: v for k, v in found.items() if k not in kept} == {
        k: v for k, v in json.loads(record).items() if k not in kept
    }
    # Readable as the run's other files are (mkstemp made it 0600), with no secret in it.
    assert (run_dir / "results.json").stat().st_mode & 0o777 == 0o644


def test_a_dead_runs_named_secrets_go_though_their_values_are_unknown(tmp_path: Path) -> None:
    """A reaper knows the driver's environment, not a host's: a value kept under a secret-looking name goes by
    its name, in a cut-off event file too; the files stay what they were otherwise."""
    run_dir = tmp_path / "run"
    killed_run_dir(run_dir)
    scrub_dead_run(run_dir, environ={})
    artifacts = run_dir / "ansible" / "validate" / "artifacts" / IDENT
    assert holding(run_dir, FACT_TOKEN) == []
    assert not (run_dir / "ansible" / "validate" / "env").exists()
    command = json.loads((artifacts / "command").read_text())
    assert command["env"] == {"NEBIUS_IAM_TOKEN": REDACTED, "PATH": "/usr/bin"}
    event = (artifacts / "job_events" / "1-0001.json").read_text()
    assert f'"HF_TOKEN": "{REDACTED}", "NEBIUS_IAM_TOKEN": "{REDACTED}' in event
    assert '"HOME": "/root"' in event
