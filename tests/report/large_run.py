"""A run of 64 hosts x 8 GPUs, sim-x-0 .. sim-x-63, synthesised from real runs' records (issue 65): no
such cluster ran here, but every figure, gate and reason is one a real run recorded.

Each host is the healthy 4-GPU H100 run (tests/thresholds/fixtures/h100x4-healthy) with its GPUs doubled
to 8 (GPU i measures what the record's GPU i % 4 did). Two things are bad:
- GPU 5 of sim-x-37 computes at 277.1 TFLOP/s, the hogged GPU of h100x4-gpu-busy, its gates failing;
- sim-x-12 is the slow node: its collectives are those of h100x4-gpu-busy (failing), and the all_reduce
  across the 64 hosts (h100x4-split-socket's as today's gates judge it, failing) names it as isolation's one
  suspect.
healthy_run() is the same 64 hosts with nothing bad (a PASS). linked_run() is the run with a link at fault
instead: the all_reduce across the 64 hosts passes on each rack alone (sim-x-[0-31] in r0, sim-x-[32-63] in
r1) and fails in every pair across them, as isolation's own search (pav.isolation.isolate) finds on a model
of the racks.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import asdict
from pathlib import Path
from typing import Any

from pav.commands.judge import rejudge
from pav.isolation import Step, isolate, to_record
from pav.results import HostRecord, RunResults, StageRecord, TestResult

FIXTURES = Path(__file__).parents[1] / "thresholds" / "fixtures"
HOSTS = tuple(f"sim-x-{i}" for i in range(64))
GPUS = 8
BAD_HOST, BAD_GPU, SLOW_HOST = "sim-x-37", "5", "sim-x-12"
BAD_TFLOPS = 277.1
RACKS = {h: "r0" if i < len(HOSTS) // 2 else "r1" for i, h in enumerate(HOSTS)}  # linked_run's racks
PER_GPU = re.compile(r"^([a-z0-9_]+)\.(\d+)$")
PAIR = re.compile(r"^p2p_gbps\.(\d+)\.(\d+)$")
FIELDS = set(TestResult.__dataclass_fields__)  # a recorded test's keys a TestResult takes


def record(fixture: str) -> dict[str, Any]:
    return json.loads((FIXTURES / fixture / "results.json").read_text())


def run() -> RunResults:
    healthy, busy = record("h100x4-healthy"), record("h100x4-gpu-busy")
    tests = [t for host in HOSTS for t in host_tests(healthy, host)]
    for test in tests:
        if test["name"] == "gpu_probe" and test["hosts"] == [BAD_HOST]:
            slow_gpu(test, BAD_GPU)
    slow = {t["name"]: t for t in busy["tests"] if t["status"] == "fail" and t["name"] != "gpu_probe"}
    tests = [on_host(slow[t["name"]], SLOW_HOST) if t["hosts"] == [SLOW_HOST] and t["name"] in slow else t
             for t in tests]  # fmt: skip
    tests.append(across_hosts(judged("h100x4-split-socket", "torch_nccl_allreduce_multi")))
    facts = copy.deepcopy(healthy["hosts"]["localhost"]["facts"])
    facts["gpu"]["count"] = GPUS
    gate_record = copy.deepcopy(healthy["gates"]["localhost"])
    gate_record["facts_used"]["gpus"] = GPUS
    why = f"every pair re-run that includes {SLOW_HOST} is slow"
    suspect = {"host": SLOW_HOST, "reason": why, "evidence": []}
    isolation = {"suspects": [suspect], "steps": [], "note": ""}
    return RunResults(
        "20261129T060000.000Z-sim", "sim", "terraform/envs/sim", "/runs/large", "h100-sxm-8gpu", "auto",
        stages=[StageRecord(**s) for s in healthy["stages"]],
        hosts={h: HostRecord(h, status="ok", facts=copy.deepcopy(facts)) for h in HOSTS},
        tests=[result(t) for t in tests],
        verdict="FAIL", isolation=isolation, gates={h: copy.deepcopy(gate_record) for h in HOSTS},
        timing=healthy.get("timing") or {},
    )  # fmt: skip


def healthy_run() -> RunResults:
    """The run with nothing bad: each host as the healthy record, no test across hosts; a PASS."""
    healthy, out = record("h100x4-healthy"), run()
    out.tests = [result(t) for host in HOSTS for t in host_tests(healthy, host)]
    out.verdict, out.isolation = "PASS", {"suspects": [], "steps": [], "note": ""}
    return out


def result(test: dict[str, Any]) -> TestResult:
    return TestResult(**{k: v for k, v in test.items() if k in FIELDS})


def linked_run() -> RunResults:
    """The run, the all_reduce across the hosts failing for a link between the racks, not for a host."""
    linked = run()
    multi = linked.tests[-1].name

    def run_round(test: str, n: int, groups: list[list[str]]) -> list[Step]:
        across = [len({RACKS[h] for h in group}) > 1 for group in groups]
        return [Step(test, g, "fail" if x else "pass", "busbw below its gate" if x else "", n)
                for g, x in zip(groups, across, strict=True)]  # fmt: skip

    found = isolate(multi, list(HOSTS), run_round, RACKS)
    linked.isolation = to_record(found.suspects, found.steps, "", found.links)
    return linked


def host_tests(healthy: dict[str, Any], host: str) -> list[dict[str, Any]]:
    tests = [on_host(t, host) for t in healthy["tests"]]
    for test in tests:
        if test["name"] == "gpu_probe":
            widen(test)
    return tests


def on_host(test: dict[str, Any], host: str) -> dict[str, Any]:
    """The record's test as it ran on localhost, moved to `host`."""
    return json.loads(json.dumps(test).replace('"localhost"', json.dumps(host)).replace("localhost", host))


