"""``python -m pav_payload facts``: the parsers on real-looking tool output, the NVML reader driven by a
stand-in that behaves as pynvml does, and the subcommand run for real on this GPU-less machine."""

from __future__ import annotations

import ctypes
import json
import os
import pwd
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any, ClassVar

import pytest
from pav_payload import gpu_facts
from pav_payload.cli import main
from pav_payload.gpu_facts import collect, xid
from pav_payload.gpu_facts.commands import CommandResult
from pav_payload.gpu_facts.decode import (
    CLOCK_EVENT_REASONS,
    decode_clock_reasons,
    normalize_bus_id,
    strip_ansi,
)
from pav_payload.gpu_facts.nvlink import _nvlink_generation
from pav_payload.gpu_facts.nvml import read_nvml
from pav_payload.gpu_facts.output import GpuFacts
from pav_payload.gpu_facts.smi import (
    NVLINK_NEEDS_NVML,
    SMI_FIELDS,
    device_from_smi,
    invalid_smi_field,
    parse_smi_csv,
    read_nvidia_smi,
)
from pav_payload.gpu_facts.xid import parse_xid_lines, scan_xid

from tests.conftest import PAYLOAD

TOP_KEYS = {
    "source", "driver", "nvml_version", "missing", "devices", "xid", "read_at", "kernel", "cuda_driver",
    "rdma", "host_memory",
}  # fmt: skip
DEVICE_KEYS = {
    "index", "name", "uuid", "pci_bus_id", "memory_total_mib", "memory_used_mib", "processes",
    "sm_clock_max_mhz", "pcie", "nvlink", "ecc", "remapped_rows", "clock_event_reasons", "power", "state",
    "counters", "missing",
}  # fmt: skip
LINK_KEYS = {"link", "up", "remote_bus_id", "remote_type", "speed_mbps"}
NO_NVLINK = {"version": None, "links_total": 0, "links_up": 0, "links": []}
UNKNOWN_NVLINK = {"version": None, "links_total": None, "links_up": None, "links": []}

# nvidia-smi --query-gpu=<SMI_FIELDS> --format=csv,noheader,nounits on an 8x H100 SXM (HGX) node, first two
# GPUs; driver 570. GPU 1 idles with PCIe trained down to gen1 (power saving, not a fault).
H100_SXM_CSV = (
    "0, NVIDIA H100 80GB HBM3, GPU-3f1c2b9e-7a4d-5e10-9c21-8b6f0d4e2a11, 00000000:18:00.0, 81559, 1980, "
    "5, 5, 16, 16, Enabled, 0, 0, 0, 0, No, No, 0x0000000000000001, 700.00, 700.00, 570.133.20\n"
    "1, NVIDIA H100 80GB HBM3, GPU-a07e51d2-19c4-4b8e-b7f3-2d6c90e1f5a4, 00000000:2A:00.0, 81559, 1980, "
    "1, 5, 16, 16, Enabled, 0, 0, 2, 0, No, No, 0x0000000000000005, 700.00, 700.00, 570.133.20\n"
)
# The same on an H200 node where GPU 0 waits for a reset to remap a row, and a driver (550) that predates
# remapped_rows.failure in --query-gpu but knows the rest.
H200_FIELDS = [f.query for f in SMI_FIELDS if f.query != "remapped_rows.failure"]
H200_CSV = (
    "0, NVIDIA H200, GPU-6b2d7c10-5e3f-4a91-8c0d-f1e2a3b4c5d6, 00000000:1B:00.0, 143771, 1980, 5, 5, 16, 16, "
    "Enabled, 1, 1, 0, 1, Yes, 0x0000000000000000, 700.00, 700.00, 550.127.05\n"
    "1, NVIDIA H200, GPU-0c9e8d7f-6a5b-4c3d-9e2f-1a0b9c8d7e6f, 00000000:43:00.0, 143771, 1980, 5, 5, 16, 16, "
    "Enabled, [N/A], [N/A], [Not Supported], [Not Supported], [Not Supported], 0x0000000000000044, 650.00, "
    "700.00, 550.127.05\n"
)
# As the NVIDIA driver writes them to the kernel log: dmesg (one with --color's escape codes) and journalctl.
FELL_OFF = "NVRM: Xid (PCI:0000:1b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
DMESG = (
    "[    4.118277] nvidia-nvlink: Nvlink Core is being initialized, major device number 508\n"
    f"\x1b[32m[  305.412345] \x1b[0m{FELL_OFF}\n"
    "[  305.412399] NVRM: GPU 0000:1b:00.0: GPU has fallen off the bus.\n"
    "[ 1021.004512] NVRM: Xid (PCI:0000:9d:00): 48, pid=2717, name=python3, An uncorrectable double bit "
    "error (DBE) has been detected on GPU in the framebuffer at partition 6, subpartition 0.\n"
    "[ 1022.110022] NVRM: Xid (PCI:0000:9d:00): 63, pid=2717, name=python3, Row Remapper: New row "
    "(0x00000000000e7a60) marked for remapping, reset gpu to activate.\n"
    "[ 2033.118822] NVRM: Xid (PCI:0000:cb:00 GPU-I:05): 43, pid=5512, name=python, Ch 00000008\n"
)
JOURNAL = (
    "Mar 04 10:12:55 gpu-node-3 kernel: NVRM: Xid (PCI:0000:18:00): 119, pid=3371, name=nvidia-smi, Timeout "
    "after 6s of waiting for RPC response from GPU0 GSP! Expected function 76 (GSP_RM_CONTROL).\n"
    "Mar 04 10:12:56 gpu-node-3 kernel: NVRM: GPU0 GSP RPC buffer contains function 76 (GSP_RM_CONTROL)\n"
)


# --- parsers ----------------------------------------------------------------------------------------------


