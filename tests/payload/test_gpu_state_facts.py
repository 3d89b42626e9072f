"""The facts' GPU state, error counters and versions (issue 50): NVML's answers as the real H100 and H200
machines gave them (tests/payload/fixtures/node-state), the AER and InfiniBand files of sysfs as the kernel
writes them, and the ``facts`` subcommand reading a sysfs tree it is pointed at."""

from __future__ import annotations

import json
import os
import shlex
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from pav_payload.cli import main
from pav_payload.gpu_facts import collect
from pav_payload.gpu_facts.counters import read_aer
from pav_payload.gpu_facts.decode import cuda_version_text, sysfs_bus_id
from pav_payload.gpu_facts.meminfo import read_host_memory
from pav_payload.gpu_facts.nvml import read_nvml
from pav_payload.gpu_facts.output import HostMemory
from pav_payload.gpu_facts.rdma import read_rdma

from tests.payload.test_gpu_facts import (
    H100_SXM_CSV,
    SWITCH,
    FakeGpu,
    FakeTools,
    NVMLError,
    facts_subprocess,
    fake_pynvml,
    nvl_pair,
)

NODE_STATE = Path(__file__).parent / "fixtures" / "node-state"
NVLINK_COUNTERS = ("replay", "recovery", "crc_flit", "crc_data")
HEALTHY_FABRIC = {
    "state": 3, "status": 0, "clique_id": 0, "cluster_uuid": "00000000-0000-0000-0000-000000000000",
    "health_mask": 0,
}  # fmt: skip
# The kernel's aer_dev_* files (drivers/pci/pcie/aer.c): one line per error kind, then the total.
AER_CORRECTABLE = (
    "RxErr 0\nBadTLP 2\nBadDLLP 1\nRollover 0\nTimeout 0\nNonFatalErr 0\nCorrIntErr 0\nHeaderOF 0\n"
    "TOTAL_ERR_COR 3\n"
)
AER_NONFATAL = (
    "Undefined 0\nDLP 0\nSDES 0\nTLP 0\nFCP 0\nCmpltTO 1\nCmpltAbrt 0\nUnxCmplt 0\nRxOF 0\nMalfTLP 0\n"
    "ECRC 0\nUnsupReq 0\nACSViol 0\nUncorrIntErr 0\nBlockedTLP 0\nAtomicOpBlocked 0\nTLPBlockedErr 0\n"
    "PoisonTLPBlocked 0\nTOTAL_ERR_NONFATAL 1\n"
)
AER_FATAL = AER_NONFATAL.replace("CmpltTO 1", "CmpltTO 0").replace("NONFATAL 1", "FATAL 0")
AER = {"aer_dev_correctable": AER_CORRECTABLE, "aer_dev_nonfatal": AER_NONFATAL, "aer_dev_fatal": AER_FATAL}


def recorded(name: str) -> dict[str, Any]:
    return json.loads((NODE_STATE / name).read_text())


def gpu_from_recording(rec: dict[str, Any]) -> FakeGpu:
    """A stand-in answering what one GPU of a recording answered (its NVLink links end at NVSwitches)."""

    def value(call: str) -> Any:
        return rec[call]["value"]

    links = rec["nvlink"]
    fabric = rec["fabric"]["nvmlDeviceGetGpuFabricInfoV"]["value"]
    return FakeGpu(
        value("nvmlDeviceGetName"),
        value("nvmlDeviceGetUUID"),
        value("nvmlDeviceGetPciInfo")["busId"],
        value("nvmlDeviceGetMemoryInfo")["total"],
        board_links=len(links),
        links={k["link"]: (bool(k["state"]["value"]), "FFFFFFFF:FF:FF.0", SWITCH) for k in links},
        persistence=value("nvmlDeviceGetPersistenceMode"),
        mig=tuple(value("nvmlDeviceGetMigMode")),  # type: ignore[arg-type]
        vbios=value("nvmlDeviceGetVbiosVersion"),
        app_clock_mhz=(
            value("nvmlDeviceGetApplicationsClock"),
            value("nvmlDeviceGetDefaultApplicationsClock"),
        ),
        recovery_action=rec["fields"]["recovery_action"]["value"]["ullVal"],
        fabric=(
            fabric["state"],
            fabric["status"],
            fabric["cliqueId"],
            bytes(fabric["clusterUuid"]),
            fabric["healthMask"],
        ),
        pcie_replay=value("nvmlDeviceGetPcieReplayCounter"),
        nvlink_errors={
            k["link"]: tuple(k["counters"][c]["value"] for c in NVLINK_COUNTERS)  # type: ignore[misc]
            for k in links
        },
    )


