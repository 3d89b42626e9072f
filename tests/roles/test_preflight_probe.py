"""roles/preflight as Ansible runs it, on this machine with a stand-in nvidia-smi (answering as a real one on
2 GPUs does) and a sysfs tree of RDMA ports: the facts its one probe module returns."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pav import paths

pytestmark = pytest.mark.slow  # real ansible-playbook runs

# nvidia-smi --query-gpu=index,name,memory.total,driver_version,pci.bus_id,mig.mode.current,vbios_version
# --format=csv,noheader,nounits on 2 of an HGX H100's GPUs (driver 570), then what `nvidia-smi` and
# `nvidia-smi topo -m` print (topo underlines its header with ANSI escapes even into a pipe).
ROWS = (
    "0, NVIDIA H100 80GB HBM3, 81559, 570.133.20, 00000000:18:00.0, Disabled, 96.00.99.00.01\n"
    "1, NVIDIA H100 80GB HBM3, 81559, 570.133.20, 00000000:2A:00.0, Disabled, 96.00.99.00.01\n"
)
HEADER = "| NVIDIA-SMI 570.133.20    Driver Version: 570.133.20    CUDA Version: 12.8     |\n"
TOPO = "\x1b[4m\tGPU0\tGPU1\x1b[0m\nGPU0\t X \tNV18\nGPU1\tNV18\t X \n"
FAKE_SMI = """#!/bin/bash
here=$(dirname "$0")
echo "$@" >> "$here/calls"
case "$1" in
  --query-gpu=*) cat "$here/rows" ;;
  topo) cat "$here/topo" ;;
  *) cat "$here/header" ;;
esac
"""
FAILING_SMI = "#!/bin/bash\necho 'NVIDIA-SMI has failed because it could not communicate' >&2\nexit 9\n"


def probe(tmp_path: Path, role_vars: dict[str, object]) -> dict[str, object]:
    out = tmp_path / "facts.json"
    play = [
        {
            "name": "Preflight",
            "hosts": "localhost",
            "connection": "local",
            "gather_facts": False,
            "roles": [{"role": "preflight", "vars": role_vars}],
            "post_tasks": [
                {"ansible.builtin.copy": {"content": "{{ preflight_facts | to_json }}", "dest": str(out)}}
            ],
        }
    ]
    playbook = tmp_path / "play.yml"
    playbook.write_text(yaml.safe_dump(play))
    env = {**os.environ, "ANSIBLE_PYTHON_INTERPRETER": sys.executable, "ANSIBLE_ROLES_PATH": str(paths.ROLES)}
    ansible = Path(sys.executable).parent / "ansible-playbook"
    proc = subprocess.run([str(ansible), "-i", "localhost,", str(playbook)], env=env, capture_output=True,
                          text=True, timeout=120, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:]
    return json.loads(out.read_text())


def fake_host(tmp_path: Path) -> tuple[Path, Path]:
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir()
    smi.write_text(FAKE_SMI)
    for name, text in (("rows", ROWS), ("topo", TOPO), ("header", HEADER)):
        (smi.parent / name).write_text(text)
    smi.chmod(0o755)
    sysfs = tmp_path / "infiniband"
    for dev, state, layer in (("mlx5_0", "4: ACTIVE", "InfiniBand"), ("mlx5_1", "1: DOWN", None)):
        port = sysfs / dev / "ports" / "1"
        port.mkdir(parents=True)
        (port / "state").write_text(state + "\n")
        (port / "rate").write_text("400 Gb/sec (4X NDR)\n")
        if layer:
            (port / "link_layer").write_text(layer + "\n")
    return smi, sysfs


def test_gpus_rdma_and_host_facts_come_from_one_module_run(tmp_path: Path) -> None:
    smi, sysfs = fake_host(tmp_path)
    facts = probe(tmp_path, {"preflight_nvidia_smi": str(smi), "preflight_infiniband_sysfs": str(sysfs),
                             "preflight_gpu_ids": "0,1", "preflight_rdma_ports_expected": 8})  # fmt: skip
    gpu = facts["gpu"]
    assert gpu["count"] == 2 and gpu["nvidia_smi"] == "ok" and gpu["ids"] == "0,1"  # the GPUs this host owns
    assert gpu["devices"][1] == ["1", "NVIDIA H100 80GB HBM3", "81559", "570.133.20", "00000000:2A:00.0",
                                 "Disabled", "96.00.99.00.01"]  # fmt: skip
    assert gpu["driver"] == "570.133.20" and gpu["cuda"] == "12.8"
    assert gpu["topology"] == TOPO.replace("\x1b[4m", "").replace("\x1b[0m", "").rstrip("\n")
    assert "--id=0,1" in (smi.parent / "calls").read_text()
    assert facts["rdma"] == {
        "ports": [
            "mlx5_0 1 4: ACTIVE|400 Gb/sec (4X NDR)|InfiniBand",
            "mlx5_1 1 1: DOWN|400 Gb/sec (4X NDR)|unknown",
        ],
        "hcas": ["mlx5_0", "mlx5_1"],
        "ports_expected": 8,
    }
    # What bash's ulimit and /proc say in this very process tree.
    memlock = subprocess.run(["bash", "-c", "ulimit -Sl"], capture_output=True, text=True, check=True).stdout
    assert facts["ulimits"]["memlock_soft"] == memlock.strip()
    assert facts["cpu"]["vcpus"] == len(os.sched_getaffinity(0)) and facts["memory_mb"] > 0
    assert facts["numa_nodes"] >= 1 and facts["shm"]["size_bytes"] > 0
    assert isinstance(facts["mounts"], list) and facts["hostname"] and facts["kernel"] == os.uname().release


def test_a_host_whose_nvidia_smi_is_missing_or_fails_has_no_gpus(tmp_path: Path) -> None:
    missing = probe(tmp_path, {"preflight_nvidia_smi": str(tmp_path / "no-such-smi")})
    assert "ports_expected" not in missing["rdma"]  # preflight_rdma_ports_expected unset: nothing recorded
    assert missing["gpu"] == {"count": 0, "ids": "", "devices": [], "driver": "", "cuda": "", "topology": "",
                              "nvidia_smi": "absent"}  # fmt: skip
    failing = tmp_path / "failing-smi"
    failing.write_text(
        "#!/bin/bash\necho 'NVIDIA-SMI has failed because it could not communicate' >&2\nexit 9\n"
    )
    failing.chmod(0o755)
    assert probe(tmp_path, {"preflight_nvidia_smi": str(failing)})["gpu"]["nvidia_smi"] == "absent"
