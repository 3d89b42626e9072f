"""The NCCL/UCX environment of the env's fabric profile for pods: the nccl_env role's variables and rules.

On hosts, roles/nccl_env/vars/main.yml builds this from preflight's HCAs; pods have no preflight, so a
k8s env names its HCAs in nccl_env_ib_hca. tests/k8s/test_fabric.py renders vars/main.yml itself and checks
both give the same environment, so the two cannot drift apart.
"""

from __future__ import annotations

from typing import Any

from pav import paths
from pav.errors import PavError
from pav.settings import Settings
from pav.yamlfile import load_mapping

ROLE_DEFAULTS = paths.ROLES / "nccl_env" / "defaults" / "main.yml"


def role_variables(settings: Settings) -> dict[str, Any]:
    """nccl_env_* and run_tests_environment as Ansible sees them for this env (defaults < group_vars < -e)."""
    values = load_mapping(ROLE_DEFAULTS)
    env = settings.role_vars
    values.update({k: v for k, v in env.items() if k.startswith("nccl_env_")})
    values["run_tests_environment"] = env.get("run_tests_environment") or {}
    return values


def fabric_env(settings: Settings) -> dict[str, str]:
    """What every GPU container gets: the derived NCCL/UCX variables, then the env's launch extras."""
    v = role_variables(settings)
    rdma = v["nccl_env_fabric"] in ("infiniband", "roce")
    hcas = str(v["nccl_env_ib_hca"])
    if rdma and not hcas:
        where = settings.origins.get("nccl_env_fabric", "the nccl_env role's defaults")
        raise PavError(
            f"{where}: nccl_env_fabric is {v['nccl_env_fabric']} but nccl_env_ib_hca is empty; pods have no "
            "preflight to find the HCAs, so list them (e.g. mlx5_0:1,...,mlx5_7:1)"
        )
    collnet = bool(v["nccl_env_collnet_enable"])
    base = {
        "NCCL_DEBUG": v["nccl_env_debug"],
        "NCCL_SOCKET_IFNAME": v["nccl_env_socket_ifname"],
        "NCCL_IB_DISABLE": "0" if rdma else "1",
        "NCCL_IB_HCA": hcas if rdma else "",
        "UCX_NET_DEVICES": hcas if rdma else "",
        "NCCL_IB_GID_INDEX": v["nccl_env_roce_gid_index"] if v["nccl_env_fabric"] == "roce" else "",
        "NCCL_COLLNET_ENABLE": "1" if collnet else "0",
        "SHARP_COLL_ENABLE_PCI_RELAXED_ORDERING": "1"
        if collnet and v["nccl_env_sharp_relaxed_ordering"]
        else "",
    }
    derived = {k: str(val) for k, val in base.items() if str(val) != ""}
    derived.update({str(k): str(val) for k, val in (v["nccl_env_extra"] or {}).items()})
    # run_tests_environment is what every launch on hosts gets on top (NCCL_NVLS_ENABLE where an env sets it).
    derived.update({str(k): str(val) for k, val in v["run_tests_environment"].items()})
    return derived