def facts_of(gpus: list[FakeGpu], tmp_path: Path) -> dict[str, Any]:
    """``collect`` as the subcommand runs it, on the stand-in, with sysfs trees of the test's own."""
    facts = collect(lambda: fake_pynvml(gpus), FakeTools({}), tmp_path / "pci", tmp_path / "ib")
    return json.loads(facts.to_json())


# --- GPU state and counters, as the real machines answered --------------------------------------------------


@pytest.mark.parametrize(("recording", "vbios"), [("h100x2-idle-1.json", "96.00.DA.00.0C"),
                                                  ("h200x4-idle-1.json", "96.00.A5.00.1A")])  # fmt: skip
def test_recorded_gpus_read_into_state_and_counters(recording: str, vbios: str, tmp_path: Path) -> None:
    rec = recorded(recording)
    facts = facts_of([gpu_from_recording(g) for g in rec["gpus"]], tmp_path)
    assert facts["cuda_driver"] == "13.0" and facts["missing"] == []
    assert len(facts["devices"]) == len(rec["gpus"])
    for device, raw in zip(facts["devices"], rec["gpus"], strict=True):
        assert device["state"] == {
            "persistence_mode": "enabled", "mig_mode": "disabled", "inforom_valid": True, "vbios": vbios,
            "app_clock_sm_mhz": 1980, "app_clock_sm_default_mhz": 1980, "recovery_action": 0,
            "fabric": HEALTHY_FABRIC,
        }  # fmt: skip
        counters = device["counters"]
        assert counters["pcie_replay"] == raw["nvmlDeviceGetPcieReplayCounter"]["value"]
        assert counters["nvlink"] == [
            {"link": k["link"], **{c: k["counters"][c]["value"] for c in NVLINK_COUNTERS}}
            for k in raw["nvlink"]
        ]
        # The VMs these were recorded on have no AER files: null, and said so.
        assert counters["aer"] == {"correctable": None, "nonfatal": None, "fatal": None}
        assert device["missing"] == [
            f"counters.aer: no AER files in sysfs ({tmp_path / 'pci' / sysfs_bus_id(device['pci_bus_id'])})"
        ]


def test_recorded_h100_link_counters_and_h200_pcie_replay(tmp_path: Path) -> None:
    """Literal values of the recordings: CRC-data counts since boot on an H100's idle links (replay and
    recovery 0), and the one PCIe replay GPU 0 of the 4x H200 had."""
    h100 = facts_of([gpu_from_recording(g) for g in recorded("h100x2-idle-1.json")["gpus"]], tmp_path)
    links = h100["devices"][0]["counters"]["nvlink"]
    assert len(links) == 18
    assert links[0] == {"link": 0, "replay": 0, "recovery": 0, "crc_flit": 0, "crc_data": 386}
    assert links[1] == {"link": 1, "replay": 0, "recovery": 0, "crc_flit": 0, "crc_data": 457}
    h200 = facts_of([gpu_from_recording(g) for g in recorded("h200x4-idle-1.json")["gpus"]], tmp_path)
    assert [d["counters"]["pcie_replay"] for d in h200["devices"]] == [1, 0, 0, 0]


