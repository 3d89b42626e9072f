"""`provision-and-validate preflight`: this node's state in about a second, no test, for a Slurm Prolog or a
Kubernetes init container (issue 50). Exit 0 fit, 1 a problem (a `FAIL:` line each), 2 unreadable.

The node's facts are what real machines' NVML said (tests/payload/fixtures/node-state, through
tests/thresholds/test_leftovers.py's reader; tests/thresholds/fixtures/h100-4gpu-nvml-facts.json, the
facts command's own output on an idle 4x H100), and this machine's own read, which has no GPU."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from pav.commands import preflight
from tests.conftest import ROOT, run_cli_here
from tests.thresholds.test_leftovers import recorded

H100X4_FACTS = ROOT / "tests" / "thresholds" / "fixtures" / "h100-4gpu-nvml-facts.json"
HOST = socket.gethostname()


def saved(tmp_path: Path, gpus: dict[str, Any]) -> Path:
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(gpus))
    return path


def test_an_idle_real_node_is_fit() -> None:
    done = run_cli_here("preflight", "--facts", str(H100X4_FACTS), "--expect-gpus", "4")
    assert done.rc == 0, done.stdout + done.stderr
    [line] = done.stdout.splitlines()
    assert line.startswith(f"OK: {HOST}: 4 GPU(s), none held by another process, no health problem (")


def test_a_gpu_another_process_holds_fails_as_a_user_problem(tmp_path: Path) -> None:
    facts = saved(tmp_path, recorded("h200x4-leftover-85pct-gpu0.json")["gpus"])
    done = run_cli_here("preflight", "--facts", str(facts))
    assert done.rc == 1, done.stdout + done.stderr
    [line] = done.stdout.splitlines()
    assert line.startswith(f"FAIL: {HOST} GPU 0 (00000000:00:06.0, GPU-")
    assert line.endswith(
        ": PID 1068 (python3, user root) holds 122204 MiB (user problem: end it (kill 1068))"
    )


def test_every_problem_is_a_line_and_json_lists_them(tmp_path: Path) -> None:
    """A held GPU, a GPU missing of the 8 expected, and a link down that gpu_health names: three lines."""
    gpus = recorded("h200x4-leftover-85pct-gpu0.json")["gpus"]
    gpus["devices"][1]["nvlink"] = {"version": 4, "links_total": 2, "links_up": 1, "links": [
        {"link": 0, "up": True, "remote_bus_id": None, "remote_type": "switch", "speed_mbps": 26562},
        {"link": 1, "up": False, "remote_bus_id": None, "remote_type": "unknown", "speed_mbps": None},
    ]}  # fmt: skip
    facts = saved(tmp_path, gpus)
    done = run_cli_here("preflight", "--facts", str(facts), "--expect-gpus", "8")
    assert done.rc == 1
    lines = done.stdout.splitlines()
    assert len(lines) == 3 and all(x.startswith(f"FAIL: {HOST} ") for x in lines), lines
    assert lines[0] == f"FAIL: {HOST} GPUs: 4 GPU(s) of 8 expected (nvml listed 4) (hardware problem)"
    assert "NVLink link 1 down (hardware problem)" in lines[2]
    as_json = json.loads(run_cli_here("preflight", "--facts", str(facts), "--json").stdout)
    assert as_json["ok"] is False and as_json["gpus"] == 4
    assert [p["category"] for p in as_json["problems"]] == ["user", "hardware"]


def test_a_file_that_is_not_the_facts_is_one_error_line_and_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"tests": []}')
    done = run_cli_here("preflight", "--facts", str(bad))
    assert (done.rc, done.stdout) == (2, "")
    assert (
        done.stderr
        == f"error: {bad} is not the output of `python -m pav_payload facts` (no 'devices' list)\n"
    )


def test_this_machine_read_for_real_has_no_gpu() -> None:
    """The real read, as a Prolog runs it: a child process of the payload's reader, no torch."""
    argv = [sys.executable, "-m", "pav", "preflight"]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(f"OK: {HOST}: 0 GPU(s), ")
    expect = subprocess.run([*argv, "--expect-gpus", "8"], cwd=ROOT, capture_output=True, text=True,
                            timeout=60, check=False)  # fmt: skip
    assert expect.returncode == 1
    assert expect.stdout.startswith(f"FAIL: {HOST} GPUs: 0 GPU(s) of 8 expected (")


def test_a_read_that_hangs_is_cut_at_the_time_limit(tmp_path: Path) -> None:
    """NVML unreadable and an nvidia-smi that hangs (a GPU off the bus): exit 2 at --timeout-s, one line."""
    tools, blocked = tmp_path / "bin", tmp_path / "blocked"
    tools.mkdir()
    blocked.mkdir()
    (blocked / "pynvml.py").write_text("raise ImportError('pynvml blocked by the test')\n")
    (tools / "nvidia-smi").write_text("#!/bin/sh\nexec sleep 60\n")
    (tools / "nvidia-smi").chmod(0o755)
    env = {**os.environ, "PATH": f"{tools}:{os.environ['PATH']}", "PYTHONPATH": str(blocked)}
    argv = [sys.executable, "-m", "pav", "preflight", "--timeout-s", "2"]
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith("error: the GPUs' state was not read in 2 s (NVML or nvidia-smi hung")
    assert len(done.stderr.splitlines()) == 1


