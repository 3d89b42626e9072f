"""The cluster as a whole: net-up, net-down, up (net-up and N host-ups), down (every host, then the net),
list."""

from __future__ import annotations

import os
import sys
import traceback

from pav.simhosts import net
from pav.simhosts.errors import SimError, log
from pav.simhosts.host import host_up, live_host_pid, need_pubkey, remove_host
from pav.simhosts.state import (
    MAX_INDEX,
    State,
    lock_index,
    mounts_under,
    open_state,
    parse_net,
    parse_uint,
    remove_tree,
)


def net_up(state_dir: str, cluster: str, subnet: str) -> State:
    state = open_state(state_dir, create=True)
    assert state is not None
    want = parse_net(cluster, subnet)
    have = state.load_net()
    if have is not None and have != want:
        raise SimError(f"{state.root} already holds cluster {have.cluster} on subnet {have.subnet}")
    try:
        net.bridge_up(want, owner=str(state.root))
    except SimError as err:
        log(err.message)
        raise SimError(f"net-up of cluster {want.cluster} failed") from None
    state.save_net(want)
    log(f"network {want.bridge} up with {want.gateway}/24")
    return state


def net_down(state_dir: str) -> None:
    state = open_state(state_dir, create=False)
    if state is not None:
        _net_down(state)


def _net_down(state: State) -> None:
    net_ = state.load_net()
    if net_ is None:
        log(f"no network recorded in {state.root}: nothing to do")
        return
    left = state.host_indices()
    if left:
        indices = " ".join(map(str, left))
        raise SimError(f"hosts still up in {state.root} (indices: {indices}): run host-down or down first")
    # The shared folder outlives single hosts (like an NFS export), not the cluster.
    remove_tree(state.shared)
    if net.link_exists(net_.bridge):
        net.bridge_down(net_)
        log(f"network {net_.bridge} down")
    else:
        log(f"network {net_.bridge} already down")
    if not mounts_under(state.root):
        state.forget_cluster()


def up(state_dir: str, cluster: str, subnet: str, count_text: str, pubkey: str) -> None:
    if not count_text:
        raise SimError("--count is required")
    count = parse_uint(count_text)
    if count is None:
        raise SimError("--count must be a non-negative integer")
    if count > MAX_INDEX + 1:
        raise SimError(f"--count must be <= {MAX_INDEX + 1}")
    need_pubkey(pubkey)
    state = net_up(state_dir, cluster, subnet)
    # Hosts start in parallel: most of a host-up is waiting for sshd.
    children = [_fork_host_up(state, index, pubkey) for index in range(count)]
    failed = False
    for pid, stdout in children:
        with os.fdopen(stdout, "rb") as out:
            sys.stdout.buffer.write(out.read())
        failed |= os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) != 0
    sys.stdout.flush()
    if failed:
        raise SimError("up: some hosts failed (the others stay up; run down to remove them)")


def _fork_host_up(state: State, index: int, pubkey: str) -> tuple[int, int]:
    """host-up of one index in a process of its own, so its signal handling, cleanup and locks stay its own;
    forked, not started anew, which spares an interpreter start per host. Returns its pid and the read end
    of its stdout."""
    read_end, write_end = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        os.close(write_end)
        return pid, read_end
    code = 1
    try:
        os.close(read_end)
        os.dup2(write_end, 1)
        os.close(write_end)
        code = _host_up_status(state, index, pubkey)
    finally:
        os._exit(code)


def _host_up_status(state: State, index: int, pubkey: str) -> int:
    """host-up's exit status, its error said as the command would say it."""
    try:
        host_up(str(state.root), str(index), pubkey, "")
        return 0
    except SimError as err:
        log(err.message)
        return 1
    except OSError as err:
        log(str(err))
        return 1
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1
    except KeyboardInterrupt:
        return 130
    except Exception:
        traceback.print_exc()
        return 1
    finally:
        sys.stdout.flush()


def down(state_dir: str) -> None:
    state = open_state(state_dir, create=False)
    if state is None:
        return
    net_ = state.load_net()
    if net_ is not None:
        indices = sorted(set(state.host_indices()) | net.leftover_indices(net_))
        failed = False
        for index in indices:
            # One host's failure does not stop the teardown of the others.
            fd = lock_index(state, index)
            try:
                remove_host(state, net_, index)
            except (SimError, OSError) as err:
                log(err.message if isinstance(err, SimError) else str(err))
                failed = True
            finally:
                os.close(fd)
        log(f"removed {len(indices)} host(s)")
        if failed:
            raise SimError("down: some hosts could not be removed cleanly")
        _net_down(state)
    else:
        log(f"no network recorded in {state.root}")
    left = mounts_under(state.root)
    if left:
        raise SimError(f"mounts remain under {state.root}: {' '.join(left)}")
    state.forget_cluster()


def list_hosts(state_dir: str) -> None:
    """One line per host: NAME IP PID alive|dead."""
    state = open_state(state_dir, create=False)
    if state is None:
        return
    net_ = state.load_net()
    if net_ is None:
        return
    for index in state.host_indices():
        name = state.host_name(index) or f"sim-{net_.cluster}-{index}"
        pid = state.host_pid(index)
        alive = live_host_pid(state, index) is not None
        print(f"{name} {net_.ip(index)} {'-' if pid is None else pid} {'alive' if alive else 'dead'}")