def assert_healthy_gen5_board(dev: dict[str, Any]) -> None:
    """The health and link facts of an idle, healthy 700 W board on PCIe gen5 x16."""
    assert dev["pcie"] == {"gen_current": 5, "gen_max": 5, "width_current": 16, "width_max": 16}
    assert dev["ecc"] == {
        "mode_current": "enabled",
        "uncorrectable_volatile": 0,
        "uncorrectable_aggregate": 0,
    }
    assert dev["remapped_rows"] == {"correctable": 0, "uncorrectable": 0, "pending": False, "failed": False}
    assert dev["clock_event_reasons"] == ["gpu_idle"]
    assert dev["power"] == {"limit_w": 700.0, "default_limit_w": 700.0}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("00000000:1B:00.0", "00000000:1B:00.0"),
        ("0000:1b:00.0", "00000000:1B:00.0"),
        ("0000:1b:00", "00000000:1B:00.0"),
        ("1b:00.0", "00000000:1B:00.0"),
        ("00000001:c3:1f.7", "00000001:C3:1F.7"),
        ("not a bus", "not a bus"),
    ],
)
def test_normalize_bus_id(text: str, expected: str) -> None:
    assert normalize_bus_id(text) == expected


def test_decode_clock_reasons() -> None:
    assert decode_clock_reasons(0) == []
    assert decode_clock_reasons(0x1) == ["gpu_idle"]
    assert decode_clock_reasons(0x4 | 0x40 | 0x80) == [
        "sw_power_cap", "hw_thermal_slowdown", "hw_power_brake_slowdown",
    ]  # fmt: skip
    assert decode_clock_reasons(0x1FF) == list(CLOCK_EVENT_REASONS.values())
    # A bit newer drivers set (0x200: board limit) is kept, not dropped.
    assert decode_clock_reasons(0x208) == ["hw_slowdown", "unknown_0x200"]


def test_parse_xid_lines_from_dmesg() -> None:
    events = parse_xid_lines(DMESG)
    assert [(e.xid, e.pci_bus_id) for e in events] == [
        (79, "00000000:1B:00.0"), (48, "00000000:9D:00.0"), (63, "00000000:9D:00.0"),
        (43, "00000000:CB:00.0"),
    ]  # fmt: skip
    assert events[0].line.startswith("[  305.412345] NVRM: Xid (PCI:0000:1b:00): 79")
    assert not any("\x1b" in e.line for e in events)


def test_parse_xid_lines_from_the_journal() -> None:
    [event] = parse_xid_lines(JOURNAL)
    assert (event.xid, event.pci_bus_id) == (119, "00000000:18:00.0")
    assert "kernel: NVRM: Xid" in event.line


def test_strip_ansi() -> None:
    assert strip_ansi("\x1b[4mGPU0\x1b[0m\t X \x1b[1;32mNV18\x1b[0m") == "GPU0\t X NV18"


def test_parse_smi_csv_h100_sxm() -> None:
    fields = [f.query for f in SMI_FIELDS]
    rows = parse_smi_csv(H100_SXM_CSV, fields)
    devices = [device_from_smi(row, SMI_FIELDS, {}, i) for i, row in enumerate(rows)]
    first = json.loads(json.dumps(_as_dict(devices[0])))
    assert set(first) == DEVICE_KEYS
    assert first["name"] == "NVIDIA H100 80GB HBM3" and first["pci_bus_id"] == "00000000:18:00.0"
    assert (first["memory_total_mib"], first["sm_clock_max_mhz"]) == (81559, 1980)
    assert_healthy_gen5_board(first)
    # nvidia-smi has no per-link NVLink facts: unknown (null), never "no NVLink" (0 links).
    assert first["nvlink"] == UNKNOWN_NVLINK
    assert first["missing"] == [NVLINK_NEEDS_NVML]
    assert devices[1].pcie.gen_current == 1 and devices[1].remapped_rows.correctable == 2
    assert devices[1].clock_event_reasons == ["gpu_idle", "sw_power_cap"]


def test_parse_smi_csv_h200_with_unsupported_cells() -> None:
    fields = [f for f in SMI_FIELDS if f.query != "remapped_rows.failure"]
    absent = {"remapped_rows.failed": "this nvidia-smi has no field remapped_rows.failure"}
    rows = parse_smi_csv(H200_CSV, H200_FIELDS)
    first, second = (device_from_smi(row, fields, absent, i) for i, row in enumerate(rows))
    assert first.memory_total_mib == 143771 and first.ecc.uncorrectable_volatile == 1
    assert first.remapped_rows.pending is True and first.remapped_rows.failed is None
    assert "remapped_rows.failed: this nvidia-smi has no field remapped_rows.failure" in first.missing
    assert second.ecc.uncorrectable_volatile is None and second.remapped_rows.correctable is None
    assert (
        "ecc.uncorrectable_volatile: N/A (nvidia-smi ecc.errors.uncorrected.volatile.total)" in second.missing
    )
    assert "remapped_rows.pending: Not Supported (nvidia-smi remapped_rows.pending)" in second.missing
    assert second.clock_event_reasons == ["sw_power_cap", "hw_thermal_slowdown"]
    assert second.power.limit_w == 650.0


def test_parse_smi_csv_rejects_a_short_row() -> None:
    with pytest.raises(ValueError, match="columns"):
        parse_smi_csv("0, NVIDIA H200\n", ["index", "name", "uuid"])


def test_invalid_smi_field() -> None:
    out = 'Field "clocks_event_reasons.active" is not a valid field to query.\n\n'
    assert invalid_smi_field(out) == "clocks_event_reasons.active"
    assert invalid_smi_field("NVIDIA-SMI has failed because it couldn't communicate with the driver") is None


# --- nvidia-smi fallback and the kernel log, through a stand-in for the tools -------------------------------


