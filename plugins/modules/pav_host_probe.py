#!/usr/bin/python
"""Read a GPU host's facts in one module run: OS, CPU, memory, NUMA, limits, /dev/shm, GPUs (nvidia-smi),
RDMA ports and storage mounts.

One module instead of the nine tasks it replaces (setup, three nvidia-smi commands, a shell, find, findmnt,
an RDMA shell): each task is a Python start on the host and a round trip, which cost more than the reads.
"""

from __future__ import annotations

DOCUMENTATION = r"""
module: pav_host_probe
short_description: Read a GPU host's facts (OS, CPU, limits, GPUs, RDMA, mounts) in one run
description:
  - Read-only. Sets the host fact C(preflight_facts) itself, since a set_fact after it was one more task
    run per host (issue 65).
  - nvidia-smi's three reads (GPU list, topology, header) run at once.
  - A host without nvidia-smi reports zero GPUs.
options:
  nvidia_smi:
    description: nvidia-smi to query.
    type: str
    default: nvidia-smi
  gpu_ids:
    description: The GPUs this host owns as nvidia-smi indices ("0,1"); empty means every GPU.
    type: str
    default: ""
  infiniband_sysfs:
    description: sysfs folder listing RDMA devices.
    type: path
    default: /sys/class/infiniband
  rdma_ports_expected:
    description:
      - The RDMA ports the env says the host has (its InfiniBand or RoCE fabric's ports), recorded as
        C(rdma.ports_expected) beside the ports found; 0 records nothing and every port found counts.
    type: int
    default: 0
  mount_fstypes:
    description: Filesystem types findmnt lists as the host's mounts.
    type: list
    elements: str
    default: []
author: provision-and-validate
"""

RETURN = r"""
ansible_facts:
  description: C(preflight_facts), with the host's hostname, kernel, os, cpu, memory_mb, numa_nodes, gpu,
    rdma, mounts, shm and ulimits.
  returned: success
  type: dict
"""

import glob
import json
import os
import platform
import re
import resource
import subprocess
from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.facts.system.distribution import DistributionFactCollector

GPU_FIELDS = "index,name,memory.total,driver_version,pci.bus_id,mig.mode.current,vbios_version"
# nvidia-smi colours topo -m (underlined headers) even into a pipe; the fact is plain text.
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")


def start(argv: list[str]) -> subprocess.Popen[str] | None:
    try:
        return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    except OSError:
        return None


def finish(proc: subprocess.Popen[str] | None) -> tuple[int, str]:
    if proc is None:
        return 127, ""
    out, _ = proc.communicate()
    return proc.returncode, out.rstrip("\n")


def gpus(nvidia_smi: str, gpu_ids: str) -> dict[str, Any]:
    query = [nvidia_smi, f"--query-gpu={GPU_FIELDS}", "--format=csv,noheader,nounits"]
    running = [start(query + ([f"--id={gpu_ids}"] if gpu_ids else [])), start([nvidia_smi, "topo", "-m"])]
    running.append(start([nvidia_smi]))
    (rc, listing), (_, topo), (_, header) = (finish(p) for p in running)
    rows = [line.split(", ") for line in listing.splitlines()] if rc == 0 else []
    cuda = re.search(r"CUDA Version: *([0-9.]+)", header) if rc == 0 else None
    return {
        "count": len(rows),
        "ids": gpu_ids,  # the GPUs this host owns; the driver matches NVML's facts to them by bus id
        "devices": rows,
        "driver": rows[0][3] if rows and len(rows[0]) > 3 else "",
        "cuda": cuda.group(1) if cuda else "",
        "topology": ANSI_ESCAPE.sub("", topo) if rc == 0 else "",
        "nvidia_smi": "ok" if rc == 0 else "absent",
    }