def judged(fixture: str, name: str) -> dict[str, Any]:
    """A test of a recorded run as today's gates judge it (its recorded status predates the references)."""
    return next(asdict(r.test) for r in rejudge(FIXTURES / fixture).tests if r.test.name == name)


def across_hosts(test: dict[str, Any]) -> dict[str, Any]:
    """A test across the record's two nodes, spread over the 64 hosts."""
    moved = json.loads(json.dumps(test).replace("node-a", SLOW_HOST).replace("node-b", "sim-x-13"))
    moved["hosts"] = list(HOSTS)
    return moved


def widen(probe: dict[str, Any]) -> None:
    """gpu_probe of 4 GPUs as one of GPUS: GPU i measures what GPU i % 4 did, pair (i, j) what the pair of
    their sources did (or, sharing one, the source's pair with the next GPU)."""
    metrics = probe["metrics"]
    count = int(metrics["gpu_count"])
    for key, value in list(metrics.items()):
        if key in ("p2p_gbps", "p2p_access"):
            metrics[key] = {str(i): {str(j): value[_src(i, count)][_pair_src(i, j, count)]
                                     for j in range(GPUS) if j != i} for i in range(GPUS)}  # fmt: skip
        elif isinstance(value, dict) and set(value) == {str(i) for i in range(count)}:
            metrics[key] = {str(i): copy.deepcopy(value[_src(i, count)]) for i in range(GPUS)}
    for i, info in metrics["gpu"].items():
        info["pci_bus_id"] = f"00000000:{0x18 + int(i) * 0x10:02X}:00.0"
        info["uuid"] = info["uuid"][:-2] + f"{int(i):02d}"
    metrics["gpu_count"] = metrics["world_size"] = metrics["ranks_reported"] = GPUS
    probe["threshold"]["gates"] = widened_gates(probe["threshold"]["gates"], metrics, count)


def widened_gates(gates: list[dict[str, Any]], metrics: dict[str, Any], count: int) -> list[dict[str, Any]]:
    out = [g for g in gates if not PER_GPU.match(g["metric"]) and not PAIR.match(g["metric"])]
    for i in range(GPUS):
        for gate in gates:
            match = PER_GPU.match(gate["metric"])
            if match and not PAIR.match(gate["metric"]) and match.group(2) == _src(i, count):
                out.append(gate | {"metric": f"{match.group(1)}.{i}", "part": label(metrics, str(i))})
    for i in range(GPUS):
        for j in (j for j in range(GPUS) if j != i):
            src = (_src(i, count), _pair_src(i, j, count))
            for gate in gates:
                if (match := PAIR.match(gate["metric"])) and match.groups() == src:
                    out.append(gate | {"metric": f"p2p_gbps.{i}.{j}", "part": f"GPU {i} -> GPU {j}"})
    return out


def slow_gpu(probe: dict[str, Any], gpu: str) -> None:
    """GPU `gpu` computes at BAD_TFLOPS: its GEMM gates fail, as the hogged GPU's did."""
    probe["metrics"]["gemm_bf16_tflops"][gpu] = BAD_TFLOPS
    metric, reasons = f"gemm_bf16_tflops.{gpu}", []
    for gate in probe["threshold"]["gates"]:
        if gate["metric"] == metric:
            gate["value"], gate["status"] = BAD_TFLOPS, "fail"
            gate["reason"] = f"{gate['part']}: {metric} {BAD_TFLOPS} TFLOP/s, expected >= {gate['min']:.4g}"
            reasons.append(gate["reason"])
    probe["status"], probe["reason"] = "fail", "; ".join(reasons)


def label(metrics: dict[str, Any], gpu: str) -> str:
    info = metrics["gpu"][gpu]
    return f"GPU {gpu} ({info['pci_bus_id']}, {info['uuid']})"


def _src(i: int, count: int) -> str:
    return str(i % count)


def _pair_src(i: int, j: int, count: int) -> str:
    return str(j % count if j % count != i % count else (i + 1) % count)
