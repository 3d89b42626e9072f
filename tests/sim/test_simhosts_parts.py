"""sim-hosts' parts that need no namespace, link or mount (pav.simhosts): its command line,
the state dir and its records, the names and addresses a cluster's network gives, fault injection by
variable, and the refusals that come before anything is made. Bringing hosts up is tests/sim's slow part.
Nothing here changes a link: the one `ip` call made only reads."""

from __future__ import annotations

import json
import os
import runpy
import socket
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from pav import simhosts
from pav.simhosts import cli, cluster, faults, host, net, state
from pav.simhosts.errors import SimError, log
from pav.simhosts.net import Net

CLUSTER = Net("zq9t", 7)  # an id no real cluster on this machine has


def refusal(call: Callable[[], object]) -> str:
    with pytest.raises(SimError) as exc:
        call()
    return exc.value.message


def made_state(tmp_path: Path) -> state.State:
    found = state.open_state(str(tmp_path / "sim"), create=True)
    assert found is not None
    return found


def test_a_clusters_names_and_addresses_follow_its_id_and_subnet() -> None:
    assert (CLUSTER.bridge, CLUSTER.gateway, CLUSTER.prefix) == ("pavbr-zq9t", "10.77.7.1", "10.77.7.0/24")
    assert (CLUSTER.netns(3), CLUSTER.veth(3), CLUSTER.ip(3)) == ("pav-zq9t-3", "pv-zq9t-3", "10.77.7.13")
    # Stable MACs: a host brought down and up again keeps its address in every neighbour cache.
    assert CLUSTER.mac(3) == "02:77:07:03:00:01" and CLUSTER.bridge_mac == "02:77:07:ff:00:01"


@pytest.mark.parametrize(
    ("text", "value"), [("0", 0), ("007", 7), ("100000", 100000), ("100001", None), ("-1", None), ("", None),
                        ("1e3", None), ("٣", None)],
)  # fmt: skip
def test_numbers_are_plain_decimals_within_a_bound(text: str, value: int | None) -> None:
    assert state.parse_uint(text) == value


def test_bad_options_are_one_line_each() -> None:
    for call, message in (
        (lambda: state.parse_net("Big", "1"), "--cluster must be 1-6 chars of [a-z0-9]"),
        (lambda: state.parse_net("ab", "x"), "--subnet-index must be an integer 0-250"),
        (lambda: state.parse_net("ab", "251"), "--subnet-index must be 0-250"),
        (lambda: state.parse_index("245"), "--index must be <= 244"),
        (lambda: state.parse_index("-2"), "--index must be a non-negative integer"),
        (lambda: state.open_state("", create=False), "--state-dir is required"),
        (lambda: state.open_state("/tmp/a b", create=True), "state dir must not contain whitespace"),
    ):
        with pytest.raises(SimError) as exc:
            call()
        assert exc.value.message == message
    assert state.parse_net("ab", "250") == Net("ab", 250)


def test_the_state_dir_keeps_the_network_and_each_hosts_runtime(tmp_path: Path) -> None:
    st = made_state(tmp_path)
    assert st.load_net() is None
    st.save_net(CLUSTER)
    assert st.net_file.read_text() == "CLUSTER=zq9t\nSUBNET=7\n" and st.load_net() == CLUSTER
    for index, pid in ((3, "4242\n"), (10, "not-a-pid")):
        st.host_dir(index).mkdir(parents=True)
        (st.host_dir(index) / "name").write_text(f"sim-zq9t-{index}\n")
        (st.host_dir(index) / "pid").write_text(pid)
    (st.root / "run" / "notes").mkdir()
    assert st.host_indices() == [3, 10]
    assert (st.host_name(3), st.host_pid(3), st.host_pid(10), st.host_name(4)) == (
        "sim-zq9t-3",
        4242,
        None,
        None,
    )
    record = state.HostRecord("sim-zq9t-3", 3, "10.77.7.13", 22, "root", "pav-zq9t-3", 4242, "/u")
    assert json.loads(record.to_json()) == {
        "name": "sim-zq9t-3", "index": 3, "ip": "10.77.7.13", "port": 22, "user": "root",
        "netns": "pav-zq9t-3", "pid": 4242, "upper": "/u",
    }  # fmt: skip
    st.forget_cluster()
    assert st.load_net() is None and st.host_indices() == [] and st.root.is_dir()


def test_a_state_dir_that_does_not_exist_is_nothing_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert state.open_state(str(tmp_path / "none"), create=False) is None
    assert (
        capsys.readouterr().err == f"sim-hosts: state dir {tmp_path / 'none'} does not exist: nothing to do\n"
    )


def test_removal_never_crosses_into_a_mount(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "a").mkdir(parents=True)
    state.remove_tree(tree)
    assert not tree.exists()
    state.remove_tree(tree)  # already gone: nothing to do
    assert state.mounts_under(Path("/proc"))[-1] == "/proc"
    with pytest.raises(SimError, match="mounts remain under /proc; not removing it"):
        state.remove_tree(Path("/proc"))


def test_a_hosts_lock_is_held_then_dropped(tmp_path: Path) -> None:
    st = made_state(tmp_path)
    fd = state.lock_index(st, 5)
    try:
        assert st.lock_path(5).is_file()
    finally:
        os.close(fd)
    state.drop_index_lock(st, 5)
    assert not st.lock_path(5).exists()