class FakeTools:
    """Answers argv like the real tools; records what was asked."""

    def __init__(self, answers: dict[str, Callable[[Sequence[str]], CommandResult]]) -> None:
        self.answers = answers
        self.calls: list[list[str]] = []

    def __call__(self, argv: Sequence[str], timeout_s: float) -> CommandResult:
        self.calls.append(list(argv))
        answer = self.answers.get(argv[0])
        return answer(argv) if answer else CommandResult(127, "", f"{argv[0]} not found on PATH")


def old_smi(csv_text: str, unknown: set[str]) -> Callable[[Sequence[str]], CommandResult]:
    """An nvidia-smi that, as the real one does, refuses the whole query for the first field it lacks."""

    def answer(argv: Sequence[str]) -> CommandResult:
        asked = argv[1].removeprefix("--query-gpu=").split(",")
        for name in asked:
            if name in unknown:
                return CommandResult(2, f'Field "{name}" is not a valid field to query.\n\n', "")
        return CommandResult(0, csv_text, "")

    return answer


def test_nvidia_smi_fallback_drops_and_renames_fields_an_old_driver_lacks() -> None:
    # Driver 525: no remapped_rows.failure, and the reasons are still called clocks_throttle_reasons. The
    # dropped field is gone from the query; the renamed one is asked for last.
    csv_text = (
        "0, NVIDIA H200, GPU-6b2d7c10-5e3f-4a91-8c0d-f1e2a3b4c5d6, 00000000:1B:00.0, 143771, 1980, "
        "5, 5, 16, 16, Enabled, 1, 1, 0, 1, Yes, 700.00, 700.00, 525.147.05, 0x0000000000000000\n"
    )
    tools = FakeTools(
        {"nvidia-smi": old_smi(csv_text, {"clocks_event_reasons.active", "remapped_rows.failure"})}
    )
    facts = read_nvidia_smi(tools, "nvml: pynvml is not importable")
    assert facts.source == "nvidia-smi" and facts.driver == "525.147.05" and facts.nvml_version is None
    assert facts.missing == ["nvml: pynvml is not importable", "nvml_version: NVML is not readable here"]
    [device] = facts.devices
    assert device.clock_event_reasons == [] and device.remapped_rows.pending is True
    assert device.remapped_rows.failed is None and device.power.limit_w == 700.0
    assert "remapped_rows.failed: this nvidia-smi has no field remapped_rows.failure" in device.missing
    assert len(tools.calls) == 3  # refused twice, then answered
    assert tools.calls[-1][1].endswith(",driver_version,clocks_throttle_reasons.active")


def test_nvidia_smi_that_cannot_talk_to_the_driver_gives_source_none() -> None:
    message = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
    tools = FakeTools({"nvidia-smi": lambda argv: CommandResult(9, message + "\n", "")})
    facts = read_nvidia_smi(tools, "nvml: nvmlInit failed: Driver Not Loaded")
    assert (facts.source, facts.devices) == ("none", [])
    assert facts.missing == [
        "nvml: nvmlInit failed: Driver Not Loaded",
        f"nvidia-smi: {message} (exit code 9)",
    ]


def test_xid_from_dmesg() -> None:
    scan = scan_xid(FakeTools({"dmesg": lambda argv: CommandResult(0, DMESG, "")}))
    assert scan.source == "dmesg" and scan.missing == "" and [e.xid for e in scan.events] == [79, 48, 63, 43]


def test_xid_falls_back_to_the_journal_when_dmesg_is_refused() -> None:
    refused = "dmesg: read kernel buffer failed: Operation not permitted"
    tools = FakeTools(
        {
            "dmesg": lambda argv: CommandResult(1, "", refused + "\n"),
            "journalctl": lambda argv: CommandResult(0, JOURNAL, ""),
        }
    )
    scan = scan_xid(tools)
    assert scan.source == "journalctl" and [e.xid for e in scan.events] == [119]
    assert tools.calls[1] == ["journalctl", "-k", "-b", "--no-pager"]


def test_xid_says_why_when_both_logs_are_refused() -> None:
    hint = "Hint: You are currently not seeing messages from other users and the system."
    tools = FakeTools(
        {
            "dmesg": lambda argv: CommandResult(
                1, "", "dmesg: read kernel buffer failed: Operation not permitted"
            ),
            "journalctl": lambda argv: CommandResult(0, "-- No entries --\n", hint + "\n"),
        }
    )
    scan = scan_xid(tools)
    assert (scan.source, scan.events) == ("none", [])
    assert scan.missing == (
        "dmesg: dmesg: read kernel buffer failed: Operation not permitted (exit code 1); journalctl: " + hint
    )


