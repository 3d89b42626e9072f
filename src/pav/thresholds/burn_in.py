"""The burn-in gates: pure functions of a burn-in test's per-GPU time series (burn_series.py), applied by
the run's Judge (thresholds/apply.py) after the profile's gates. Each GPU must:

- end as fast as it began: last window TFLOP/s >= 0.9 x its first window (heat, power, a neighbour);
- keep up with its host: last window >= 0.9 x the host's best GPU's last window;
- never be held back by a hardware or thermal reason (health.THROTTLES: hw_slowdown, hw_thermal_slowdown,
  hw_power_brake_slowdown, sw_thermal_slowdown). sw_power_cap is not one: a GPU at its power limit under
  dense GEMMs is how it is meant to run (NVML: "SW Power Scaling algorithm is reducing the clocks below
  requested clocks"), and what it costs shows in the throughput gates;
- see no new uncorrectable ECC error (volatile count), and no fault Xid (health.FATAL_XIDS) in the kernel
  log. New corrected errors are recorded, not gated: single-bit errors are corrected by design, and a
  high rate of them raises Xid 92, which is gated;
- be sampled at all where it ran on CUDA: a GPU nothing was read from passes no gate.

A failing gate names the GPU (as health.py does) and the minute of the burn-in where it went wrong.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pav.thresholds.health import FATAL_XIDS, THROTTLES

FRACTION = 0.9
BASIS = "burn-in"


@dataclass(frozen=True)
class Check:
    metric: str
    part: str
    value: float | None
    min: float | None = None
    max: float | None = None
    source: str = ""
    why: str = ""  # the reason, where it fails

    @property
    def status(self) -> str:
        if self.value is None:
            return "not measured"
        low = self.min is not None and self.value < self.min
        high = self.max is not None and self.value > self.max
        return "fail" if low or high else "pass"

    def record(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "metric": self.metric,
            "basis": BASIS,
            "part": self.part,
            "source": self.source,
        }
        out |= {k: round(v, 3) for k, v in (("min", self.min), ("max", self.max)) if v is not None}
        out |= {"value": self.value, "status": self.status}
        if self.status != "pass":
            out["reason"] = self.why or f"{self.part}: {self.metric} not measured"
        return out


def burn_in_checks(metrics: dict[str, Any], labels: dict[str, str]) -> list[dict[str, Any]]:
    """Every gate of every GPU of one host's burn-in, as results.json records gates."""
    gpus = (metrics.get("burn_in") or {}).get("gpus") or {}
    best = _best(gpus)
    # Every GPU's name, the best one's too: a CPU rank of a test on CPUs is named as one, never "GPU N".
    idents = metrics.get("gpu") or {}
    names = {k: labels.get(k) or gpu_label(k, idents.get(k), gpus[k].get("device_type")) for k in gpus}
    out: list[Check] = []
    for key in sorted(gpus, key=gpu_order):
        out += gpu_checks(key, gpus[key], names[key], best, names)
    return [c.record() for c in out]


def gpu_checks(
    key: str, series: dict[str, Any], label: str, best: tuple[str, float] | None, labels: dict[str, str]
) -> list[Check]:
    windows = series.get("windows") or []
    out = [_against_first(key, windows, label)]
    if best is not None and best[0] != key:
        out.append(_against_best(key, windows, label, best, labels.get(best[0]) or f"GPU {best[0]}"))
    if series.get("device_type") == "cuda":
        out += _nvml_checks(key, series, label)
    return out


def _against_first(key: str, windows: list[dict[str, Any]], label: str) -> Check:
    metric = f"burn_in_last_tflops.{key}"
    if not windows:
        return Check(metric, label, None, why=f"{label}: no burn-in window was measured")
    first, last = windows[0]["tflops"], windows[-1]["tflops"]
    floor = FRACTION * first
    fell = next((w for w in windows if w["tflops"] < floor), windows[-1])
    why = (
        f"{label}: fell to {last:.4g} TFLOP/s (last window), under {FRACTION:g} x its first window's "
        f"{first:.4g}, first below it at {_when(fell)} ({fell['tflops']:.4g} TFLOP/s)"
    )
    return Check(metric, label, last, min=floor, source=f"{FRACTION:g} x its first window", why=why)


