"""Fleet-relative gates (issue 63): in a run of two or more hosts, each host's figure of a test against the
median of the same figure on the run's other hosts, and each GPU's against the other GPUs of the run.

With several nodes the run itself is the best reference: a node or GPU that falls behind its peers is the
fault, whatever its datasheet says. A synchronous job across hosts runs every rank at the slowest node's pace,
so a slow node is named from figures each host measured alone: its own training, collectives and GPU probe.
Each is held to the median of the others (with two hosts, the other one) less a tolerance: the figure's
healthy spread between machines (FLOORS), widened where the others themselves spread more (3 x their scaled
median absolute deviation, with three or more others), so three near-identical nodes do not turn 0.5% into
an outlier and a noisy figure is not judged tighter than it is measured.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass

from pav.catalog import spec_of
from pav.results import TestResult
from pav.thresholds.derive import UNITS
from pav.thresholds.gate import lookup
from pav.thresholds.hardware import HostHardware, given_gpus

BIG = "8589934592"
# Figure -> its floor: the healthy spread between machines of one model (docs/thresholds.md, "Reference
# figures": training 0.2-0.5%, collectives 2.6-3.4%, GEMM 2-4% between GPUs of one host and across
# machines), with room: a node 7% slow must fail.
TRAINING = {"tokens_per_s_per_rank_min": 0.04, "samples_per_s_per_rank_min": 0.04,
            "tokens_per_s_steady_per_rank_min": 0.04}  # fmt: skip
OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "send_recv")
COLLECTIVES = {f"busbw_gbps.{op}.{BIG}": 0.04 for op in OPS}
PER_HOST = TRAINING | COLLECTIVES | {f"busbw_gbps.{BIG}": 0.04}
PER_GPU = {"gemm_bf16_tflops": 0.05, "hbm_copy_gbps": 0.04}
# Within one test across hosts: a figure each host measured for itself (its ranks' own work, not the
# collective's wait, which a straggler imposes on every rank of the world). Only the FOR TESTING plain ranks'
# step rate (--step-s, pav.evaluate.step_rates) so far: a sleep, so its floor is wide (a host at half its
# peers' rate is a fault, not a loaded machine's jitter) and the others' spread does not widen it further.
STEP_RATES = "steps_per_s_per_host"
IN_TEST = {STEP_RATES: 0.5}
# A test whose median moves more than the faults (catalog's steady_only: FSDP) is compared by its steady
# figure alone.
UNSTEADY = ("tokens_per_s_per_rank_min", "samples_per_s_per_rank_min")
MAD_SCALE = 1.4826  # a normal distribution's sigma per median absolute deviation
MAD_WIDTH = 3.0
MIN_OTHERS_FOR_MAD = 3


@dataclass(frozen=True)
class Peer:
    host: str
    part: str  # the host, or a GPU's label on it
    value: float
    key: str = ""  # a GPU's key in its test's metrics (the probe's), "" for a host's figure


def fleet_gates(tests: list[TestResult], hardware: dict[str, HostHardware]) -> None:
    """Add each host-scope test's fleet gates to its result and fail what falls behind its peers. Only hosts
    of one GPU model and count are compared (a mixed fleet is compared within each shape), and only results
    of one workload fingerprint."""
    groups: dict[tuple[str, str, str, int], list[TestResult]] = defaultdict(list)
    for test in tests:
        if len(test.hosts) != 1 or test.status not in ("pass", "fail"):
            continue
        hw = hardware.get(test.hosts[0])
        if hw is None or not hw.gpus:
            continue
        shape = (test.name, str(test.workload.get("fingerprint", "")), hw.model, len(hw.gpus))
        groups[shape].append(test)
    for members in groups.values():
        if len(members) >= 2:
            _judge_group(members, hardware)


def _judge_group(members: list[TestResult], hardware: dict[str, HostHardware]) -> None:
    spec = spec_of(members[0].name)
    skipped = UNSTEADY if spec is not None and spec.steady_only else ()
    for metric, floor in PER_HOST.items():
        if metric in skipped:
            continue
        peers = [
            Peer(t.hosts[0], t.hosts[0], v) for t in members if (v := lookup(t.metrics, metric)) is not None
        ]
        _check(members, metric, peers, floor, "host")
    for family, floor in PER_GPU.items():
        peers = []
        for test in members:
            row = test.metrics.get(family)
            hw = given_gpus(hardware[test.hosts[0]], test.metrics)
            labels = {g.metric_key: g.label() for g in hw.gpus}
            if isinstance(row, dict):
                peers += [
                    Peer(test.hosts[0], f"{test.hosts[0]} {labels.get(str(k), f'GPU {k}')}", float(v), str(k))
                    for k, v in row.items()
                    if isinstance(v, int | float)
                ]
        _check(members, family, peers, floor, "GPU")


def _check(members: list[TestResult], metric: str, peers: list[Peer], floor: float, what: str) -> None:
    if len({p.host for p in peers}) < 2:
        return
    by_host = {t.hosts[0]: t for t in members}
    for peer in peers:
        gate = _gate(metric, peer, peers, floor, what)
        if gate is not None:
            _record(by_host[peer.host], gate)


def straggler_gates(tests: list[TestResult]) -> None:
    """Each host of a test across hosts against the median of the test's other hosts (IN_TEST): the
    straggler a synchronous job waits for, named by its own figure. Also a pair of isolation's re-runs: the
    slower host of two fails."""
    for test in tests:
        if len(test.hosts) < 2 or test.status not in ("pass", "fail"):
            continue
        for metric, floor in IN_TEST.items():
            row = test.metrics.get(metric)
            if not isinstance(row, dict):
                continue
            peers = [
                Peer(str(h), str(h), float(v), str(h)) for h, v in row.items() if isinstance(v, int | float)
            ]
            if len({p.host for p in peers}) < 2:
                continue
            for peer in peers:
                gate = _gate(metric, peer, peers, floor, "host", widen=False)
                if gate is not None:
                    _record(test, gate)


def _gate(
    metric: str, peer: Peer, peers: list[Peer], floor: float, what: str, widen: bool = True
) -> dict[str, object] | None:
    """The peer's figure against the median of the other hosts' less a tolerance; None where that is 0."""
    hosts = {p.host for p in peers}
    others = [p.value for p in peers if p.host != peer.host]
    median = statistics.median(others)
    if median <= 0:
        return None
    tolerance = floor
    if widen and len(others) >= MIN_OTHERS_FOR_MAD:
        mad = statistics.median(abs(v - median) for v in others)
        tolerance = max(floor, MAD_WIDTH * MAD_SCALE * mad / median)
    minimum = round(median * (1 - tolerance), 3)
    path = f"{metric}.{peer.key}" if peer.key else metric
    source = f"fleet: {_whose(len(hosts) - 1, len(others), what)}, {median:.4g}, less {tolerance:.3g}"
    gate: dict[str, object] = {
        "metric": path, "min": minimum, "limit": round(median, 3), "fraction": round(1 - tolerance, 3),
        "basis": "fleet", "source": source, "part": peer.part, "value": peer.value,
    }  # fmt: skip
    passed = peer.value >= minimum
    gate["status"] = "pass" if passed else "fail"
    if not passed:
        unit = UNITS.get(metric.split(".")[0], "GB/s")
        gate["reason"] = (
            f"{peer.part}: {path} {peer.value:.4g} {unit}, expected >= {minimum:.4g} "
            f"= {1 - tolerance:.3g} x {median:.4g} ({source})"
        )
    return gate


def _record(test: TestResult, gate: dict[str, object]) -> None:
    if gate["status"] == "fail":
        _fail(test, str(gate["reason"]))
    test.threshold.setdefault("gates", []).append(gate)


def _whose(hosts: int, values: int, what: str) -> str:
    if what == "GPU":
        return f"the median of the {values} GPUs of the run's other {hosts} host{'s' if hosts > 1 else ''}"
    return "the other host's figure" if hosts == 1 else f"the median of the run's other {hosts} hosts"


def _fail(test: TestResult, reason: str) -> None:
    if test.status == "pass":
        test.status, test.reason = "fail", ""
    test.reason = "; ".join(r for r in (test.reason, reason) if r)
