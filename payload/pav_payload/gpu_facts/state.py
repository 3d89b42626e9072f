"""A GPU's settings and standing through NVML: persistence and MIG mode, InfoROM, VBIOS, application clocks,
the driver's recovery action, the NVSwitch fabric registration."""

from __future__ import annotations

import ctypes
import uuid
from types import ModuleType
from typing import Any

from pav_payload.gpu_facts.decode import enabled_state, field_value, nvml_text
from pav_payload.gpu_facts.missing import Missing
from pav_payload.gpu_facts.output import GpuFabric, GpuState

# nvml.h; older bindings lack some of the constants, the driver knows them all.
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_CORRUPTED_INFOROM = 14
NVML_FI_DEV_GET_GPU_RECOVERY_ACTION = 271
# sizeof(nvmlGpuFabricInfo_v2_t) | 2 << 24: what the 580 driver's bindings set (the recordings' 33554468).
NVML_GPU_FABRIC_INFO_V2 = 0x02000024
NVML_GPU_FABRIC_STATE_NOT_SUPPORTED = 0


def read_state(nvml: ModuleType, h: Any, missing: Missing) -> GpuState:
    sm = nvml.NVML_CLOCK_SM
    not_supported = int(getattr(nvml, "NVML_ERROR_NOT_SUPPORTED", NVML_ERROR_NOT_SUPPORTED))
    corrupted = int(getattr(nvml, "NVML_ERROR_CORRUPTED_INFOROM", NVML_ERROR_CORRUPTED_INFOROM))
    return GpuState(
        persistence_mode=missing.read(
            "state.persistence_mode", lambda: enabled_state(nvml.nvmlDeviceGetPersistenceMode(h))
        ),
        # A GPU without MIG answers NotSupported: a fact of the board, not "disabled" and not a gap.
        mig_mode=missing.read_or(
            "state.mig_mode",
            lambda: enabled_state(nvml.nvmlDeviceGetMigMode(h)[0]),
            {not_supported: "unsupported"},
        ),
        # The check answers nothing; NVML says a corrupted InfoROM by raising.
        inforom_valid=missing.read_or(
            "state.inforom_valid", lambda: _validate_inforom(nvml, h), {corrupted: False}
        ),
        vbios=missing.read("state.vbios", lambda: nvml_text(nvml.nvmlDeviceGetVbiosVersion(h))),
        app_clock_sm_mhz=missing.read(
            "state.app_clock_sm_mhz", lambda: int(nvml.nvmlDeviceGetApplicationsClock(h, sm))
        ),
        app_clock_sm_default_mhz=missing.read(
            "state.app_clock_sm_default_mhz", lambda: int(nvml.nvmlDeviceGetDefaultApplicationsClock(h, sm))
        ),
        recovery_action=missing.read("state.recovery_action", lambda: _recovery_action(nvml, h)),
        # A board without NVSwitch fabric (a PCIe card) answers NotSupported: no fabric, not a gap.
        fabric=missing.read_or("state.fabric", lambda: _fabric(nvml, h), {not_supported: None}),
    )


def _validate_inforom(nvml: ModuleType, h: Any) -> bool:
    nvml.nvmlDeviceValidateInforom(h)
    return True


def _recovery_action(nvml: ModuleType, h: Any) -> int:
    field_id = int(getattr(nvml, "NVML_FI_DEV_GET_GPU_RECOVERY_ACTION", NVML_FI_DEV_GET_GPU_RECOVERY_ACTION))
    [value] = nvml.nvmlDeviceGetFieldValues(h, [field_id])
    return field_value(value)


def _fabric(nvml: ModuleType, h: Any) -> GpuFabric | None:
    """The versioned call with a v2 structure the caller fills in: the unversioned nvmlGpuFabricInfo_t of
    these bindings is misaligned with the 580 driver (its state reads 0; the real 3 lands in clusterUuid)."""
    info = nvml.c_nvmlGpuFabricInfoV_t()
    info.version = int(getattr(nvml, "nvmlGpuFabricInfo_v2", NVML_GPU_FABRIC_INFO_V2))
    nvml.nvmlDeviceGetGpuFabricInfoV(h, ctypes.byref(info))
    if int(info.state) == NVML_GPU_FABRIC_STATE_NOT_SUPPORTED:  # the other way a board says it has none
        return None
    return GpuFabric(
        state=int(info.state),
        status=int(info.status),
        clique_id=int(info.cliqueId),
        cluster_uuid=_cluster_uuid(info),
        health_mask=int(info.healthMask),
    )


def _cluster_uuid(info: Any) -> str:
    # Read the raw bytes: a binding that declares the field as c_char would cut it at its first zero byte.
    declared = getattr(type(info), "clusterUuid", None)
    if isinstance(info, ctypes.Structure) and declared is not None:
        raw = ctypes.string_at(ctypes.addressof(info) + declared.offset, declared.size)
    else:
        raw = bytes(info.clusterUuid)
    return str(uuid.UUID(bytes=raw)) if len(raw) == 16 else raw.hex()
