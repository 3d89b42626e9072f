"""More hosts than Ansible's forks (issue 65): a multi-host launch needs every host's part running at once,
and nothing caps an inventory at ansible.cfg's forks (64). Each host's part is started and left running,
then waited for, so all start whatever the forks: a torchrun launch of gloo ranks across 2 sim hosts with
ANSIBLE_FORKS=1 passes. Before, the launch held the one fork on the first host, whose rendezvous waited
for a second node until the test's limit killed it, and only then did the second host start its part."""

from __future__ import annotations

import pytest

from tests.faults.conftest import Configured, Sandbox

pytestmark = pytest.mark.slow

TEST = "torch_gloo_collectives_multi"


def test_a_launch_spans_more_hosts_than_ansible_has_forks(configured: Configured, sandbox: Sandbox) -> None:
    # The limit bounds what the old code did (each host's part waited it out in turn), not this run.
    run = sandbox.cli(
        *configured.validate(0, 1), "--tests", TEST, "--test-timeout", "180", env={"ANSIBLE_FORKS": "1"}
    )
    results = sandbox.results()
    [test] = [t for t in results["tests"] if t["name"] == TEST]
    assert test["status"] == "pass", test
    assert run.rc == 0, run.stdout + run.stderr
    hosts = set(configured.names[:2])
    assert set(test["metrics"]["rank_hosts"].values()) == hosts and test["metrics"]["world_size"] == 4
    assert sandbox.left(("run",)) == []
