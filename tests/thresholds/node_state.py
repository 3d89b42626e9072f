"""facts.gpus as the payload's NVML reader records it (issue 50's state, versions and counters included), from
a recording's raw NVML answers (tests/payload/fixtures/node-state), for the node-state checks' tests."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

NODE_STATE = Path(__file__).resolve().parents[1] / "payload" / "fixtures" / "node-state"
MIB = 1 << 20
# The before/after recordings were taken around a 30-s all_reduce (their README): 35 s between the reads.
LOAD_S = 35.0


def _enabled(value: int) -> str:
    return "enabled" if value else "disabled"


def _device(gpu: dict[str, Any], pci: dict[str, Any]) -> dict[str, Any]:
    bus = gpu["nvmlDeviceGetPciInfo"]["value"]["busId"]
    fabric = gpu["fabric"]["nvmlDeviceGetGpuFabricInfoV"]["value"]
    links = [x for x in gpu["nvlink"] if x["state"].get("value")]
    return {
        "index": gpu["index"],
        "name": gpu["nvmlDeviceGetName"]["value"],
        "uuid": gpu["nvmlDeviceGetUUID"]["value"],
        "pci_bus_id": bus,
        "sm_clock_max_mhz": gpu["nvmlDeviceGetMaxClockInfo"]["value"],
        "pcie": {"gen_current": gpu["nvmlDeviceGetCurrPcieLinkGeneration"]["value"],
                 "gen_max": gpu["nvmlDeviceGetMaxPcieLinkGeneration"]["value"],
                 "width_current": gpu["nvmlDeviceGetCurrPcieLinkWidth"]["value"],
                 "width_max": gpu["nvmlDeviceGetMaxPcieLinkWidth"]["value"]},
        "nvlink": {"version": 4, "links_total": len(gpu["nvlink"]), "links_up": len(links),
                   "links": [{"link": x["link"], "up": True, "remote_type": "gpu"} for x in links]},
        "ecc": {"mode_current": _enabled(gpu["nvmlDeviceGetEccMode"]["value"][0]),
                "uncorrectable_volatile": 0, "uncorrectable_aggregate": 0},
        "power": {"limit_w": gpu["nvmlDeviceGetPowerManagementLimit"]["value"] / 1000,
                  "default_limit_w": gpu["nvmlDeviceGetPowerManagementDefaultLimit"]["value"] / 1000},
        "state": {
            "persistence_mode": _enabled(gpu["nvmlDeviceGetPersistenceMode"]["value"]),
            "mig_mode": _enabled(gpu["nvmlDeviceGetMigMode"]["value"][0]),
            "inforom_valid": "error" not in gpu["nvmlDeviceValidateInforom"],
            "vbios": gpu["nvmlDeviceGetVbiosVersion"]["value"],
            "app_clock_sm_mhz": gpu["nvmlDeviceGetApplicationsClock"]["value"],
            "app_clock_sm_default_mhz": gpu["nvmlDeviceGetDefaultApplicationsClock"]["value"],
            "recovery_action": gpu["fields"]["recovery_action"]["value"]["ullVal"],
            "fabric": {"state": fabric["state"], "status": fabric["status"],
                       "clique_id": fabric["cliqueId"], "cluster_uuid": bytes(fabric["clusterUuid"]).hex(),
                       "health_mask": fabric["healthMask"]},
        },
        "counters": {
            "pcie_replay": gpu["nvmlDeviceGetPcieReplayCounter"]["value"],
            "aer": {k: pci.get(f"aer_dev_{k}") for k in ("correctable", "nonfatal", "fatal")},
            "nvlink": [{"link": x["link"], **{k: x["counters"][k]["value"]
                                              for k in ("replay", "recovery", "crc_flit", "crc_data")}}
                       for x in links],
        },
    }  # fmt: skip


def recorded(name: str, read_at: float = 0.0) -> dict[str, Any]:
    """A host's facts: facts.gpus (with read_at) and facts.torch, from the recording `name`."""
    raw = json.loads((NODE_STATE / name).read_text())
    system, versions = raw["system"], raw["versions"]
    cuda = system["nvmlSystemGetCudaDriverVersion_v2"]["value"]
    gpus = {
        "source": "nvml",
        "driver": system["nvmlSystemGetDriverVersion"]["value"],
        "cuda_driver": f"{cuda // 1000}.{cuda % 1000 // 10}",
        "kernel": versions["kernel"],
        "read_at": read_at,
        "devices": [_device(g, raw["pci"].get(g["nvmlDeviceGetPciInfo"]["value"]["busId"]) or {})
                    for g in raw["gpus"]],
        "rdma": [],
    }  # fmt: skip
    torch = {"version": versions["torch"], "nccl": versions["nccl"]}
    return {"gpus": gpus, "torch": torch}


def around_load(machine: str) -> dict[str, Any]:
    """A host's facts with the configure read (before) and the read after the tests (gpus_after)."""
    facts = recorded(f"{machine}-before-load.json")
    facts["gpus_after"] = recorded(f"{machine}-after-load.json", read_at=LOAD_S)["gpus"]
    return facts


def changed(facts: dict[str, Any]) -> dict[str, Any]:
    return copy.deepcopy(facts)
