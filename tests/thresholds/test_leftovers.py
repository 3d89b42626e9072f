"""A GPU another process holds when the tests are about to start (issue 50): the run stops before them,
naming the process and how to end it, as a user problem, not the hardware's. The facts are what real
machines' NVML said (tests/payload/fixtures/node-state: a torch process holding 85% of an H200, idle
H200s and H100s), in the shape the payload's facts reader records them."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from pav.driver_settings import settings_from
from pav.errors import PavError
from pav.marking import decide
from pav.reporting import bad_parts
from pav.results import HostRecord
from pav.stages import validate
from pav.thresholds import leftovers
from tests.driver.contexts import context

NODE_STATE = Path(__file__).resolve().parents[1] / "payload" / "fixtures" / "node-state"
MIB = 1 << 20


def recorded(name: str) -> dict[str, Any]:
    """facts.gpus as the payload's NVML reader builds it, from a recording's raw NVML answers."""
    raw = json.loads((NODE_STATE / name).read_text())
    devices = []
    for gpu in raw["gpus"]:
        memory = gpu["nvmlDeviceGetMemoryInfo"]["value"]
        procs = gpu["nvmlDeviceGetComputeRunningProcesses"]["value"]
        devices.append({
            "index": gpu["index"],
            "name": gpu["nvmlDeviceGetName"]["value"],
            "uuid": gpu["nvmlDeviceGetUUID"]["value"],
            "pci_bus_id": gpu["nvmlDeviceGetPciInfo"]["value"]["busId"],
            "memory_total_mib": memory["total"] // MIB,
            "memory_used_mib": memory["used"] // MIB,
            # The recording ran as root in the container that held the process: its name and user as the
            # reader gets them from /proc there (nvidia-smi's compute apps name it python3 too).
            "processes": [
                {"pid": p["pid"], "used_mib": p["usedGpuMemory"] // MIB, "name": "python3", "user": "root"}
                for p in procs
            ],
        })  # fmt: skip
    return {"gpus": {"source": "nvml", "devices": devices}}


def host(facts: dict[str, Any]) -> dict[str, HostRecord]:
    return {"gpu-node": HostRecord("gpu-node", facts=facts)}


def test_a_process_holding_85_percent_of_an_h200_is_named_with_its_pid() -> None:
    found = leftovers.find(host(recorded("h200x4-leftover-85pct-gpu0.json")))
    [held] = found["gpu-node"]
    assert held.gpu.startswith("GPU 0 (00000000:00:06.0")
    assert held.problem == "PID 1068 (python3, user root) holds 122204 MiB"  # nvidia-smi: 122204 MiB too
    line = held.line()
    assert line.startswith(f"gpu-node {held.gpu}: PID 1068 (python3, user root) holds 122204 MiB: ")
    assert "a user problem, not the hardware: end it (kill 1068), or set pav_gpu_leftovers: warn" in line
    [result] = leftovers.results(found, "stop")
    assert (result.name, result.status, result.hosts) == ("gpu_leftovers", "fail", ["gpu-node"])
    assert result.metrics == {"gpus_held": 1}
    assert result.threshold["problems"] == [{"part": held.gpu, "problem": held.problem, "category": "user"}]


@pytest.mark.parametrize(
    "name", ["h200x4-idle-1.json", "h200x4-idle-2.json", "h100x2-idle-1.json", "h100x2-after-load.json"]
)
def test_idle_gpus_of_real_machines_pass(name: str) -> None:
    """The driver's own ~0.5-0.6 GiB in use with no process is no leftover."""
    found = leftovers.find(host(recorded(name)))
    assert found == {"gpu-node": []}
    [result] = leftovers.results(found, "stop")
    assert (result.status, result.metrics) == ("pass", {"gpus_held": 0})


def test_memory_no_visible_process_accounts_for_is_named_too() -> None:
    facts = recorded("h200x4-idle-1.json")
    gpu = facts["gpus"]["devices"][1]
    gpu["memory_used_mib"] = 100000  # held by a process of another container: NVML lists none here
    [held] = leftovers.find(host(facts))["gpu-node"]
    assert held.gpu.startswith("GPU 1 ") and held.pid is None
    assert (
        held.problem
        == "100000 MiB of 143771 in use by no process this host can see (one of another container?)"
    )
    assert "end what holds it (nvidia-smi on the machine)" in held.line()


def test_warn_runs_the_tests_and_says_so() -> None:
    found = leftovers.find(host(recorded("h200x4-leftover-85pct-gpu0.json")))
    [result] = leftovers.results(found, "warn")
    assert result.status == "skipped"
    assert result.reason.startswith("not judged (pav_gpu_leftovers: warn): GPU 0 (")


def test_hosts_whose_facts_hold_no_process_list_are_not_judged() -> None:
    """CPU hosts, nvidia-smi's fallback, and facts read before the list existed: nothing to say."""
    facts = recorded("h200x4-leftover-85pct-gpu0.json")
    for device in facts["gpus"]["devices"]:
        del device["processes"]
    assert leftovers.find(host(facts)) == {}
    assert leftovers.find(host({})) == {}
    smi = recorded("h200x4-leftover-85pct-gpu0.json")
    smi["gpus"]["source"] = "nvidia-smi"
    assert leftovers.find(host(smi)) == {}


