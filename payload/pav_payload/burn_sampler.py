"""What a GPU reports of itself while gpu_burn loads it: NVML every few seconds (SM clock, temperature,
power, clock event reasons, volatile ECC counts) and the kernel log's Xid lines for its bus id, in a thread
beside the rank's work. A source that cannot be read is recorded with why (no pynvml, a kernel log the user
may not read), never raised: the driver's gates decide what its absence means.
"""

from __future__ import annotations

import contextlib
import importlib
import threading
import time
from dataclasses import asdict, dataclass, field
from types import ModuleType
from typing import Any

from pav_payload.gpu_facts.commands import run_command
from pav_payload.gpu_facts.decode import decode_clock_reasons, normalize_bus_id
from pav_payload.gpu_facts.xid import parse_xid_lines, scan_xid


@dataclass
class Sample:
    t_s: float  # seconds since the burn-in's first window began
    sm_mhz: int | None = None
    temp_c: int | None = None
    power_w: float | None = None
    reasons: list[str] = field(default_factory=list)
    ecc_uncorrected: int | None = None
    ecc_corrected: int | None = None


@dataclass
class XidSeen:
    t_s: float
    xid: int
    line: str


@dataclass
class Sampled:
    samples: list[Sample]
    xids: list[XidSeen]
    nvml: str  # "" when NVML answered, else why not
    xid_source: str  # dmesg | journalctl | none
    xid_note: str

    def record(self) -> dict[str, Any]:
        return {
            "samples": [asdict(s) for s in self.samples],
            "xids": [asdict(x) for x in self.xids],
            "nvml": self.nvml,
            "xid_source": self.xid_source,
            "xid_note": self.xid_note,
        }


class Sampler:
    """Started before the first window (t0), stopped after the last; one more sample at the stop."""

    def __init__(self, bus_id: str | None, sample_s: float, xid_every_s: float, t0: float) -> None:
        self.bus_id = normalize_bus_id(bus_id) if bus_id else ""
        self.sample_s, self.xid_every_s, self.t0 = sample_s, xid_every_s, t0
        self.samples: list[Sample] = []
        self.xids: list[XidSeen] = []
        self.nvml, self.handle, self.why = _open_nvml(self.bus_id)
        self._known_lines: set[str] = set()
        self.xid_source, self.xid_note = "none", ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="pav-burn-sampler", daemon=True)

    def start(self) -> Sampler:
        self._scan_xid(baseline=True)
        self._sample()
        self._thread.start()
        return self

    def stop(self) -> Sampled:
        self._stop.set()
        self._thread.join(timeout=60)
        self._sample()
        self._scan_xid(baseline=False)
        if self.nvml is not None:
            # Shutting down NVML must not cost the rank its report.
            with contextlib.suppress(Exception):
                self.nvml.nvmlShutdown()
        return Sampled(self.samples, self.xids, self.why, self.xid_source, self.xid_note)

    def _loop(self) -> None:
        next_xid = time.monotonic() + self.xid_every_s
        while not self._stop.wait(self.sample_s):
            self._sample()
            if time.monotonic() >= next_xid:
                self._scan_xid(baseline=False)
                next_xid += self.xid_every_s

    def _now(self) -> float:
        return round(time.monotonic() - self.t0, 3)

    def _sample(self) -> None:
        if self.nvml is None:
            return
        self.samples.append(read_sample(self.nvml, self.handle, self._now()))

    def _scan_xid(self, baseline: bool) -> None:
        if not self.bus_id:
            return  # a CPU rank: no GPU of its own in the kernel log
        scan = scan_xid(run_command)
        self.xid_source, self.xid_note = scan.source, scan.missing
        lines = [e.line for e in scan.events if normalize_bus_id(e.pci_bus_id) == self.bus_id]
        fresh = [line for line in lines if line not in self._known_lines]
        self._known_lines.update(lines)
        if not baseline:
            for event in parse_xid_lines("\n".join(fresh)):
                self.xids.append(XidSeen(self._now(), event.xid, event.line))


def read_sample(nvml: ModuleType, handle: Any, t_s: float) -> Sample:
    """One reading; a field the GPU does not support stays None."""
    sample = Sample(t_s)
    sample.sm_mhz = _try(lambda: int(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)))
    sample.temp_c = _try(lambda: int(nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU)))
    sample.power_w = _try(lambda: round(nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0, 1))
    read = (
        getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
        or nvml.nvmlDeviceGetCurrentClocksThrottleReasons
    )
    sample.reasons = _try(lambda: decode_clock_reasons(int(read(handle)))) or []
    volatile, errors = nvml.NVML_VOLATILE_ECC, nvml.nvmlDeviceGetTotalEccErrors
    uncorrected, corrected = nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nvml.NVML_MEMORY_ERROR_TYPE_CORRECTED
    sample.ecc_uncorrected = _try(lambda: int(errors(handle, uncorrected, volatile)))
    sample.ecc_corrected = _try(lambda: int(errors(handle, corrected, volatile)))
    return sample


def _try(read: Any) -> Any:
    try:
        return read()
    except Exception:  # NotSupported on this board, or NVML lost the GPU: the field stays unread
        return None


def _open_nvml(bus_id: str) -> tuple[ModuleType | None, Any, str]:
    if not bus_id:
        return None, None, "no GPU: a CPU rank has nothing to sample"
    try:
        nvml = importlib.import_module("pynvml")
        nvml.nvmlInit()
    except Exception as exc:
        return None, None, f"NVML unavailable: {type(exc).__name__}: {exc}"
    try:
        return nvml, nvml.nvmlDeviceGetHandleByPciBusId(bus_id), ""
    except Exception as exc:
        return None, None, f"NVML has no GPU at {bus_id}: {type(exc).__name__}: {exc}"