def test_a_corrupted_inforom_reads_false_and_is_not_missing() -> None:
    bad, other = nvl_pair()
    bad.inforom_error = 14  # NVML_ERROR_CORRUPTED_INFOROM
    other.inforom_error = 999
    first, second = read_nvml(fake_pynvml([bad, other])).devices
    assert first.state.inforom_valid is False and not any("inforom" in m for m in first.missing)
    # Any other failure leaves the InfoROM's standing unknown: null, and the reason.
    assert second.state.inforom_valid is None
    assert "state.inforom_valid: Unknown Error" in second.missing


def test_mig_mode_enabled_unsupported_and_unreadable() -> None:
    enabled, no_mig, broken = (FakeGpu("NVIDIA H100", f"GPU-{i}", f"00000000:1{i}:00.0") for i in range(3))
    enabled.mig = (1, 1)
    no_mig.refuse = {"nvmlDeviceGetMigMode"}  # NotSupported: a GPU without MIG
    module = fake_pynvml([enabled, no_mig, broken])
    mig = module.nvmlDeviceGetMigMode

    def flaky(handle: int) -> Any:
        if handle == 2:
            raise NVMLError(15)
        return mig(handle)

    module.nvmlDeviceGetMigMode = flaky
    devices = read_nvml(module).devices
    assert [d.state.mig_mode for d in devices] == ["enabled", "unsupported", None]
    assert [m for d in devices for m in d.missing if m.startswith("state.mig_mode")] == [
        "state.mig_mode: GPU is lost"
    ]


def test_a_board_without_nvswitch_fabric_has_none_and_that_is_not_missing() -> None:
    pcie = FakeGpu("NVIDIA H100 PCIe", "GPU-0200", "00000000:65:00.0", refuse={"nvmlDeviceGetGpuFabricInfoV"})
    # The other way NVML says it: the call succeeds with NVML_GPU_FABRIC_STATE_NOT_SUPPORTED.
    unregistered = (0, 0, 0, bytes(16), 0)
    not_on_fabric = FakeGpu("NVIDIA H100 PCIe", "GPU-0201", "00000000:66:00.0", fabric=unregistered)
    devices = read_nvml(fake_pynvml([pcie, not_on_fabric])).devices
    assert [d.state.fabric for d in devices] == [None, None]
    assert [d.missing for d in devices] == [[], []]


def test_fabric_of_an_nvl_domain_names_its_cluster_and_clique() -> None:
    cluster = bytes.fromhex("5c0fead61a7f0807ace656c58e58e7ea")
    gpu = FakeGpu("NVIDIA GB200", "GPU-0300", "00000008:01:00.0", fabric=(3, 0, 32766, cluster, 0x2))
    [device] = read_nvml(fake_pynvml([gpu])).devices
    assert device.state.fabric is not None
    assert (device.state.fabric.clique_id, device.state.fabric.health_mask) == (32766, 2)
    assert device.state.fabric.cluster_uuid == "5c0fead6-1a7f-0807-ace6-56c58e58e7ea"


def test_fabric_unreadable_is_null_and_named() -> None:
    module = fake_pynvml(nvl_pair())
    del module.c_nvmlGpuFabricInfoV_t  # an nvidia-ml-py from before the versioned call
    device = read_nvml(module).devices[0]
    assert device.state.fabric is None
    assert device.missing == ["state.fabric: module 'pynvml' has no attribute 'c_nvmlGpuFabricInfoV_t'"]


def test_failed_nvlink_counters_are_one_line_per_counter_and_reason_naming_the_links() -> None:
    gpus = nvl_pair()
    gpus[0].links[7] = (False, "", 0)  # down: not asked, not listed
    module = fake_pynvml(gpus)
    counter = module.nvmlDeviceGetNvLinkErrorCounter

    def flaky(handle: int, link: int, which: int) -> int:
        if which == 2:  # CRC-flit: this driver does not count it
            raise NVMLError(3)
        if which == 0 and link in (3, 4):
            raise NVMLError(999)
        return counter(handle, link, which)

    module.nvmlDeviceGetNvLinkErrorCounter = flaky
    device = read_nvml(module).devices[0]
    assert [entry.link for entry in device.counters.nvlink] == [0, 1, 2, 3, 4, 5, 6, 8, 9, 10, 11]
    assert device.counters.nvlink[3].replay is None and device.counters.nvlink[3].recovery == 0
    assert {entry.crc_flit for entry in device.counters.nvlink} == {None}
    assert device.missing == [
        "counters.nvlink.crc_flit: Not Supported (links 0, 1, 2, 3, 4, 5, 6, 8, 9, 10, 11)",
        "counters.nvlink.replay: Unknown Error (links 3, 4)",
    ]


