"""NCCL's transport read from its INFO lines, on real recorded output (fixtures/nccl_info/README.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pav.nccl_transport import Transport, is_ib, parse, read

FIXTURES = Path(__file__).parent / "fixtures" / "nccl_info"


def transport(*names: str) -> Transport:
    return read(FIXTURES / name for name in names)


def test_a_container_without_its_hcas_falls_back_to_sockets() -> None:
    found = transport("nccl941_container_no_ib_socket.txt")
    assert found.net == "Socket"
    assert found.no_ib_device and not found.ib_disabled
    assert found.net_connections == 0  # the init lines alone: no channel connected yet


def test_todays_nccl_falling_back_to_sockets() -> None:
    """NCCL 2.28.9, recorded on an H200 with no HCA: two NCCL_HOSTIDs make two nodes of one machine."""
    found = transport("device_h200_nccl2289_two_hostids_socket.txt")
    assert (found.net, found.nets, found.net_connections) == ("Socket", ("Socket",), 4)
    assert found.no_ib_device and not found.ib_disabled
    assert (found.intra, found.nvls, found.nvls_channels) == ((), None, 0)
    assert found.info_lines == 55  # every line but the script's own


def test_socket_channels_between_hosts_and_ipc_within() -> None:
    found = transport("nccl952_socket_p2p_ipc.txt")
    assert (found.net, found.net_connections) == ("Socket", 2)
    assert found.intra == ("P2P/IPC",)


def test_ib_disabled_by_the_environment_is_named() -> None:
    found = transport("nccltests188_ib_disabled_socket.txt")
    assert found.net == "Socket" and found.ib_disabled and not found.no_ib_device


def test_nccl_before_2_5_named_rings_not_channels() -> None:
    found = transport("nccl226_ring_socket_old.txt")
    assert (found.net, found.net_connections, found.no_ib_device) == ("Socket", 4, True)


def test_mpirun_prefixes_shm_and_no_nvls_channels() -> None:
    found = transport("nccl1232_mpirun_socket_shm.txt")
    assert (found.net, found.net_connections) == ("Socket", 8)
    assert found.intra == ("SHM",)
    assert found.nvls_channels == 0 and found.nvls is None


def test_infiniband_with_gpudirect_rdma_and_cumem() -> None:
    found = transport("nccl1189_ib_gdrdma_cumem.txt")
    assert (found.net, found.net_connections, found.intra) == ("IB", 9, ("P2P/CUMEM",))
    assert is_ib(found.net)


def test_roce_is_ncclS_ib_transport() -> None:
    found = transport("nccltests185_roce_using_ib.txt")
    assert found.nets == ("IB",) and found.info_lines == 12  # the nccl-tests and version lines are not INFO


def test_the_hpcx_plugin_names_its_ib_ibext() -> None:
    found = transport("nccl1814_ibext_v8_cumem.txt")
    assert found.net == "IBext_v8" and is_ib("IBext_v8") and not is_ib("Socket")
    assert transport("nccl1029_pdsh_prefix_ibext.txt").nets == ("IBext",)  # behind a launcher's "HOST: "


def test_a_recent_nccl_still_says_using_network() -> None:
    found = transport("nccl1925_gin_era_using_network_ib.txt")
    assert found.nets == ("IB",) and not found.ib_disabled  # "set by environment to 0."


@pytest.mark.parametrize(
    ("names", "nvls", "channels"),
    [
        (("nccl1538_nvls_available.txt",), True, None),
        (("awsofi715_nvls_not_available.txt",), False, None),
        (("nccl892_h800_no_nvls_p2p_direct.txt",), None, 0),
        # Available on the GPUs of one paste, not on another's: not on every GPU.
        (("nccl1538_nvls_available.txt", "awsofi715_nvls_not_available.txt"), False, None),
    ],
)
def test_nvls_as_nccl_reports_it(names: tuple[str, ...], nvls: bool | None, channels: int | None) -> None:
    found = transport(*names)
    assert (found.nvls, found.nvls_channels) == (nvls, channels)


def test_paths_within_a_host_drop_their_mode() -> None:
    assert transport("nccl892_h800_no_nvls_p2p_direct.txt").intra == ("P2P/direct",)
    assert transport("awsk8s454_mpirun_tag_p2p_indirect.txt").intra == ("P2P/indirect",)
    assert transport("nccl1538_p2p_cumem.txt").intra == ("P2P/CUMEM",)


def test_socket_wins_where_ranks_disagree() -> None:
    """One rank over sockets holds every ring to its pace: the network named is Socket."""
    found = transport("nccl1189_ib_gdrdma_cumem.txt", "nccl952_socket_p2p_ipc.txt")
    assert found.nets == ("IB", "Socket") and found.net == "Socket"


def test_a_log_without_info_lines_leaves_the_transport_unknown(tmp_path: Path) -> None:
    log = Path(__file__).parents[1] / "thresholds" / "fixtures" / "h200x4b-split-2x2-nvlink"
    found = read(log.glob("hosts/*/results/torch_nccl_allreduce_multi/launcher.log"))
    assert found.info_lines == 0 and found.net is None
    assert found.record()["net"] is None and found.record()["intra"] == []
    assert read([tmp_path / "absent.log"]) == parse([])
