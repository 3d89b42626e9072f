"""roles/nccl_env's derivation on hosts, as Ansible runs it: the fabric and the HCAs preflight found give
NCCL_IB_HCA, UCX_NET_DEVICES and the rest (the sim hosts have no HCAs; tests/sim checks the socket case's
files inside each host)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.k8s.test_fabric import derive_with_ansible

pytestmark = pytest.mark.slow  # real ansible-playbook runs

HCAS = [f"mlx5_{i}" for i in range(8)] + ["irdma0"]  # 8 ConnectX (Nebius' H100 nodes) and a non-mlx5 NIC


@pytest.mark.parametrize(
    ("fabric", "expected"),
    [
        ("infiniband", {"NCCL_IB_DISABLE": "0", "NCCL_IB_HCA": ",".join(f"mlx5_{i}:1" for i in range(8))}),
        ("roce", {"NCCL_IB_DISABLE": "0", "NCCL_IB_GID_INDEX": "3"}),
        ("socket", {"NCCL_IB_DISABLE": "1"}),
    ],
)
def test_hosts_hcas_become_the_ib_and_ucx_device_lists(
    fabric: str, expected: dict[str, str], tmp_path: Path
) -> None:
    """On hosts, nccl_env derives NCCL_IB_HCA and UCX_NET_DEVICES from the mlx5 HCAs preflight found
    (an explicit nccl_env_ib_hca unset), for each fabric, as Ansible runs it."""
    group_vars = tmp_path / "vars.yml"
    facts = {"rdma": {"hcas": HCAS}}
    group_vars.write_text(yaml.safe_dump({"nccl_env_fabric": fabric, "nccl_env_socket_ifname": "eth0",
                                          "preflight_facts": facts}))  # fmt: skip
    derived = derive_with_ansible(group_vars, tmp_path)
    assert {k: derived.get(k) for k in expected} == expected
    if fabric == "socket":
        assert "NCCL_IB_HCA" not in derived and "UCX_NET_DEVICES" not in derived
    else:
        assert (
            derived["UCX_NET_DEVICES"] == derived["NCCL_IB_HCA"] == ",".join(f"mlx5_{i}:1" for i in range(8))
        )
    assert derived["NCCL_SOCKET_IFNAME"] == "eth0"
