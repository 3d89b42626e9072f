"""A GPU's NVLink links through NVML: state, far end (GPU or switch), speed, generation."""

from __future__ import annotations

from types import ModuleType
from typing import Any

from pav_payload.gpu_facts.decode import FieldValueError, field_value, normalize_bus_id, nvml_text
from pav_payload.gpu_facts.missing import LinkMissing, Missing, describe_error, error_code
from pav_payload.gpu_facts.output import Device, NvLink, NvLinkLink

# nvmlDeviceGetNvLinkVersion answers with nvmlNvlinkVersion_t, not the NVLink generation (an H100 says 6,
# NVML_NVLINK_VERSION_4_0; an A100 5, NVML_NVLINK_VERSION_3_1): the facts carry the generation.
NVLINK_GENERATION = {1: 1, 2: 2, 3: 2, 4: 3, 5: 3, 6: 4, 7: 5, 8: 6}
# nvmlNvLinkDeviceType_t; 1 is an IBM NPU (a POWER9 CPU), neither a GPU nor a switch.
NVLINK_REMOTE_TYPES = {0: "gpu", 2: "switch"}
NVML_FI_DEV_NVLINK_GET_SPEED = 164  # nvml.h; older bindings lack the constant but the driver knows it


def read_nvlink(nvml: ModuleType, h: Any, missing: Missing) -> NvLink:
    """Every link index NVML answers for; NotSupported or InvalidArgument means no such link on the board."""
    if not hasattr(nvml, "nvmlDeviceGetNvLinkState"):
        missing.items.append("nvlink: this pynvml has no nvmlDeviceGetNvLinkState")
        return NvLink.unknown()
    absent = {getattr(nvml, "NVML_ERROR_NOT_SUPPORTED", 3), getattr(nvml, "NVML_ERROR_INVALID_ARGUMENT", 2)}
    links: list[NvLinkLink] = []
    per_link = LinkMissing("nvlink.links")
    for link in range(int(getattr(nvml, "NVML_NVLINK_MAX_LINKS", 18))):
        try:
            state = nvml.nvmlDeviceGetNvLinkState(h, link)
        except Exception as exc:  # see Missing.read
            if error_code(exc) not in absent:
                per_link.add("up", describe_error(exc), link)
            continue
        links.append(NvLinkLink(link=link, up=bool(state)))
    unreadable = bool(per_link.failed)
    if not links and not unreadable:
        return NvLink()  # a board without NVLink: a fact, not a gap
    up = [entry for entry in links if entry.up]
    _nvml_link_peers(nvml, h, up, per_link)
    _nvml_link_speeds(nvml, h, up, per_link)
    missing.items.extend(per_link.lines())
    asked = up[0] if up else (links[0] if links else None)
    version = None
    if asked is not None:
        version = missing.read(
            "nvlink.version", lambda: _nvlink_generation(nvml.nvmlDeviceGetNvLinkVersion(h, asked.link))
        )
    if unreadable:  # some link's state is unknown, so are the counts
        return NvLink(version, None, None, links)
    return NvLink(version, len(links), sum(1 for entry in links if entry.up), links)


def _nvlink_generation(code: Any) -> int:
    if int(code) not in NVLINK_GENERATION:
        raise ValueError(f"unknown nvmlNvlinkVersion_t {int(code)}")
    return NVLINK_GENERATION[int(code)]


def _nvml_link_peers(nvml: ModuleType, h: Any, up: list[NvLinkLink], per_link: LinkMissing) -> None:
    remote_pci = getattr(nvml, "nvmlDeviceGetNvLinkRemotePciInfo_v2", None) or getattr(
        nvml, "nvmlDeviceGetNvLinkRemotePciInfo", None
    )
    remote_type = getattr(nvml, "nvmlDeviceGetNvLinkRemoteDeviceType", None)
    for entry in up:
        if remote_pci is None:
            per_link.add("remote_bus_id", "this pynvml has no nvmlDeviceGetNvLinkRemotePciInfo", entry.link)
        else:
            try:
                bus = normalize_bus_id(nvml_text(remote_pci(h, entry.link).busId))
                # A switch port without a PCI function of its own reads as all zeros: no bus id to give.
                entry.remote_bus_id = None if bus == "00000000:00:00.0" else bus
            except Exception as exc:  # see Missing.read
                per_link.add("remote_bus_id", describe_error(exc), entry.link)
        # Empty until resolve_remote_types: NVML's answer where it gives one, else the bus id decides.
        entry.remote_type = ""
        if remote_type is not None:
            try:
                entry.remote_type = NVLINK_REMOTE_TYPES.get(int(remote_type(h, entry.link)), "unknown")
            except Exception:  # older drivers: the bus id rule below answers instead
                entry.remote_type = ""


def _nvml_link_speeds(nvml: ModuleType, h: Any, up: list[NvLinkLink], per_link: LinkMissing) -> None:
    if not up:
        return
    field_id = int(getattr(nvml, "NVML_FI_DEV_NVLINK_GET_SPEED", NVML_FI_DEV_NVLINK_GET_SPEED))
    try:
        values = nvml.nvmlDeviceGetFieldValues(h, [(field_id, entry.link) for entry in up])
    except Exception as exc:  # see Missing.read
        for entry in up:
            per_link.add("speed_mbps", describe_error(exc), entry.link)
        return
    for entry, value in zip(up, values, strict=False):
        try:
            entry.speed_mbps = field_value(value)
        except FieldValueError as exc:
            per_link.add("speed_mbps", str(exc), entry.link)


def resolve_remote_types(devices: list[Device]) -> None:
    """Where NVML did not say what is at a link's far end: one of this host's GPUs if its bus id is, else
    a switch. A GPU's NVLink ends at a GPU of its host or at a switch, so a peer that is not one of its
    GPUs (or has no PCI function to name, as NVSwitch ports often have not) is a switch. A link that is
    down has no far end: unknown."""
    gpus = {device.pci_bus_id for device in devices if device.pci_bus_id}
    for device in devices:
        for link in device.nvlink.links:
            if not link.up:
                link.remote_type = "unknown"
            elif not link.remote_type:
                link.remote_type = "gpu" if link.remote_bus_id in gpus else "switch"