def test_state_reads_that_fail_are_null_and_named() -> None:
    refuse = {
        "nvmlDeviceGetPersistenceMode", "nvmlDeviceGetApplicationsClock", "nvmlDeviceGetPcieReplayCounter",
    }  # fmt: skip
    gpu = FakeGpu("NVIDIA H100 80GB HBM3", "GPU-0400", "00000000:18:00.0", refuse=refuse)
    module = fake_pynvml([gpu])
    del module.nvmlSystemGetCudaDriverVersion_v2
    module.nvmlSystemGetCudaDriverVersion = lambda: 12080  # an older binding: the unversioned call
    facts = read_nvml(module)
    [device] = facts.devices
    assert facts.cuda_driver == "12.8"
    assert (device.state.persistence_mode, device.state.app_clock_sm_mhz) == (None, None)
    assert device.state.app_clock_sm_default_mhz == 1980 and device.counters.pcie_replay is None
    assert device.missing == [
        "state.persistence_mode: Not Supported",
        "state.app_clock_sm_mhz: Not Supported",
        "counters.pcie_replay: Not Supported",
    ]


# --- clock violation times (issue 63) ----------------------------------------------------------------------

# nvmlPerfPolicyType_t
POWER, THERMAL, SYNC_BOOST, BOARD_LIMIT = 0, 1, 2, 3


def test_violation_times_are_read_per_policy(tmp_path: Path) -> None:
    """The recorded 4x H200 as NVML answered it, GPU 2 with time held back for power and heat since the
    driver loaded; the times go into counters.violations in ns, as NVML gives them."""
    gpus = [gpu_from_recording(g) for g in recorded("h200x4-after-load.json")["gpus"]]
    gpus[2].violations_ns = {POWER: 41_300_000_000, THERMAL: 14_200_000_000}
    devices = facts_of(gpus, tmp_path)["devices"]
    assert devices[2]["counters"]["violations"] == {
        "power_ns": 41_300_000_000, "thermal_ns": 14_200_000_000, "sync_boost_ns": 0, "board_limit_ns": 0,
        "low_utilization_ns": 0, "not_supported": [],
    }  # fmt: skip
    assert devices[0]["counters"]["violations"]["thermal_ns"] == 0
    assert not any("violations" in m for d in devices for m in d["missing"])


def test_a_policy_the_board_does_not_count_is_not_supported_not_missing() -> None:
    counted, partial = nvl_pair()
    partial.violations_unsupported = {SYNC_BOOST, BOARD_LIMIT}  # NVMLError_NotSupported for these two
    first, second = read_nvml(fake_pynvml([counted, partial])).devices
    assert first.counters.violations.not_supported == []
    found = second.counters.violations
    assert (found.sync_boost_ns, found.board_limit_ns, found.thermal_ns) == (None, None, 0)
    assert found.not_supported == ["sync_boost", "board_limit"]
    assert not any("violations" in m for m in second.missing)


def test_violation_times_that_cannot_be_read_are_null_and_named() -> None:
    module = fake_pynvml(nvl_pair())
    status = module.nvmlDeviceGetViolationStatus

    def lost_thermal(handle: int, policy: int) -> Any:
        if policy == THERMAL:
            raise NVMLError(15)
        return status(handle, policy)

    module.nvmlDeviceGetViolationStatus = lost_thermal
    device = read_nvml(module).devices[0]
    assert device.counters.violations.thermal_ns is None and device.counters.violations.power_ns == 0
    assert device.missing == ["counters.violations.thermal_ns: GPU is lost"]
    del module.nvmlDeviceGetViolationStatus  # bindings without the call: one line, not one per policy
    device = read_nvml(module).devices[0]
    assert device.counters.violations.power_ns is None
    assert device.missing == ["counters.violations: this pynvml has no nvmlDeviceGetViolationStatus"]


