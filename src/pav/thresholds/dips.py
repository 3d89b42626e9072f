"""A dip that repeats (issue 63): the probe copies between each GPU and host memory in rounds, records every
round (`h2d_gbps_rounds`, ...) and reports their median as the figure the other gates judge. One round far
under the GPU's best is a stall of the host's memory (a healthy 4x H100 read 28 of 55 GB/s in one round,
docs/benchmarks.md "Issue 36"): the median stays healthy and nothing fails. A dip in two or more rounds of
one GPU is a link that comes and goes (retraining, replays, a marginal riser), which a median or a best
round hides: that GPU fails, named with the rounds that dipped.

A round dips when it is under `host_copy_round` (thresholds/hardware/fractions.yml) x the GPU's own best
round. With the probe's 3 rounds, two dips are exactly a median under that share of the best; the gate needs
nothing but the GPU's own rounds (no peer, no datasheet). Only the copies of each GPU alone are judged: with
every GPU copying at once the host's shared path sets the figure, and its level moved by half between
healthy one-round runs of one 4x H100 (23.8-51.8 GB/s D2H over 9 runs), so a dip there says nothing of one
GPU. A record without rounds (a probe before issue 63) gets no dip gate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pav.thresholds.derive import Fraction, fractions

ROUNDS = "_rounds"  # the probe's key for a figure's every round: h2d_gbps_rounds
JUDGED = ("h2d_gbps", "d2h_gbps")  # each GPU's host copies alone
BASIS = "rounds"
REPEATS = 2  # dipped rounds that fail a GPU: one is a stall of the host, two a link that comes and goes
MIN_ROUNDS = 3  # fewer cannot tell a dip from the figure: with 2, one of them is the best


@dataclass(frozen=True)
class Dip:
    """One GPU's rounds of one host copy figure, judged against its own best round."""

    metric: str  # h2d_gbps
    key: str  # the GPU's key in the metrics ("1")
    part: str  # the GPU's label
    rounds: tuple[float, ...]
    fraction: float

    @property
    def best(self) -> int:
        """The index of the best round (the first, of equals)."""
        return max(range(len(self.rounds)), key=lambda i: (self.rounds[i], -i))

    @property
    def floor(self) -> float:
        return self.fraction * self.rounds[self.best]

    @property
    def dipped(self) -> list[int]:
        return [i for i, value in enumerate(self.rounds) if value < self.floor]

    def record(self) -> dict[str, Any]:
        """The gate as results.json records gates: the number of rounds that dipped, at most REPEATS - 1."""
        dipped = self.dipped
        status = "fail" if len(dipped) >= REPEATS else "pass"
        out: dict[str, Any] = {
            "metric": f"{self.metric}{ROUNDS}.{self.key}",
            "basis": BASIS,
            "part": self.part,
            "source": (
                f"rounds under {self.fraction:g} x the GPU's best round ({self.rounds[self.best]:.4g} GB/s, "
                f"round {self.best + 1} of {len(self.rounds)}); {REPEATS} or more fail"
            ),
            "max": REPEATS - 1,
            "value": len(dipped),
            "status": status,
        }
        if status != "pass":
            out["reason"] = self.reason()
        return out

    def reason(self) -> str:
        """GPU 1 (...): h2d_gbps dipped in rounds 1 and 3 of 3 (28.1, 27.9 GB/s against 55.2 in round 2)"""
        dipped = self.dipped
        which = ", ".join(str(i + 1) for i in dipped[:-1]) + f" and {dipped[-1] + 1}"
        values = ", ".join(f"{self.rounds[i]:.4g}" for i in dipped)
        return (
            f"{self.part}: {self.metric} dipped in rounds {which} of {len(self.rounds)} ({values} GB/s "
            f"against {self.rounds[self.best]:.4g} in round {self.best + 1}): {REPEATS} or more rounds under "
            f"{self.fraction:g} x the GPU's best round"
        )


def dip_checks(metrics: dict[str, Any], labels: dict[str, str]) -> list[dict[str, Any]]:
    """Every GPU's dip gate on each judged figure whose rounds the probe recorded, as results.json records
    gates; labels: the host's GPUs by their metrics key (a GPU not in them is named by its key)."""
    frac = round_fraction()
    out = []
    for metric in JUDGED:
        per_gpu = metrics.get(metric + ROUNDS)
        if not isinstance(per_gpu, dict):
            continue  # recorded before issue 63: no rounds, no dip gate
        for key in sorted(per_gpu, key=_gpu_order):
            rounds = _numbers(per_gpu[key])
            if len(rounds) >= MIN_ROUNDS:
                part = labels.get(str(key), f"GPU {key}")
                out.append(Dip(metric, str(key), part, rounds, frac.value).record())
    return out


def round_fraction() -> Fraction:
    return fractions()["relative"]["host_copy_round"]


def _numbers(raw: Any) -> tuple[float, ...]:
    if not isinstance(raw, list):
        return ()
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in raw):
        return ()
    return tuple(float(v) for v in raw)


def _gpu_order(key: str) -> tuple[int, str]:
    return (int(key), key) if str(key).isdigit() else (1 << 30, str(key))
