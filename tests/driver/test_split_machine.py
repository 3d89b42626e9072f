"""One machine as two inventory hosts (the test bed of docs/benchmarks.md, here on CPU): two loopback
addresses, the local connection, a folder per host. A test across both runs one torchrun world over the
two; when one host's launch returns first it must not kill the other's ranks as its own leftovers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli

pytestmark = pytest.mark.slow  # the whole pipeline on two hosts

HOSTS = """\
all:
  hosts:
    node-a: {ansible_host: 127.0.0.1}
    node-b: {ansible_host: 127.0.0.2}
  vars:
    ansible_connection: local
    ansible_python_interpreter: "{{ ansible_playbook_python }}"
"""


def test_two_hosts_on_one_machine_run_a_test_across_both(tmp_path: Path) -> None:
    inventory = tmp_path / "inventory"
    (inventory / "group_vars").mkdir(parents=True)
    (inventory / "hosts.yml").write_text(HOSTS)
    nodes = tmp_path / "nodes"
    (inventory / "group_vars" / "all.yml").write_text(
        f'pav_tests: [torch_gloo_collectives_multi]\npav_remote_dir: "{nodes}/{{{{ inventory_hostname }}}}"\n'
    )
    run_dir = tmp_path / "run"
    run = run_cli("--inventory", str(inventory / "hosts.yml"), "--run-dir", str(run_dir))
    assert run.rc == 0, run.stdout[-3000:] + run.stderr[-2000:]
    test, versions = json.loads((run_dir / "results.json").read_text())["tests"]
    # Two nodes of one machine run one release: software_versions compares them (kernel, torch)
    assert (versions["name"], versions["status"]) == ("software_versions", "pass"), versions
    assert versions["threshold"]["versions"]["torch"].keys() == {"node-a", "node-b"}
    assert (test["name"], test["hosts"], test["status"]) == (
        "torch_gloo_collectives_multi",
        ["node-a", "node-b"],
        "pass",
    )
    for node in ("node-a", "node-b"):
        # An own inventory's hosts record the fabric they were set up for (the default, sockets): the
        # inter-node gates read it (facts.nccl_env once never reached facts.json).
        facts = json.loads((run_dir / "hosts" / node / "facts.json").read_text())
        assert facts["nccl_env"] == {"fabric": "socket"}, sorted(facts)
        log = (run_dir / "hosts" / node / "results" / test["name"] / "launcher.log").read_text()
        assert "killed what the launch left running" not in log, log[-2000:]
    # Each host worked in its own folder (pav_remote_dir templated per host); teardown removed both.
    teardown = next(
        s for s in json.loads((run_dir / "results.json").read_text())["stages"] if s["name"] == "teardown"
    )
    assert f"removed {nodes}/HOST/runs/" in teardown["detail"] and "on 2 of 2 host(s)" in teardown["detail"]
    assert not nodes.exists() or not any(nodes.rglob("*")), sorted(nodes.rglob("*"))[:5]