def _against_best(
    key: str, windows: list[dict[str, Any]], label: str, best: tuple[str, float], best_label: str
) -> Check:
    metric = f"burn_in_last_tflops.{key}"
    last = windows[-1]["tflops"] if windows else None
    floor = FRACTION * best[1]
    why = (
        f"{label}: {last if last is None else format(last, '.4g')} TFLOP/s in the last window, under "
        f"{FRACTION:g} x the host's best GPU ({best_label}: {best[1]:.4g})"
    )
    return Check(metric, label, last, min=floor, source=f"{FRACTION:g} x the host's best GPU", why=why)


def _nvml_checks(key: str, series: dict[str, Any], label: str) -> list[Check]:
    windows = series.get("windows") or []
    if not series.get("samples"):
        why = f"{label}: no NVML sample during the burn-in ({series.get('nvml') or 'nothing read'})"
        return [Check(f"burn_in_throttled_windows.{key}", label, None, max=0, why=why)]
    throttled = [w for w in windows if _held_back(w)]
    seen = sorted({r for w in throttled for r in _held_back(w)})
    why = f"{label}: clocks held back by {', '.join(seen)} from {_when(throttled[0])}" if throttled else ""
    out = [Check(f"burn_in_throttled_windows.{key}", label, float(len(throttled)), max=0,
                 source="hardware and thermal clock event reasons", why=why)]  # fmt: skip
    new_ecc = series.get("new_ecc_uncorrected")
    if new_ecc is not None:
        start = windows[0].get("ecc_uncorrected") if windows else None
        grew = next((w for w in windows if (w.get("ecc_uncorrected") or 0) > (start or 0)), None)
        when = f" by {_when(grew)}" if grew else ""
        why = f"{label}: {new_ecc} new uncorrectable ECC errors during the burn-in{when}"
        out.append(Check(f"burn_in_new_ecc_uncorrected.{key}", label, float(new_ecc), max=0,
                         source="NVML volatile uncorrected ECC count", why=why))  # fmt: skip
    xids = [x for x in series.get("xids") or [] if x.get("xid") in FATAL_XIDS]
    why = ""
    if xids:
        why = f"{label}: Xid {xids[0].get('xid')} in the kernel log at {_minute(xids[0].get('t_s'))}"
        why += f" (and {len(xids) - 1} more)" if len(xids) > 1 else ""
    source = f"kernel log via {series.get('xid_source') or 'none'}"
    if series.get("xid_note"):
        source += f": {series['xid_note']}"
    out.append(Check(f"burn_in_fault_xids.{key}", label, float(len(xids)), max=0, source=source, why=why))
    return out


def _held_back(window: dict[str, Any]) -> list[str]:
    return sorted(THROTTLES & set(window.get("reasons") or []))


def _best(gpus: dict[str, Any]) -> tuple[str, float] | None:
    last = {k: g["windows"][-1]["tflops"] for k, g in gpus.items() if g.get("windows")}
    if len(last) < 2:
        return None
    key = max(last, key=lambda k: last[k])
    return key, float(last[key])


def _when(window: dict[str, Any]) -> str:
    start, end = float(window.get("start_s") or 0), float(window.get("end_s") or 0)
    return f"{_minute(start)} (the window {start:.0f}-{end:.0f} s into the burn-in)"


def _minute(t_s: Any) -> str:
    """Minute 1 is the burn-in's first minute (0-60 s)."""
    return f"minute {int(float(t_s or 0) // 60) + 1}"


def gpu_label(key: str, ident: Any, device_type: Any) -> str:
    """Without the host's facts: as the payload saw the GPU (a CPU rank of a test on CPUs by its rank)."""
    if device_type == "cpu":
        return f"local rank {key} (CPU)"
    ident = ident if isinstance(ident, dict) else {}
    ids = ", ".join(str(x) for x in (ident.get("pci_bus_id"), ident.get("uuid")) if x)
    return f"GPU {key} ({ids})" if ids else f"GPU {key}"


def gpu_order(key: str) -> tuple[int, str]:
    """Local GPU keys in index order ("10" after "9")."""
    return (int(key), key) if key.isdigit() else (1 << 30, key)
