"""The command line: `sim-hosts COMMAND --opt VALUE ...` (or --opt=VALUE); usage is the package docstring."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass

from pav import simhosts
from pav.simhosts import cluster, host
from pav.simhosts.errors import PROG, SimError


@dataclass
class Options:
    """Every option as given (empty when absent); each command checks the ones it needs."""

    state_dir: str = ""
    cluster: str = ""
    subnet: str = ""
    index: str = ""
    pubkey: str = ""
    name: str = ""
    count: str = ""


FLAGS = {
    "--state-dir": "state_dir",
    "--cluster": "cluster",
    "--subnet-index": "subnet",
    "--index": "index",
    "--pubkey": "pubkey",
    "--name": "name",
    "--count": "count",
}

COMMANDS: dict[str, Callable[[Options], object]] = {
    "net-up": lambda o: cluster.net_up(o.state_dir, o.cluster, o.subnet),
    "net-down": lambda o: cluster.net_down(o.state_dir),
    "host-up": lambda o: host.host_up(o.state_dir, o.index, o.pubkey, o.name),
    "host-down": lambda o: host.host_down(o.state_dir, o.index),
    "up": lambda o: cluster.up(o.state_dir, o.cluster, o.subnet, o.count, o.pubkey),
    "down": lambda o: cluster.down(o.state_dir),
    "list": lambda o: cluster.list_hosts(o.state_dir),
}


def parse_options(args: list[str]) -> Options:
    options = Options()
    rest = list(args)
    while rest:
        flag = rest.pop(0)
        if flag.startswith("--") and "=" in flag:
            flag, _, value = flag.partition("=")
        elif rest:
            value = rest.pop(0)
        else:
            raise SimError(f"option {flag} needs a value")
        if flag not in FLAGS:
            raise SimError(f"unknown option: {flag}")
        setattr(options, FLAGS[flag], value)
    return options


def usage() -> None:
    print((simhosts.__doc__ or "").strip(), file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args:
        usage()
        return 2
    command, rest = args[0], args[1:]
    if command in ("-h", "--help", "help"):
        usage()
        return 0
    try:
        if os.geteuid() != 0:
            raise SimError("must run as root (namespaces, mounts, links)")
        options = parse_options(rest)
        if command not in COMMANDS:
            raise SimError(f"unknown command: {command} (try --help)")
        COMMANDS[command](options)
    except SimError as err:
        print(f"{PROG}: {err.message}", file=sys.stderr)
        return 1
    except OSError as err:  # a file or folder that cannot be made or read: said as mkdir or cat would
        print(f"{PROG}: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0