def test_fault_injection_names_a_host_by_index(monkeypatch: pytest.MonkeyPatch) -> None:
    faults.check_fail("sim-a-1", 1)
    assert not faults.deaf(2)
    monkeypatch.setenv(faults.FAIL_HOST, "1")
    monkeypatch.setenv(faults.DEAF_HOST, "2")
    with pytest.raises(SimError) as exc:
        faults.check_fail("sim-a-1", 1)
    assert exc.value.message == "host-up sim-a-1 (index 1) failed: injected by PAV_SIM_FAIL_HOST=1"
    faults.check_fail("sim-a-0", 0)
    assert (
        faults.deaf(2) and not faults.deaf(1) and faults.deaf_reason(2) == "injected by PAV_SIM_DEAF_HOST=2"
    )


def test_commands_run_and_report_as_the_cli_says(capsys: pytest.CaptureFixture[str]) -> None:
    assert net.succeeds("true") and not net.succeeds("false")
    assert net.output("echo", "a") == "a\n" and net.output("sh", "-c", "echo a; exit 1") == ""
    with pytest.raises(SimError, match=r"^sh -c exit 3 failed \(exit 3\)$"):
        net.run("sh", "-c", "exit 3", quiet=True)
    log("net-up done")
    assert capsys.readouterr().err == "sim-hosts: net-up done\n"


def test_a_listening_port_is_open_and_a_closed_one_not() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        assert net.port_open("127.0.0.1", port)
    assert not net.port_open("127.0.0.1", port)


def test_options_take_a_value_separately_or_after_equals() -> None:
    options = cli.parse_options(["--state-dir=/s", "--count", "3", "--subnet-index", "7", "--cluster=zq9t"])
    assert (options.state_dir, options.count, options.subnet, options.cluster, options.index) == (
        "/s", "3", "7", "zq9t", ""
    )  # fmt: skip
    for args, message in (
        (["--count"], "option --count needs a value"),
        (["--colour", "x"], "unknown option: --colour"),
    ):
        with pytest.raises(SimError) as exc:
            cli.parse_options(args)
        assert exc.value.message == message


def test_usage_and_unknown_commands(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([]) == 2
    assert capsys.readouterr().err.strip() == (simhosts.__doc__ or "").strip()
    assert cli.main(["--help"]) == 0
    assert cli.main(["start"]) == 1
    expected = "unknown command: start (try --help)" if os.geteuid() == 0 else "must run as root"
    assert capsys.readouterr().err.endswith(f"sim-hosts: {expected}\n")


def test_python_m_runs_the_command(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "argv", ["sim-hosts", "help"])
    with pytest.raises(SystemExit) as exc:
        runpy.run_module("pav.simhosts", run_name="__main__")
    assert exc.value.code == 0 and "sim-hosts up " in capsys.readouterr().err


def test_refusals_that_come_before_anything_is_made(tmp_path: Path) -> None:
    st = made_state(tmp_path)
    pubkey = tmp_path / "id.pub"
    pubkey.write_text("ssh-ed25519 AAAA test\n")
    for call, message in (
        (lambda: cluster.up(str(st.root), "zq9t", "7", "", str(pubkey)), "--count is required"),
        (
            lambda: cluster.up(str(st.root), "zq9t", "7", "x", str(pubkey)),
            "--count must be a non-negative integer",
        ),
        (lambda: cluster.up(str(st.root), "zq9t", "7", "246", str(pubkey)), "--count must be <= 245"),
        (lambda: cluster.up(str(st.root), "zq9t", "7", "2", ""), "--pubkey is required"),
        (
            lambda: host.need_pubkey(str(tmp_path / "none.pub")),
            f"public key file {tmp_path / 'none.pub'} is missing or empty",
        ),
        (
            lambda: host.host_up(str(st.root), "0", str(pubkey), ""),
            f"no network in {st.root}: run net-up first",
        ),
    ):
        with pytest.raises(SimError) as exc:
            call()
        assert exc.value.message == message
    st.save_net(CLUSTER)
    assert refusal(lambda: cluster.net_up(str(st.root), "other", "8")) == (
        f"{st.root} already holds cluster zq9t on subnet 7"
    )
    assert refusal(lambda: host.host_up(str(st.root), "0", str(pubkey), "-bad")) == "bad host name: -bad"
    # The bridge this cluster would hang off does not exist: host-up says so and leaves no lock behind.
    assert refusal(lambda: host.host_up(str(st.root), "0", str(pubkey), "")) == (
        "bridge pavbr-zq9t is missing: run net-up first"
    )
    assert not st.lock_path(0).exists()


def test_net_down_waits_for_the_hosts_and_list_shows_each(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    st = made_state(tmp_path)
    cluster.net_down(str(st.root))
    assert "no network recorded" in capsys.readouterr().err
    st.save_net(CLUSTER)
    st.host_dir(2).mkdir(parents=True)
    (st.host_dir(2) / "pid").write_text(f"{os.getpid()}\n")  # alive, but not a host's launcher
    with pytest.raises(SimError, match=r"hosts still up in .* \(indices: 2\): run host-down or down first"):
        cluster.net_down(str(st.root))
    cluster.list_hosts(str(st.root))
    assert capsys.readouterr().out == f"sim-zq9t-2 10.77.7.12 {os.getpid()} dead\n"


def test_a_hosts_process_is_told_apart_from_a_recycled_pid(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert host.pid_alive(os.getpid()) and not host.pid_alive(2**22 + 1)
    assert not host.pid_is_host(os.getpid(), tmp_path)
    assert host.sshd_wait_s() == (20.0, "20")
    monkeypatch.setenv("PAV_SIM_SSHD_WAIT_S", "soon")
    with pytest.raises(SimError, match="PAV_SIM_SSHD_WAIT_S must be a number of seconds, not soon"):
        host.sshd_wait_s()
