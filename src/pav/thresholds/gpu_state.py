"""A GPU's settings and state against the node policy (thresholds/node_policy.py), from the facts alone:
part of gpu_health, each problem naming the GPU. The rules and their sources are in docs/thresholds.md
("Node state").

What NVML reports as not supported is no problem: a PCIe board has no fabric, an H100 PCIe no MIG to
disable (gpud PR #1147 flagged "fabric not supported" as unhealthy; that is wrong).
"""

from __future__ import annotations

from typing import Any

from pav.thresholds.node_policy import NodePolicy

# NVML_FI_DEV_GET_GPU_RECOVERY_ACTION (nvml.h, nvmlDeviceGpuRecoveryAction_t): 0 is none.
RECOVERY_ACTIONS = {
    1: "a GPU reset",
    2: "a node reboot",
    3: "a drain of peer-to-peer traffic",
    4: "a drain and reset",
}
# nvmlGpuFabricState_t: 3 is completed. 0 (not supported) is no fabric to judge.
FABRIC_STATES = {0: "not supported", 1: "not started", 2: "in progress", 3: "completed"}
FABRIC_COMPLETED = 3
# nvmlGpuFabricInfo_v2.healthMask: two bits per field, 1 = the condition holds (0 not supported, 2 false).
FABRIC_HEALTH = {0: "degraded bandwidth", 2: "route recovery in progress", 4: "route unhealthy",
                 6: "access timeout recovery in progress"}  # fmt: skip
FABRIC_TRUE = 1


CATEGORY = "config"  # a setting not as the policy expects: the operator's to set, not a failing part


def setting_problems(dev: dict[str, Any], label: str, policy: NodePolicy) -> list[str]:
    """This GPU's settings that are not what the policy expects, each naming the GPU and the setting."""
    state = dev.get("state") or {}
    want = policy.gpu_state
    out = [
        f"{label}: {what} {have} (expected {expected}; pav_gpu_state.{key})"
        for key, what, have, expected in (
            ("persistence_mode", "persistence mode", state.get("persistence_mode"), want["persistence_mode"]),
            ("mig_mode", "MIG mode", state.get("mig_mode"), want["mig_mode"]),
            ("ecc_mode", "ECC", (dev.get("ecc") or {}).get("mode_current"), want["ecc_mode"]),
        )
        if _differs(have, expected)
    ]
    return out + _clock_problems(dev, state, label, want["app_clocks"])


def state_problems(dev: dict[str, Any], label: str) -> list[str]:
    """What the GPU's own state says is wrong with it: InfoROM, the driver's recovery action, its fabric."""
    state = dev.get("state") or {}
    out = []
    if state.get("inforom_valid") is False:
        out.append(f"{label}: InfoROM corrupted (NVML's validation failed): the board needs service")
    action = state.get("recovery_action")
    if action:
        out.append(
            f"{label}: the driver asks for {RECOVERY_ACTIONS.get(action, f'recovery action {action}')}"
        )
    return out + fabric_problems(state.get("fabric"), label)


def _differs(have: Any, expected: str) -> bool:
    # "unsupported" (a GPU without MIG) is as good as disabled; an unread value (None) is named elsewhere.
    if expected == "any" or have is None:
        return False
    return ("disabled" if have == "unsupported" else have) != expected


def _clock_problems(dev: dict[str, Any], state: dict[str, Any], label: str, rule: str) -> list[str]:
    clock = state.get("app_clock_sm_mhz")
    floor = {"default": state.get("app_clock_sm_default_mhz"), "max": dev.get("sm_clock_max_mhz")}.get(rule)
    if not isinstance(clock, int) or not isinstance(floor, int) or clock >= floor:
        return []
    return [
        f"{label}: application SM clock {clock} MHz under its {rule} {floor} MHz (pav_gpu_state.app_clocks)"
    ]


def fabric_problems(fabric: dict[str, Any] | None, label: str) -> list[str]:
    """An NVSwitch fabric that did not finish registering the GPU, failed, or reports a condition."""
    if not fabric or fabric.get("state") in (None, 0):
        return []
    out = []
    state, status = fabric.get("state"), fabric.get("status")
    if state != FABRIC_COMPLETED:
        out.append(f"{label}: GPU fabric {FABRIC_STATES.get(state, f'state {state}')}, not completed")
    elif status not in (None, 0):
        out.append(f"{label}: GPU fabric registration failed (status {status}: see the Fabric Manager log)")
    mask = fabric.get("health_mask") or 0
    out += [
        f"{label}: GPU fabric reports {what} (health mask {mask:#x})"
        for shift, what in FABRIC_HEALTH.items()
        if (mask >> shift) & 3 == FABRIC_TRUE
    ]
    return out


def ecc_mixed(devices: list[dict[str, Any]], labels: list[str]) -> list[tuple[str, str]]:
    """(part, problem) where the host's GPUs differ in ECC mode: a job spanning them would too."""
    modes = {lab: (d.get("ecc") or {}).get("mode_current") for d, lab in zip(devices, labels, strict=True)}
    seen = {m for m in modes.values() if m}
    if len(seen) < 2:
        return []
    off = [lab for lab, m in modes.items() if m == "disabled"]
    return [(lab, f"{lab}: ECC disabled where the host's other GPUs have it enabled") for lab in off]