def test_xid_keeps_the_newest_lines_of_a_flood(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(xid, "MAX_XID_EVENTS", 2)
    scan = scan_xid(FakeTools({"dmesg": lambda argv: CommandResult(0, DMESG, "")}))
    assert [e.xid for e in scan.events] == [63, 43]
    assert scan.missing == "only the last 2 of 4 Xid lines are listed"


# --- NVML, through a stand-in that behaves as pynvml does ---------------------------------------------------


class NVMLError(Exception):
    """pynvml's base error: ``value`` is the nvmlReturn_t code, str() NVML's words for it."""

    WORDS: ClassVar[dict[int, str]] = {
        2: "Invalid Argument",
        3: "Not Supported",
        15: "GPU is lost",
        999: "Unknown Error",
    }

    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return self.WORDS.get(self.value, f"NVML Error with code {self.value}")


class NVMLError_NotSupported(NVMLError):  # pynvml's names
    def __init__(self) -> None:
        super().__init__(3)


class NVMLError_InvalidArgument(NVMLError):
    def __init__(self) -> None:
        super().__init__(2)


GPU, SWITCH = 0, 2  # nvmlNvLinkDeviceType_t
NVML_FI_DEV_NVLINK_GET_SPEED, NVML_FI_DEV_GET_GPU_RECOVERY_ACTION = 164, 271


class GpuFabricInfoV(ctypes.Structure):
    """nvml.h's nvmlGpuFabricInfo_v2_t, laid out as pynvml's c_nvmlGpuFabricInfoV_t is."""

    _fields_: ClassVar[list[tuple[str, Any]]] = [
        ("version", ctypes.c_uint),
        ("clusterUuid", ctypes.c_ubyte * 16),
        ("status", ctypes.c_uint),
        ("cliqueId", ctypes.c_uint),
        ("state", ctypes.c_ubyte),
        ("healthMask", ctypes.c_uint),
    ]


@dataclass
class FakeGpu:
    """One GPU as NVML answers for it; the defaults are what the real idle H100s and H200s said
    (tests/payload/fixtures/node-state)."""

    name: str
    uuid: str
    bus: str
    memory_bytes: int = 85520809984  # an H100 80GB: NVML and nvidia-smi say 81559 MiB
    board_links: int = 0  # link indices that exist; 0: a board without NVLink (NVML: NotSupported)
    links: dict[int, tuple[bool, str, int]] = field(default_factory=dict)  # link -> (up, remote bus, type)
    refuse: set[str] = field(default_factory=set)  # pynvml functions that raise NotSupported on this GPU
    lost: bool = False
    processes: list[tuple[int, int | None]] = field(default_factory=list)  # (pid, bytes or None)
    used_bytes: int = 0
    persistence: int = 1
    mig: tuple[int, int] = (0, 0)  # (current, pending)
    inforom_error: int = 0  # the NVML error nvmlDeviceValidateInforom raises; 0: none
    vbios: str = "96.00.DA.00.0C"
    app_clock_mhz: tuple[int, int] = (1980, 1980)  # (current, default)
    recovery_action: int = 0
    # (state, status, cliqueId, clusterUuid, healthMask) as nvmlGpuFabricInfo_v2
    fabric: tuple[int, int, int, bytes, int] = (3, 0, 0, bytes(16), 0)
    pcie_replay: int = 0
    nvlink_errors: dict[int, tuple[int, int, int, int]] = field(default_factory=dict)  # link -> DL counters
    # nvmlPerfPolicyType_t -> violation ns since the driver loaded (0 where not given); and the policies
    # that answer NotSupported on this board
    violations_ns: dict[int, int] = field(default_factory=dict)
    violations_unsupported: set[int] = field(default_factory=set)


def fake_pynvml(gpus: list[FakeGpu], remote_type: bool = True) -> ModuleType:
    """A module with pynvml's names for what gpu_facts calls; bus ids come back as bytes, as ctypes gives."""
    nvml = ModuleType("pynvml")
    constants = {
        "NVML_ERROR_INVALID_ARGUMENT": 2, "NVML_ERROR_NOT_SUPPORTED": 3, "NVML_NVLINK_MAX_LINKS": 36,
        "NVML_CLOCK_SM": 1, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED": 1, "NVML_VOLATILE_ECC": 0,
        "NVML_AGGREGATE_ECC": 1, "NVML_FI_DEV_NVLINK_GET_SPEED": 164, "NVML_ERROR_CORRUPTED_INFOROM": 14,
        "NVML_NVLINK_ERROR_DL_REPLAY": 0, "NVML_NVLINK_ERROR_DL_RECOVERY": 1,
        "NVML_NVLINK_ERROR_DL_CRC_FLIT": 2, "NVML_NVLINK_ERROR_DL_CRC_DATA": 3,
        "nvmlGpuFabricInfo_v2": 0x02000024, "c_nvmlGpuFabricInfoV_t": GpuFabricInfoV,
        "NVMLError": NVMLError, "NVMLError_NotSupported": NVMLError_NotSupported,
        "NVML_PERF_POLICY_POWER": 0, "NVML_PERF_POLICY_THERMAL": 1, "NVML_PERF_POLICY_SYNC_BOOST": 2,
        "NVML_PERF_POLICY_BOARD_LIMIT": 3, "NVML_PERF_POLICY_LOW_UTILIZATION": 4,
    }  # fmt: skip
    for name, value in constants.items():
        setattr(nvml, name, value)

    def per_gpu(name: str, answer: Callable[..., Any]) -> None:
        def call(handle: int, *args: Any) -> Any:
            if name in gpus[handle].refuse:
                raise NVMLError_NotSupported()
            return answer(gpus[handle], *args)

        setattr(nvml, name, call)

    def handle(index: int) -> int:
        if gpus[index].lost:
            raise NVMLError(15)
        return index

    def link_state(g: FakeGpu, link: int) -> int:
        if not g.board_links:
            raise NVMLError_NotSupported()
        if link >= g.board_links:
            raise NVMLError_InvalidArgument()
        return int(g.links.get(link, (False, "", GPU))[0])

    def field_values(g: FakeGpu, ids: list[int | tuple[int, int]]) -> list[SimpleNamespace]:
        """pynvml takes a field id, or (field id, scope id) for a per-link field."""
        out = []
        for asked in ids:
            field_id, scope = asked if isinstance(asked, tuple) else (asked, 0)
            value = SimpleNamespace(fieldId=field_id, scopeId=scope, nvmlReturn=0, valueType=1)
            if field_id == NVML_FI_DEV_NVLINK_GET_SPEED:
                value.value = SimpleNamespace(uiVal=26562)
            elif field_id == NVML_FI_DEV_GET_GPU_RECOVERY_ACTION:
                value.valueType, value.value = 3, SimpleNamespace(ullVal=g.recovery_action)
            else:
                value.nvmlReturn, value.valueType, value.value = 3, 0, SimpleNamespace(dVal=0.0)
            out.append(value)
        return out

    def validate_inforom(g: FakeGpu) -> None:
        if g.inforom_error:
            raise NVMLError(g.inforom_error)

    def fabric_info(g: FakeGpu, ref: Any) -> int:
        info = ctypes.cast(ref, ctypes.POINTER(GpuFabricInfoV)).contents
        if info.version != 0x02000024:  # NVML fills only a structure whose version it knows
            raise NVMLError(25)  # NVML_ERROR_ARGUMENT_VERSION_MISMATCH
        info.state, info.status, info.cliqueId, uuid, info.healthMask = g.fabric
        info.clusterUuid[:] = uuid
        return 0

    def violation_status(g: FakeGpu, policy: int) -> SimpleNamespace:
        """pynvml's c_nvmlViolationTime_t: referenceTime a CPU timestamp in us, violationTime in ns."""
        if policy in g.violations_unsupported:
            raise NVMLError_NotSupported()
        return SimpleNamespace(
            referenceTime=1_764_400_000_000_000, violationTime=g.violations_ns.get(policy, 0)
        )

    nvml.nvmlInit = lambda: None  # type: ignore[attr-defined]
    nvml.nvmlShutdown = lambda: None  # type: ignore[attr-defined]
    nvml.nvmlSystemGetDriverVersion = lambda: "580.95.05"  # type: ignore[attr-defined]
    nvml.nvmlSystemGetNVMLVersion = lambda: "13.580.95.05"  # type: ignore[attr-defined]
    nvml.nvmlSystemGetCudaDriverVersion_v2 = lambda: 13000  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetCount = lambda: len(gpus)  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetHandleByIndex = handle  # type: ignore[attr-defined]
    per_gpu("nvmlDeviceGetName", lambda g: g.name)
    per_gpu("nvmlDeviceGetUUID", lambda g: g.uuid)
    per_gpu("nvmlDeviceGetPciInfo", lambda g: SimpleNamespace(busId=g.bus.encode()))
    per_gpu(
        "nvmlDeviceGetMemoryInfo",
        lambda g: SimpleNamespace(
            total=g.memory_bytes, free=g.memory_bytes - g.used_bytes, used=g.used_bytes
        ),
    )
    per_gpu(
        "nvmlDeviceGetComputeRunningProcesses",
        lambda g: [SimpleNamespace(pid=p, usedGpuMemory=b) for p, b in g.processes],
    )
    per_gpu("nvmlDeviceGetMaxClockInfo", lambda g, clock: 1980)
    per_gpu("nvmlDeviceGetCurrPcieLinkGeneration", lambda g: 5)
    per_gpu("nvmlDeviceGetMaxPcieLinkGeneration", lambda g: 5)
    per_gpu("nvmlDeviceGetCurrPcieLinkWidth", lambda g: 16)
    per_gpu("nvmlDeviceGetMaxPcieLinkWidth", lambda g: 16)
    per_gpu("nvmlDeviceGetEccMode", lambda g: [1, 1])
    per_gpu("nvmlDeviceGetTotalEccErrors", lambda g, kind, counter: 0)
    per_gpu("nvmlDeviceGetRemappedRows", lambda g: (0, 0, 0, 0))
    per_gpu("nvmlDeviceGetCurrentClocksEventReasons", lambda g: 0x1)
    per_gpu("nvmlDeviceGetPowerManagementLimit", lambda g: 700000)
    per_gpu("nvmlDeviceGetPowerManagementDefaultLimit", lambda g: 700000)
    per_gpu("nvmlDeviceGetNvLinkState", link_state)
    per_gpu("nvmlDeviceGetNvLinkVersion", lambda g, link: 6)  # NVML_NVLINK_VERSION_4_0
    per_gpu(
        "nvmlDeviceGetNvLinkRemotePciInfo", lambda g, link: SimpleNamespace(busId=g.links[link][1].encode())
    )
    if remote_type:
        per_gpu("nvmlDeviceGetNvLinkRemoteDeviceType", lambda g, link: g.links[link][2])
    per_gpu("nvmlDeviceGetFieldValues", field_values)
    per_gpu("nvmlDeviceGetPersistenceMode", lambda g: g.persistence)
    per_gpu("nvmlDeviceGetMigMode", lambda g: list(g.mig))
    per_gpu("nvmlDeviceValidateInforom", validate_inforom)
    per_gpu("nvmlDeviceGetVbiosVersion", lambda g: g.vbios)
    per_gpu("nvmlDeviceGetApplicationsClock", lambda g, clock: g.app_clock_mhz[0])
    per_gpu("nvmlDeviceGetDefaultApplicationsClock", lambda g, clock: g.app_clock_mhz[1])
    per_gpu("nvmlDeviceGetGpuFabricInfoV", fabric_info)
    per_gpu("nvmlDeviceGetPcieReplayCounter", lambda g: g.pcie_replay)
    per_gpu(
        "nvmlDeviceGetNvLinkErrorCounter",
        lambda g, link, counter: g.nvlink_errors.get(link, (0, 0, 0, 0))[counter],
    )
    per_gpu("nvmlDeviceGetViolationStatus", violation_status)
    return nvml


# nvml.h's nvmlNvlinkVersion_t: NVML_NVLINK_VERSION_2_0 = 2, ..., 4_0 = 6, 5_0 = 7.
@pytest.mark.parametrize(("code", "generation"), [(2, 2), (4, 3), (5, 3), (6, 4), (7, 5)])
def test_nvml_nvlink_version_enum_is_read_as_the_generation(code: int, generation: int) -> None:
    # An H100 answers 6 (4_0), a B200 or GB200 7 (5_0): gpus.yml's per-link rate is keyed by the generation.
    assert _nvlink_generation(code) == generation


def test_an_nvlink_version_nvml_did_not_have_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown nvmlNvlinkVersion_t 99"):
        _nvlink_generation(99)


def nvl_pair() -> list[FakeGpu]:
    """Two H100 NVL cards joined by NVLink bridges: 12 links, each to the other card."""
    a, b = "00000000:1B:00.0", "00000000:43:00.0"
    return [
        FakeGpu("NVIDIA H100 NVL", "GPU-0001", a, 100485038080, 12, {k: (True, b, GPU) for k in range(12)}),
        FakeGpu(
            "NVIDIA H100 NVL", "GPU-0002", b, 100485038080, 12, {k: (True, a, GPU) for k in range(12)},
            refuse={"nvmlDeviceGetRemappedRows", "nvmlDeviceGetPowerManagementDefaultLimit"},
        ),
    ]  # fmt: skip


def test_nvml_lists_the_processes_holding_each_gpu(tmp_path: Path) -> None:
    """What the 4x H200 recording (tests/payload/fixtures/node-state/h200x4-leftover-85pct-gpu0.json) had
    NVML say of GPU 0 with a torch process holding 85% of it: PID 1068, 128,140,181,504 bytes, 128,794,361,856
    of 150,754,820,096 in use; GPU 1 idle with 648,347,648 bytes in use (the driver's) and no process.
    A process of this host is named with its owner; one whose PID is not visible here (another container,
    as 1068 is here) keeps its PID and memory; the reader itself is never listed."""
    sleeper = subprocess.Popen(["sleep", "60"])
    comm = Path(f"/proc/{sleeper.pid}/comm")
    for _ in range(100):  # until the fork has become sleep
        if comm.read_text().strip() == "sleep":
            break
        time.sleep(0.05)
    try:
        gpus = [
            FakeGpu("NVIDIA H200", "GPU-0", "00000000:00:06.0", 150754820096, used_bytes=128794361856,
                    processes=[(1068, 128140181504), (sleeper.pid, None), (os.getpid(), 1 << 20)]),
            FakeGpu("NVIDIA H200", "GPU-1", "00000000:00:07.0", 150754820096, used_bytes=648347648),
        ]  # fmt: skip
        first, second = _round_trip(read_nvml(fake_pynvml(gpus)))["devices"]
    finally:
        sleeper.kill()
        sleeper.wait()
    assert (first["memory_total_mib"], first["memory_used_mib"]) == (143771, 122827)
    user = pwd.getpwuid(os.getuid()).pw_name
    assert first["processes"] == [
        {"pid": 1068, "used_mib": 122204, "name": None, "user": None},  # nvidia-smi said 122204 MiB too
        {"pid": sleeper.pid, "used_mib": None, "name": "sleep", "user": user},
    ]
    assert (second["memory_used_mib"], second["processes"]) == (618, [])


def test_nvml_two_gpus_joined_by_nvlink() -> None:
    facts = _round_trip(read_nvml(fake_pynvml(nvl_pair())))
    assert set(facts) == TOP_KEYS
    assert (facts["source"], facts["driver"], facts["nvml_version"], facts["missing"]) == (
        "nvml", "580.95.05", "13.580.95.05", [],
    )  # fmt: skip
    first, second = facts["devices"]
    assert set(first) == DEVICE_KEYS and first["missing"] == []
    assert (first["index"], first["name"], first["uuid"], first["pci_bus_id"]) == (
        0, "NVIDIA H100 NVL", "GPU-0001", "00000000:1B:00.0",
    )  # fmt: skip
    assert (first["memory_total_mib"], first["sm_clock_max_mhz"]) == (95830, 1980)
    assert_healthy_gen5_board(first)
    nvlink = first["nvlink"]
    assert (nvlink["version"], nvlink["links_total"], nvlink["links_up"]) == (4, 12, 12)
    assert all(set(link) == LINK_KEYS for link in nvlink["links"])
    assert nvlink["links"][0] == {
        "link": 0, "up": True, "remote_bus_id": "00000000:43:00.0", "remote_type": "gpu", "speed_mbps": 26562,
    }  # fmt: skip
    # What NVML refused on the second card is null and named, with NVML's reason.
    assert second["remapped_rows"] == {
        "correctable": None,
        "uncorrectable": None,
        "pending": None,
        "failed": None,
    }
    assert second["power"] == {"limit_w": 700.0, "default_limit_w": None}
    assert second["missing"] == ["remapped_rows: Not Supported", "power.default_limit_w: Not Supported"]


def test_nvml_without_remote_device_type_tells_gpus_from_switches_by_bus_id() -> None:
    gpus = nvl_pair()
    gpus[0].links[11] = (True, "00000000:00:00.0", SWITCH)  # a peer with no PCI function: not a host GPU
    gpus[0].links[10] = (False, "", GPU)
    facts = read_nvml(fake_pynvml(gpus, remote_type=False))
    links = facts.devices[0].nvlink.links
    assert [link.remote_type for link in links[:10]] == ["gpu"] * 10
    assert (links[10].up, links[10].remote_type, links[10].remote_bus_id) == (False, "unknown", None)
    assert (links[11].remote_type, links[11].remote_bus_id) == ("switch", None)
    assert facts.devices[0].nvlink.links_up == 11 and facts.devices[0].missing == []


def test_nvml_hgx_links_to_nvswitch() -> None:
    switch_links = {k: (True, "00000000:00:00.0", SWITCH) for k in range(18)}
    one_down = {**switch_links, 5: (False, "", GPU)}
    gpus = [
        FakeGpu("NVIDIA H200", "GPU-0100", "00000000:18:00.0", 150754820096, 18, dict(switch_links)),
        FakeGpu("NVIDIA H200", "GPU-0101", "00000000:2A:00.0", 150754820096, 18, one_down),
    ]
    facts = read_nvml(fake_pynvml(gpus))
    first, second = (d.nvlink for d in facts.devices)
    assert (first.version, first.links_total, first.links_up) == (4, 18, 18)
    assert {link.remote_type for link in first.links} == {"switch"}
    assert (second.links_total, second.links_up) == (18, 17)
    assert facts.devices[0].memory_total_mib == 143771


def test_nvml_pcie_current_and_max_link_come_from_their_own_calls() -> None:
    """gpu_health names a link trained narrower than its max (issue 36): the reader must not mix the two up.
    Idle, the generation drops (gen1 of gen5); the width is what the link trained at."""
    module = fake_pynvml(nvl_pair())
    module.nvmlDeviceGetCurrPcieLinkWidth = lambda h: 8 if h == 1 else 16  # type: ignore[attr-defined]
    module.nvmlDeviceGetCurrPcieLinkGeneration = lambda h: 1  # type: ignore[attr-defined]
    first, second = (d["pcie"] for d in _round_trip(read_nvml(module))["devices"])
    assert first == {"gen_current": 1, "gen_max": 5, "width_current": 16, "width_max": 16}
    assert second == {"gen_current": 1, "gen_max": 5, "width_current": 8, "width_max": 16}


def test_nvml_a_down_link_has_no_far_end() -> None:
    """What the gates place a down link by (thresholds/derive.py nvlink_wiring): up false, no remote bus id,
    remote_type unknown; NVML is not asked for the far end of a link that is down."""
    switch_links = {k: (True, "FFFFFFFF:FF:FF.0", SWITCH) for k in range(18)}  # as a real HGX H100 answers
    gpus = [FakeGpu("NVIDIA H100 80GB HBM3", "GPU-0300", "00000000:00:06.0", board_links=18,
                    links={**switch_links, 5: (False, "", GPU)})]  # fmt: skip
    module = fake_pynvml(gpus)
    asked: list[int] = []
    remote = module.nvmlDeviceGetNvLinkRemotePciInfo

    def remote_pci(handle: int, link: int) -> Any:
        asked.append(link)
        return remote(handle, link)

    module.nvmlDeviceGetNvLinkRemotePciInfo = remote_pci  # type: ignore[attr-defined]
    nvlink = _round_trip(read_nvml(module))["devices"][0]["nvlink"]
    assert (nvlink["links_total"], nvlink["links_up"]) == (18, 17) and 5 not in asked
    assert nvlink["links"][5] == {
        "link": 5, "up": False, "remote_bus_id": None, "remote_type": "unknown", "speed_mbps": None,
    }  # fmt: skip
    assert {link["remote_type"] for link in nvlink["links"] if link["up"]} == {"switch"}


def test_nvml_one_pcie_gpu_has_no_nvlink_and_that_is_not_missing() -> None:
    gpus = [FakeGpu("NVIDIA H100 PCIe", "GPU-0200", "00000000:65:00.0", refuse={"nvmlDeviceGetEccMode"})]
    facts = _round_trip(read_nvml(fake_pynvml(gpus)))
    [device] = facts["devices"]
    assert set(device) == DEVICE_KEYS
    assert device["nvlink"] == NO_NVLINK
    assert device["ecc"]["mode_current"] is None and device["ecc"]["uncorrectable_volatile"] == 0
    assert device["missing"] == ["ecc.mode_current: Not Supported"]


def test_nvml_a_lost_gpu_is_listed_with_the_reason() -> None:
    gpus = [*nvl_pair()]
    gpus[1].lost = True
    facts = read_nvml(fake_pynvml(gpus))
    lost = _round_trip(facts)["devices"][1]
    assert set(lost) == DEVICE_KEYS
    assert (lost["index"], lost["name"], lost["missing"]) == (1, None, ["handle: GPU is lost"])
    assert lost["nvlink"] == UNKNOWN_NVLINK
    # GPU 0's peer is not among the GPUs NVML could read, so its type comes from NVML alone.
    assert facts.devices[0].nvlink.links[0].remote_type == "gpu"


def test_nvml_a_link_that_cannot_be_read_makes_the_counts_unknown() -> None:
    gpus = nvl_pair()
    module = fake_pynvml(gpus)
    state = module.nvmlDeviceGetNvLinkState

    def flaky(handle: int, link: int) -> int:
        if handle == 0 and link == 3:
            raise NVMLError(999)
        return state(handle, link)

    module.nvmlDeviceGetNvLinkState = flaky  # type: ignore[attr-defined]
    nvlink = read_nvml(module).devices[0]
    assert (nvlink.nvlink.links_total, nvlink.nvlink.links_up, len(nvlink.nvlink.links)) == (None, None, 11)
    assert nvlink.missing == ["nvlink.links.up: Unknown Error (links 3)"]


def test_nvml_per_link_failures_are_one_line_naming_the_links() -> None:
    module = fake_pynvml(nvl_pair())
    del module.nvmlDeviceGetFieldValues
    device = read_nvml(module).devices[0]
    assert device.nvlink.links[0].speed_mbps is None
    # The GPU's recovery action is a field value too: a line of its own, not per link.
    line, recovery = device.missing
    assert line.startswith(
        "nvlink.links.speed_mbps: module 'pynvml' has no attribute 'nvmlDeviceGetFieldValues'"
    )
    assert line.endswith("(links 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)")
    assert recovery.startswith("state.recovery_action: module 'pynvml' has no attribute")


def test_nvml_older_binding_spells_clock_reasons_throttle() -> None:
    module = fake_pynvml(nvl_pair())
    del module.nvmlDeviceGetCurrentClocksEventReasons
    module.nvmlDeviceGetCurrentClocksThrottleReasons = lambda handle: 0x4  # type: ignore[attr-defined]
    assert read_nvml(module).devices[0].clock_event_reasons == ["sw_power_cap"]


# --- collect: which source answers --------------------------------------------------------------------------


def test_collect_prefers_nvml_and_adds_the_kernel_log() -> None:
    tools = FakeTools({"dmesg": lambda argv: CommandResult(0, DMESG, "")})
    facts = _round_trip(collect(lambda: fake_pynvml(nvl_pair()), tools))
    assert facts["source"] == "nvml" and len(facts["devices"]) == 2
    assert facts["xid"]["source"] == "dmesg" and facts["xid"]["missing"] == ""
    assert facts["xid"]["events"][0] == {
        "line": f"[  305.412345] {FELL_OFF}",
        "pci_bus_id": "00000000:1B:00.0",
        "xid": 79,
    }
    assert ["nvidia-smi"] not in [call[:1] for call in tools.calls]


def test_collect_falls_back_to_nvidia_smi_when_nvml_will_not_start() -> None:
    module = fake_pynvml(nvl_pair())

    def no_driver() -> None:
        raise NVMLError(9)

    module.nvmlInit = no_driver  # type: ignore[attr-defined]
    fields = [f.query for f in SMI_FIELDS]
    tools = FakeTools({"nvidia-smi": old_smi(H100_SXM_CSV, set())})
    facts = collect(lambda: module, tools)
    assert facts.source == "nvidia-smi" and facts.driver == "570.133.20"
    assert facts.missing[0] == "nvml: nvmlInit failed: NVML Error with code 9"
    assert [d.pci_bus_id for d in facts.devices] == ["00000000:18:00.0", "00000000:2A:00.0"]
    assert tools.calls[0] == [
        "nvidia-smi",
        f"--query-gpu={','.join(fields)}",
        "--format=csv,noheader,nounits",
    ]


def test_collect_with_neither_says_why() -> None:
    def no_pynvml() -> ModuleType:
        raise ImportError("No module named 'pynvml'")

    facts = collect(no_pynvml, FakeTools({}))
    assert (facts.source, facts.devices) == ("none", [])
    assert facts.missing == [
        "nvml: pynvml is not importable (No module named 'pynvml'; it comes with the nvidia-ml-py package)",
        "nvidia-smi: nvidia-smi not found on PATH",
    ]
    assert facts.xid.source == "none" and "dmesg not found" in facts.xid.missing


# --- the subcommand, for real -------------------------------------------------------------------------------


def facts_subprocess(
    tmp_path: Path, tools: dict[str, str], *options: str
) -> subprocess.CompletedProcess[str]:
    """``python -m pav_payload facts [options]`` with PATH holding only ``tools`` (name -> sh script) and
    pynvml unimportable, whatever this machine has installed. torch is unimportable too: the node's state is
    read without it (a torch import alone costs seconds)."""
    bin_dir, blocked = tmp_path / "bin", tmp_path / "blocked"
    bin_dir.mkdir()
    blocked.mkdir()
    (blocked / "pynvml.py").write_text("raise ImportError('pynvml blocked by the test')\n")
    (blocked / "torch.py").write_text("raise ImportError('torch blocked by the test')\n")
    for name, script in tools.items():
        (bin_dir / name).write_text("#!/bin/sh\n" + script)
        (bin_dir / name).chmod(0o755)
    env = dict(os.environ, PATH=str(bin_dir), PYTHONPATH=os.pathsep.join([str(blocked), str(PAYLOAD)]))
    proc = subprocess.run(
        [sys.executable, "-m", "pav_payload", "facts", *options],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    print(proc.stdout, proc.stderr, sep="\n")
    return proc


def test_facts_subcommand_without_nvml_or_nvidia_smi(tmp_path: Path) -> None:
    proc = facts_subprocess(tmp_path, {})
    assert proc.returncode == 0
    assert len(proc.stdout.strip().splitlines()) == 1  # one JSON object, nothing else on stdout
    facts = json.loads(proc.stdout)
    assert set(facts) == TOP_KEYS
    assert (facts["source"], facts["driver"], facts["nvml_version"], facts["devices"]) == (
        "none",
        None,
        None,
        [],
    )
    assert facts["missing"] == [
        "nvml: pynvml is not importable (pynvml blocked by the test; it comes with the nvidia-ml-py package)",
        "nvidia-smi: nvidia-smi not found on PATH",
    ]
    assert facts["xid"] == {
        "source": "none",
        "events": [],
        "missing": "dmesg: dmesg not found on PATH; journalctl: journalctl not found on PATH",
    }


def test_facts_subcommand_reads_nvidia_smi_and_dmesg(tmp_path: Path) -> None:
    def printf(text: str) -> str:
        lines = " ".join("'" + line.replace("'", "'\\''") + "'" for line in text.splitlines())
        return f"printf '%s\\n' {lines}\n"

    proc = facts_subprocess(tmp_path, {"nvidia-smi": printf(H100_SXM_CSV), "dmesg": printf(DMESG)})
    assert proc.returncode == 0
    facts = json.loads(proc.stdout)
    assert facts["source"] == "nvidia-smi" and facts["driver"] == "570.133.20"
    assert [d["name"] for d in facts["devices"]] == ["NVIDIA H100 80GB HBM3"] * 2
    assert all(set(d) == DEVICE_KEYS for d in facts["devices"])
    assert facts["xid"]["source"] == "dmesg" and [e["xid"] for e in facts["xid"]["events"]] == [
        79,
        48,
        63,
        43,
    ]


def test_facts_subcommand_answers_even_when_collecting_breaks(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(*_args: Any) -> GpuFacts:
        raise KeyError("busId")

    monkeypatch.setattr(gpu_facts, "collect", broken)
    assert main(["facts"]) == 0
    facts = json.loads(capsys.readouterr().out)
    assert (facts["source"], facts["devices"], facts["missing"]) == ("none", [], ["facts: KeyError: 'busId'"])


def _round_trip(facts: GpuFacts) -> dict[str, Any]:
    """The facts as the driver will see them: through the JSON the subcommand prints."""
    return json.loads(facts.to_json())


def _as_dict(device: Any) -> dict[str, Any]:
    return json.loads(GpuFacts("nvml", devices=[device]).to_json())["devices"][0]


def test_host_facts_answer_torch_and_gpus_in_one_object(capsys: pytest.CaptureFixture[str]) -> None:
    import torch

    assert main(["host-facts"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert set(answer) == {"torch", "gpus"}
    assert answer["torch"]["version"] == torch.__version__
    assert answer["torch"]["devices"] == (torch.cuda.device_count() if torch.cuda.is_available() else 0)
    assert set(answer["gpus"]) == TOP_KEYS