def test_the_bad_part_and_the_drain_reason_say_user_problem() -> None:
    found = leftovers.find(host(recorded("h200x4-leftover-85pct-gpu0.json")))
    results = {"tests": [asdict(r) for r in leftovers.results(found, "stop")]}
    [part] = bad_parts.find(results)
    assert part.category == "user" and part.kind == "gpu"
    assert part.line().startswith(
        f"gpu-node {part.part} (a user problem): PID 1068 (python3, user root) holds"
    )
    assert "likely cause: a user problem, not the hardware: another process holds the GPU" in part.line()
    reason = decide.reason("20261128T000000Z-sim", part, part.tests)
    assert reason.startswith("pav 20261128T000000Z-sim: user problem: GPU 0 (") and reason.endswith(
        " [gpu_leftovers]"
    )


def test_validate_stops_before_its_tests_with_a_line_per_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    ctx = context(1)
    ctx.results.hosts = {"h0": HostRecord("h0", facts=recorded("h200x4-leftover-85pct-gpu0.json"))}
    assert validate.run(ctx) == "stopped before the tests: 1 GPU(s) held by other processes (gpu_leftovers)"
    assert ctx.launches == []  # nothing planned, nothing launched
    [result] = ctx.results.tests
    assert (result.name, result.status) == ("gpu_leftovers", "fail")
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("stop: h0 GPU 0 (00000000:00:06.0") and "(kill 1068)" in line


def test_a_gpu_two_processes_hold_is_one_gpu_held(capsys: pytest.CaptureFixture[str]) -> None:
    facts = recorded("h200x4-leftover-85pct-gpu0.json")
    gpu0 = facts["gpus"]["devices"][0]
    gpu0["processes"].append({"pid": 2001, "used_mib": 512, "name": "python3", "user": "root"})
    ctx = context(1)
    ctx.results.hosts = {"h0": HostRecord("h0", facts=facts)}
    assert validate.run(ctx) == "stopped before the tests: 1 GPU(s) held by other processes (gpu_leftovers)"
    assert ctx.results.tests[0].metrics == {"gpus_held": 1}
    assert [line.split(": ")[2] for line in capsys.readouterr().err.splitlines()] == [
        "PID 1068 (python3, user root) holds 122204 MiB",
        "PID 2001 (python3, user root) holds 512 MiB",
    ]  # each process named, on a line of its own


def test_warn_lets_validate_go_on(capsys: pytest.CaptureFixture[str]) -> None:
    ctx = context(1, gpu_leftovers="warn")
    ctx.results.hosts = {"h0": HostRecord("h0", facts=recorded("h200x4-leftover-85pct-gpu0.json"))}
    assert validate.held_gpus(ctx) == ""
    assert [t.status for t in ctx.results.tests] == ["skipped"]
    assert capsys.readouterr().err.startswith("warning: h0 GPU 0 (")


def test_the_setting_takes_stop_or_warn() -> None:
    assert settings_from({"pav_gpu_leftovers": "warn"}, "pav.yml").gpu_leftovers == "warn"
    with pytest.raises(PavError, match=r"pav.yml: pav_gpu_leftovers must be stop or warn, got 'ignore'"):
        settings_from({"pav_gpu_leftovers": "ignore"}, "pav.yml")


def with_host_memory(
    facts: dict[str, Any], recording: str, available_kb: int | None = None
) -> dict[str, Any]:
    """The host's memory as the recording's /proc/meminfo said it, or with only `available_kb` available."""
    meminfo = json.loads((NODE_STATE / recording).read_text())["host_memory"]
    total = int(meminfo["MemTotal"].split()[0])
    available = int(meminfo["MemAvailable"].split()[0]) if available_kb is None else available_kb
    facts["gpus"]["host_memory"] = {"total_mib": total // 1024, "available_mib": available // 1024}
    return facts


def test_host_memory_held_before_the_tests_is_a_user_problem_and_an_idle_hosts_is_not() -> None:
    idle = with_host_memory(recorded("h200x4-idle-1.json"), "h200x4-idle-1.json")
    assert leftovers.find(host(idle)) == {"gpu-node": []}
    held = with_host_memory(recorded("h200x4-idle-1.json"), "h200x4-idle-1.json", available_kb=100 * 1024**2)
    [found] = leftovers.find(host(held))["gpu-node"]
    total = held["gpus"]["host_memory"]["total_mib"]
    assert (found.gpu, found.problem) == ("host memory", f"only 102400 of {total} MiB available before the "
                                          "tests (under 50%)")  # fmt: skip
    assert found.fix() == "end what holds it (ps aux --sort=-rss | head)"
    [result] = leftovers.results({"gpu-node": [found]}, "stop")
    assert result.status == "fail" and result.metrics == {"gpus_held": 0, "host_memory_held": 1}
    [part] = bad_parts.find({"tests": [vars(result)]})
    assert (
        part.line().startswith("gpu-node host memory (a user problem): ")
        and "user problem" in part.worst.cause
    )