def test_expect_gpus_is_a_count(tmp_path: Path) -> None:
    facts = saved(tmp_path, recorded("h200x4-idle-1.json")["gpus"])
    none = run_cli_here("preflight", "--facts", str(facts), "--expect-gpus", "0")
    assert none.rc == 1 and f"FAIL: {HOST} GPUs: 4 GPU(s) of 0 expected" in none.stdout
    negative = run_cli_here("preflight", "--facts", str(facts), "--expect-gpus", "-1")
    assert (
        negative.rc == 2
        and "argument --expect-gpus: -1 is not a count of GPUs (0 or more)" in negative.stderr
    )


def test_judge_gives_each_problem_its_category_and_fix() -> None:
    gpus = recorded("h200x4-leftover-85pct-gpu0.json")["gpus"]
    [held] = preflight.judge("node", gpus, 4)
    assert (held["category"], held["fix"]) == ("user", "end it (kill 1068)")
    assert held["problem"] == "PID 1068 (python3, user root) holds 122204 MiB"
    assert preflight.judge("node", recorded("h200x4-idle-1.json")["gpus"], 4) == []


def real_h200x2_facts(tmp_path: Path) -> Path:
    """The facts command's own output on an idle 2x H200 (session 25's healthy run, its configure read)."""
    run = ROOT / "tests" / "thresholds" / "fixtures" / "h200x2c-healthy-default" / "results.json"
    return saved(tmp_path, json.loads(run.read_text())["hosts"]["localhost"]["facts"]["gpus"])


def test_gpu_settings_and_versions_as_flags_say_are_judged_as_configuration_problems(tmp_path: Path) -> None:
    facts = real_h200x2_facts(tmp_path)
    fit = run_cli_here("preflight", "--facts", str(facts), "--expect-version", "driver=580.159.04",
                       "--expect-version", "cuda_driver=13.0")  # fmt: skip
    assert fit.rc == 0, fit.stdout + fit.stderr
    done = run_cli_here("preflight", "--facts", str(facts), "--gpu-state", "mig_mode=enabled",
                        "--expect-version", "driver=575.57.08")  # fmt: skip
    assert done.rc == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 3, lines  # MIG on each of the two GPUs, the driver
    assert lines[0].startswith(f"FAIL: {HOST} GPU 0 (00000000:00:06.0, ")
    assert lines[0].endswith(
        ": MIG mode disabled (expected enabled; pav_gpu_state.mig_mode) (configuration problem)"
    )
    assert lines[2] == (f"FAIL: {HOST} {HOST}: {HOST}: driver 580.159.04, expected 575.57.08 "
                        "(pav_expected_versions.driver) (configuration problem)")  # fmt: skip
    bad = run_cli_here("preflight", "--facts", str(facts), "--gpu-state", "mig_mode")
    assert (bad.rc, bad.stderr.strip()) == (2, "error: --gpu-state 'mig_mode': give KEY=VALUE")


def test_a_payload_planted_in_the_working_dir_never_runs(tmp_path: Path) -> None:
    """Issue 62: run as root from a folder others can write (a Prolog's, a shared scratch), the read ran
    the pav_payload planted there (its working dir came first on sys.path); it runs isolated from /, the
    checkout's payload put on the path by hand."""
    planted, marker = tmp_path / "scratch", tmp_path / "PWNED"
    (planted / "pav_payload").mkdir(parents=True)
    plant = f"open({str(marker)!r}, 'a').write(__name__ + '\\n')\n"
    for name in ("pav_payload/__init__.py", "pav_payload/__main__.py", "sitecustomize.py", "json.py"):
        (planted / name).write_text(plant)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    # -P: the command as its console script starts (no working dir on the path); the read is what is tried.
    argv = [sys.executable, "-P", "-m", "pav", "preflight"]
    done = subprocess.run(argv, cwd=planted, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert not marker.exists(), marker.read_text()
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(f"OK: {HOST}: 0 GPU(s), ")


def test_a_process_name_with_escape_sequences_reaches_the_terminal_as_text(tmp_path: Path) -> None:
    """Issue 62: a process's name comes from the node (/proc/PID/comm), which its owner chooses; printed raw,
    an escape sequence in it retitled or cleared the operator's terminal."""
    gpus = recorded("h200x4-leftover-85pct-gpu0.json")["gpus"]
    gpus["devices"][0]["processes"][0]["name"] = "\x1b]0;owned\x07\x1b[2Jpython3"
    done = run_cli_here("preflight", "--facts", str(saved(tmp_path, gpus)))
    assert done.rc == 1
    [line] = done.stdout.splitlines()
    assert "\x1b" not in line and "\x07" not in line
    assert r"PID 1068 (\x1b]0;owned\x07\x1b[2Jpython3, user root) holds 122204 MiB" in line