@pytest.mark.parametrize(
    ("code", "text"), [(13000, "13.0"), (12080, "12.8"), (12020, "12.2"), (11040, "11.4")]
)
def test_cuda_driver_version(code: int, text: str) -> None:
    assert cuda_version_text(code) == text


# --- sysfs: AER and InfiniBand ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bus_id", "name"),
    [
        ("00000000:1B:00.0", "0000:1b:00.0"),
        ("0000:9d:00", "0000:9d:00.0"),
        ("00000001:C3:1F.7", "0001:c3:1f.7"),
    ],
)
def test_sysfs_bus_id(bus_id: str, name: str) -> None:
    assert sysfs_bus_id(bus_id) == name


def write_aer(device: Path, files: dict[str, str]) -> None:
    device.mkdir(parents=True)
    for name, text in files.items():
        (device / name).write_text(text)


def test_aer_totals_from_sysfs_and_a_gpu_without_aer_files(tmp_path: Path) -> None:
    pci = tmp_path / "pci"
    write_aer(pci / "0000:1b:00.0", AER)
    (pci / "0000:43:00.0").mkdir()  # the device is there, its AER files are not (a VM)
    facts = facts_of(nvl_pair(), tmp_path)
    first, second = facts["devices"]
    assert first["counters"]["aer"] == {"correctable": 3, "nonfatal": 1, "fatal": 0}
    assert first["missing"] == []
    assert second["counters"]["aer"] == {"correctable": None, "nonfatal": None, "fatal": None}
    assert f"counters.aer: no AER files in sysfs ({pci / '0000:43:00.0'})" in second["missing"]


def test_aer_file_without_its_total_is_null_and_named(tmp_path: Path) -> None:
    device = tmp_path / "0000:1b:00.0"
    write_aer(device, {"aer_dev_correctable": "RxErr 0\nBadTLP 0\n", "aer_dev_nonfatal": AER_NONFATAL})
    missing: list[str] = []
    aer = read_aer(tmp_path, "00000000:1B:00.0", missing)
    assert (aer.correctable, aer.nonfatal, aer.fatal) == (None, 1, None)
    assert missing == [
        f"counters.aer.correctable: no TOTAL_ERR_COR line ({device / 'aer_dev_correctable'})",
        f"counters.aer.fatal: No such file or directory ({device / 'aer_dev_fatal'})",
    ]


def write_ib_port(
    root: Path, device: str, port: int, files: dict[str, str], counters: dict[str, int]
) -> None:
    folder = root / device / "ports" / str(port)
    (folder / "counters").mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_text(text + "\n")
    for name, count in counters.items():
        (folder / "counters" / name).write_text(f"{count}\n")


def ib_tree(root: Path) -> Path:
    """Two ConnectX-7 ports as sysfs has them, the second cabled but down, one of its counters absent."""
    counters = {
        "symbol_error": 0, "link_downed": 1, "link_error_recovery": 0, "port_rcv_errors": 12,
        "excessive_buffer_overrun_errors": 0,
    }  # fmt: skip
    write_ib_port(root, "mlx5_0", 1, {"state": "4: ACTIVE", "rate": "400 Gb/sec (4X NDR)",
                                      "link_layer": "InfiniBand"}, counters)  # fmt: skip
    down = {k: v for k, v in counters.items() if k != "excessive_buffer_overrun_errors"}
    write_ib_port(root, "mlx5_1", 1, {"state": "1: DOWN", "rate": "10 Gb/sec (4X SDR)",
                                      "link_layer": "InfiniBand"}, down | {"link_downed": 7})  # fmt: skip
    for device in ("mlx5_0", "mlx5_1"):
        (root / device / "fw_ver").write_text("28.39.1002\n")
    return root


