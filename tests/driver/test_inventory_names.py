"""Names from inventories are data (issue 47): a host name that is not a plain host name or address is
refused in one line before anything runs, so it never reaches a shell, a path or a process marker."""

from __future__ import annotations

from pathlib import Path

import pytest

from pav.errors import PavError
from pav.inventory import check_host_names, resolve_hosts

CRAFTED = [
    "evil'$(touch${IFS}/var/tmp/PWNED)'",  # ran as root in teardown's grep before
    "a/b",  # nested folders under the run dir
    "..",
    "-oProxyCommand=x",
    "node a",
]


@pytest.mark.parametrize("name", CRAFTED)
def test_a_crafted_host_name_is_refused_in_one_line(name: str) -> None:
    with pytest.raises(PavError) as caught:
        check_host_names(["node-0", name], Path("hosts.yml"))
    message = str(caught.value)
    assert "\n" not in message and repr(name) in message and "rename it" in message


@pytest.mark.slow
def test_the_inventory_as_ansible_resolves_it_is_checked(tmp_path: Path) -> None:
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(f'all:\n  hosts:\n    "{CRAFTED[0]}":\n      ansible_host: 127.0.0.1\n')
    with pytest.raises(PavError, match="is not a plain host name"):
        resolve_hosts(inventory)
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("gpu-node_01.cluster.local\n10.0.0.7\nlocalhost ansible_connection=local\n")
    assert [h.name for h in resolve_hosts(inventory)] == [
        "gpu-node_01.cluster.local",
        "10.0.0.7",
        "localhost",
    ]
