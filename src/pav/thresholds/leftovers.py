"""GPUs that another process holds when the tests are about to start (issue 50): one `gpu_leftovers` result
per GPU host, from the facts configure read (facts.gpus: NVML's compute processes and memory in use; the
host's memory available, /proc/meminfo).

A leftover is a user problem, not the hardware's: a job that did not end, a notebook left open, someone
else's run. Tests on such a GPU fail with out-of-memory errors or run slow, and their gates then blame the
GPU or its links (issue 50 saw a healthy H100 called corrupt). So the run stops before its tests and says
which process to end (pav_gpu_leftovers: stop, the default), or goes on and says so (warn).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pav.results import HostRecord, TestResult
from pav.thresholds.hardware import device_bus_id, read_hardware

NAME = "gpu_leftovers"
CATEGORY = "user"  # the bad part's category: the user's to fix, not the hardware (bad_parts, causes)
# Memory in use that no process NVML lists accounts for: an idle H100 or H200 shows 0.5-0.6 GiB, the
# driver's own (tests/payload/fixtures/node-state). More is held from where this host cannot see: a process
# of another container or PID namespace.
UNSEEN_MIB = 2048
# Host memory available on a GPU node before its tests, as a share of the total: an idle node has nearly all
# of it (263 of 264 GB on the 2x H200 recording; the page cache counts as available). Under half is a process
# holding the host (a job's data loader, a leftover notebook): the tests' pinned copies and loaders then
# starve or the OOM killer ends a rank.
HOST_AVAILABLE = 0.5
HOST_MEMORY = "host memory"  # the part a host-memory leftover names
WARN = "set pav_gpu_leftovers: warn to run the tests anyway (docs/configuration.md)"


@dataclass(frozen=True)
class Leftover:
    host: str
    gpu: str  # the GPU's label, as gpu_health and the speed gates name it
    problem: str  # what holds it: "PID 1068 (python3, user root) holds 122204 MiB"
    pid: int | None = None  # None: memory held by no process this host can see
    hint: str = ""  # how to clear it, where no PID says

    def fix(self) -> str:
        if self.pid:
            return f"end it (kill {self.pid})"
        return self.hint or "end what holds it (nvidia-smi on the machine)"

    def line(self) -> str:
        """The run's one line about this GPU: what holds it and how to clear it."""
        user = f"a user problem, not the hardware: {self.fix()}, or {WARN}"
        return f"{self.host} {self.gpu}: {self.problem}: {user}"


def find(hosts: dict[str, HostRecord]) -> dict[str, list[Leftover]]:
    """The leftovers of each GPU host whose facts read the GPUs' processes (NVML); hosts without are left
    out (CPU hosts, nvidia-smi's fallback, facts read before this check existed)."""
    found = {}
    for name, record in hosts.items():
        devices = _devices(name, record.facts)
        if devices is not None:
            found[name] = [x for label, device in devices for x in _held(name, label, device)]
            found[name] += _host_held(name, record.facts["gpus"].get("host_memory"))
    return found


def _host_held(host: str, memory: Any) -> list[Leftover]:
    """The host's memory, where less than HOST_AVAILABLE of it is available before the tests."""
    if not isinstance(memory, dict):
        return []
    total, available = memory.get("total_mib"), memory.get("available_mib")
    if not isinstance(total, int) or not isinstance(available, int) or available >= total * HOST_AVAILABLE:
        return []
    problem = f"only {available} of {total} MiB available before the tests (under {HOST_AVAILABLE:.0%})"
    return [Leftover(host, HOST_MEMORY, problem, hint="end what holds it (ps aux --sort=-rss | head)")]


def results(found: dict[str, list[Leftover]], policy: str) -> list[TestResult]:
    """One result per host: pass, fail naming each GPU held (stop), or skipped saying so (warn)."""
    out = []
    for host, leftovers in found.items():
        problems = [f"{x.gpu}: {x.problem}" for x in leftovers]
        metrics = {"gpus_held": len({x.gpu for x in leftovers if x.gpu != HOST_MEMORY})}
        why = "no process but the run's holds a GPU when the tests start (facts.gpus: NVML)"
        threshold: dict[str, Any] = {"gates": [{"metric": "gpus_held", "max": 0, "why": why}]}
        if any(x.gpu == HOST_MEMORY for x in leftovers):
            metrics["host_memory_held"] = 1
            why_host = (
                f"at least {HOST_AVAILABLE:.0%} of the host's memory available (facts.gpus.host_memory)"
            )
            threshold["gates"].append({"metric": "host_memory_held", "max": 0, "why": why_host})
        if leftovers:
            threshold["problems"] = [
                {"part": x.gpu, "problem": x.problem, "category": CATEGORY} for x in leftovers
            ]
        if not leftovers:
            status, reason = "pass", ""
        elif policy == "warn":
            status, reason = "skipped", "not judged (pav_gpu_leftovers: warn): " + "; ".join(problems)
        else:
            status, reason = "fail", "; ".join(problems)
        out.append(TestResult(NAME, [host], status, reason, metrics, threshold))
    return out


def _devices(host: str, facts: dict[str, Any]) -> list[tuple[str, dict[str, Any]]] | None:
    """(label, NVML device facts) of each GPU the host owns; None where the processes were not read."""
    gpus = facts.get("gpus")
    if not isinstance(gpus, dict) or gpus.get("source") != "nvml" or not gpus.get("devices"):
        return None
    devices = gpus["devices"]
    if not any(isinstance(d.get("processes"), list) for d in devices):
        return None
    # A host given part of a machine's GPUs (preflight_gpu_ids) answers for those alone: NVML lists all.
    owned = {gpu.bus_id: gpu.label() for gpu in read_hardware(host, facts).gpus}
    return [(owned[bus], d) for d in devices if (bus := device_bus_id(d)) in owned]


def _held(host: str, label: str, device: dict[str, Any]) -> list[Leftover]:
    processes = device.get("processes")
    if not isinstance(processes, list):
        return []
    out = [Leftover(host, label, _process(p), int(p["pid"])) for p in processes]
    used = device.get("memory_used_mib")
    if not processes and isinstance(used, int) and used > UNSEEN_MIB:
        total = device.get("memory_total_mib")
        of = f" of {total}" if isinstance(total, int) else ""
        unseen = f"{used} MiB{of} in use by no process this host can see (one of another container?)"
        out.append(Leftover(host, label, unseen))
    return out


def _process(p: dict[str, Any]) -> str:
    who = ", ".join(x for x in (p.get("name"), f"user {p['user']}" if p.get("user") else None) if x)
    holds = f"holds {p['used_mib']} MiB" if isinstance(p.get("used_mib"), int) else "holds it"
    return f"PID {p['pid']}{f' ({who})' if who else ''} {holds}"