RDMA_PORTS = [
    {"device": "mlx5_0", "port": 1, "state": "ACTIVE", "rate": "400 Gb/sec (4X NDR)",
     "link_layer": "InfiniBand", "fw_ver": "28.39.1002",
     "counters": {"symbol_error": 0, "link_downed": 1, "link_error_recovery": 0, "port_rcv_errors": 12,
                  "excessive_buffer_overrun_errors": 0}},
    {"device": "mlx5_1", "port": 1, "state": "DOWN", "rate": "10 Gb/sec (4X SDR)",
     "link_layer": "InfiniBand", "fw_ver": "28.39.1002",
     "counters": {"symbol_error": 0, "link_downed": 7, "link_error_recovery": 0, "port_rcv_errors": 12,
                  "excessive_buffer_overrun_errors": None}},
]  # fmt: skip
RDMA_MISSING = ["rdma.mlx5_1/1.counters: No such file or directory (excessive_buffer_overrun_errors)"]


def test_infiniband_ports_from_sysfs(tmp_path: Path) -> None:
    missing: list[str] = []
    ports = read_rdma(ib_tree(tmp_path / "ib"), missing)
    assert [asdict(port) for port in ports] == RDMA_PORTS
    assert missing == RDMA_MISSING


def test_a_host_without_infiniband_has_no_ports_and_nothing_missing(tmp_path: Path) -> None:
    missing: list[str] = []
    assert read_rdma(tmp_path / "no-such-folder", missing) == [] and missing == []


def test_read_at_and_kernel_whatever_the_source(tmp_path: Path) -> None:
    before = time.time()
    facts = facts_of(nvl_pair(), tmp_path)
    assert before <= facts["read_at"] <= time.time()
    assert facts["kernel"] == os.uname().release and facts["rdma"] == []


# --- the subcommands ----------------------------------------------------------------------------------------


def test_facts_subcommand_reads_the_sysfs_trees_it_is_given(tmp_path: Path) -> None:
    """Without torch and pynvml, as the preflight runs it: nvidia-smi answers for the GPUs, the trees for
    their AER files and the host's InfiniBand ports."""
    pci = tmp_path / "pci"
    write_aer(pci / "0000:18:00.0", AER)
    ib = ib_tree(tmp_path / "ib")
    smi = "printf '%s\\n' " + " ".join(shlex.quote(line) for line in H100_SXM_CSV.splitlines()) + "\n"
    options = ("--infiniband-sysfs", str(ib), "--pci-sysfs", str(pci))
    proc = facts_subprocess(tmp_path, {"nvidia-smi": smi}, *options)
    assert proc.returncode == 0
    facts = json.loads(proc.stdout)
    assert facts["source"] == "nvidia-smi" and facts["cuda_driver"] is None
    assert facts["rdma"] == RDMA_PORTS
    assert facts["missing"][-1:] == RDMA_MISSING
    first, second = facts["devices"]
    assert first["counters"]["aer"] == {"correctable": 3, "nonfatal": 1, "fatal": 0}
    assert f"counters.aer: no AER files in sysfs ({pci / '0000:2a:00.0'})" in second["missing"]
    # What only NVML says stays null under nvidia-smi.
    assert first["state"]["persistence_mode"] is None and first["counters"]["nvlink"] == []


def test_host_facts_take_the_sysfs_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ib = ib_tree(tmp_path / "ib")
    assert main(["host-facts", "--infiniband-sysfs", str(ib), "--pci-sysfs", str(tmp_path)]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["gpus"]["rdma"] == RDMA_PORTS


def test_host_memory_is_read_from_meminfo_and_an_unreadable_file_is_named(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal: 263998500 kB\nMemFree: 261364328 kB\nMemAvailable: 263075644 kB\n")
    missing: list[str] = []
    assert read_host_memory(missing, meminfo) == HostMemory(257811, 256909)
    assert missing == []
    assert read_host_memory(missing, tmp_path / "gone") == HostMemory()
    assert missing == [f"host_memory: {tmp_path / 'gone'} unreadable ([Errno 2] No such file or directory: "
                       f"'{tmp_path / 'gone'}')"]  # fmt: skip