def rdma_ports(sysfs: str) -> list[str]:
    """'DEV PORT STATE|RATE|LINK_LAYER' per port, as ibstat would name them."""

    def read(path: str, default: str = "") -> str:
        try:
            with open(path) as handle:
                return handle.read().strip()
        except OSError:
            return default

    lines = []
    for port in sorted(glob.glob(os.path.join(sysfs, "*", "ports", "*"))):
        if os.path.isdir(port):
            dev = os.path.basename(os.path.dirname(os.path.dirname(port)))
            state, rate = read(os.path.join(port, "state")), read(os.path.join(port, "rate"))
            layer = read(os.path.join(port, "link_layer"), "unknown")
            lines.append(f"{dev} {os.path.basename(port)} {state}|{rate}|{layer}")
    return lines


def mounts(module: AnsibleModule, fstypes: list[str]) -> list[dict[str, Any]]:
    """Filesystems a job may read or write; findmnt exits 1 when none of the types is mounted."""
    argv = ["findmnt", "--json", "--list", "--output", "TARGET,FSTYPE,SOURCE", "--types", ",".join(fstypes)]
    rc, out, err = module.run_command(argv)
    if rc not in (0, 1):
        module.fail_json(msg=f"findmnt failed (exit {rc}): {err.strip() or out.strip()}", rc=rc)
    return json.loads(out or "{}").get("filesystems", [])


def limit(which: int, kib: bool = False) -> tuple[str, str]:
    """Soft and hard limits as bash's ulimit prints them (memlock in KiB)."""
    return tuple(  # type: ignore[return-value]
        "unlimited" if value == resource.RLIM_INFINITY else str(value // 1024 if kib else value)
        for value in resource.getrlimit(which)
    )


def lines(path: str) -> list[str]:
    with open(path) as handle:
        return handle.read().splitlines()


def host(module: AnsibleModule) -> dict[str, Any]:
    meminfo = dict(line.split(":", 1) for line in lines("/proc/meminfo") if ":" in line)
    cpuinfo = [ln.split(":", 1)[1].strip() for ln in lines("/proc/cpuinfo") if ln.startswith("model name")]
    dist = DistributionFactCollector().collect(module=module)
    shm = os.statvfs("/dev/shm") if os.path.isdir("/dev/shm") else None
    nodes = [p for p in glob.glob("/sys/devices/system/node/node[0-9]*") if os.path.isdir(p)]
    memlock, nofile = limit(resource.RLIMIT_MEMLOCK, kib=True), limit(resource.RLIMIT_NOFILE)
    return {
        "hostname": platform.node().split(".")[0],
        "kernel": platform.release(),
        "os": f"{dist.get('distribution', '')} {dist.get('distribution_version', '')}",
        "cpu": {"model": cpuinfo[0] if cpuinfo else "unknown", "vcpus": len(os.sched_getaffinity(0))},
        "memory_mb": int(meminfo.get("MemTotal", "0 kB").split()[0]) // 1024,
        "numa_nodes": len(nodes),
        "shm": {"size_bytes": shm.f_blocks * shm.f_frsize if shm else 0},
        "ulimits": {
            "memlock_soft": memlock[0],
            "memlock_hard": memlock[1],
            "nofile_soft": nofile[0],
            "nofile_hard": nofile[1],
        },
    }


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "nvidia_smi": {"type": "str", "default": "nvidia-smi"},
            "gpu_ids": {"type": "str", "default": ""},
            "infiniband_sysfs": {"type": "path", "default": "/sys/class/infiniband"},
            "rdma_ports_expected": {"type": "int", "default": 0},
            "mount_fstypes": {"type": "list", "elements": "str", "default": []},
        },
        supports_check_mode=True,
    )
    params = module.params
    facts = host(module)
    facts["gpu"] = gpus(params["nvidia_smi"], params["gpu_ids"])
    ports = rdma_ports(params["infiniband_sysfs"])
    facts["rdma"] = {"ports": ports, "hcas": list(dict.fromkeys(p.split(" ")[0] for p in ports))}
    if params["rdma_ports_expected"] > 0:  # the env's word, beside what the host says (thresholds.md)
        facts["rdma"]["ports_expected"] = params["rdma_ports_expected"]
    facts["mounts"] = mounts(module, params["mount_fstypes"])
    module.exit_json(changed=False, ansible_facts={"preflight_facts": facts})


if __name__ == "__main__":
    main()
