"""Clock violation time over the run (issue 63). clock_event_reasons is read at configure and after the tests,
both with the GPUs idle, so a GPU that throttles under load is never seen throttling there. NVML also counts,
per perf policy, the time the GPU's clocks were held under what was asked since the driver loaded
(nvmlDeviceGetViolationStatus, facts.gpus' counters.violations, in ns); the change between the two reads is
the time it throttled during the tests, whatever they were.

Thermal and sync-boost time over SHARE of the time between the reads fails, naming the GPU and the policy.
Power-cap time is recorded, not judged: a GPU at its power limit under dense GEMMs is how it is meant to run
(every 2-s sample of the healthy H200 burn-ins read sw_power_cap, none a thermal reason), and what it costs
shows in the throughput gates. Board-limit and low-utilization time are recorded too (low utilization
counts whenever the GPU waits for work, as between tests). A read without the counters judges nothing.
"""

from __future__ import annotations

from typing import Any

# Thermal and sync-boost time over 1% of the run fails: healthy GPUs read none under load (the H200
# burn-ins: no thermal reason in any sample), and 1% leaves room for the short holds at a load step
# that a count in ns registers and no figure feels, while a GPU that throttles for heat for a second
# in every 100 is named before the throughput gates (4-5% under healthy figures) can see it.
SHARE = 0.01
JUDGED = {
    "thermal": "the GPU held its clocks back for heat under load",
    "sync_boost": "the GPU held its clocks to a slower GPU of its sync-boost group",
}
POLICIES = ("power", "thermal", "sync_boost", "board_limit", "low_utilization")


def violation_seconds(before: dict[str, Any], after: dict[str, Any]) -> dict[str, float]:
    """Per policy read both times, the seconds it held the GPU's clocks back between the reads: {} for a
    read without the counters (facts before issue 63, the nvidia-smi fallback)."""
    then, now = before.get("violations"), after.get("violations")
    if not isinstance(then, dict) or not isinstance(now, dict):
        return {}
    out = {}
    for policy in POLICIES:
        first, last = then.get(f"{policy}_ns"), now.get(f"{policy}_ns")
        # A count that went back is a driver reloaded between the reads: that policy says nothing.
        if isinstance(first, int) and isinstance(last, int) and last >= first:
            out[policy] = round((last - first) / 1e9, 3)
    return out


def violation_problems(label: str, held: dict[str, float], seconds: float) -> list[tuple[str, str]]:
    """(part, problem) for each judged policy that held the GPU back over SHARE of the time between reads."""
    out = []
    for policy, meaning in JUDGED.items():
        spent = held.get(policy)
        if spent is not None and spent > SHARE * seconds:
            words = policy.replace("_", "-")
            out.append((label, f"{label}: {words} violation {spent:.1f} s of the {seconds:.1f} s run "
                        f"({spent / seconds:.1%}): {meaning}"))  # fmt: skip
    return out


def counted(counters: dict[str, Any]) -> bool:
    """Whether a GPU's counters hold a violation time that was read."""
    found = counters.get("violations")
    return isinstance(found, dict) and any(found.get(f"{p}_ns") is not None for p in POLICIES)
