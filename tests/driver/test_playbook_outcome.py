"""What a stage's playbook outcome means for each host and for the run (pav.stages.playbook): the outcomes
are PlaybookOutcome records as ansible_exec builds them from runner events; the real playbooks run in the
slow tests (tests/driver/test_local_env.py, tests/faults)."""

from __future__ import annotations

import pytest

from pav.ansible_exec import PlaybookOutcome
from pav.context import Options, RunContext
from pav.errors import PavError
from pav.results import HostRecord
from pav.stages.playbook import FETCHED, TORN_DOWN, raise_for_hosts, record_hosts, torn_down
from tests.driver.contexts import context

STATS = {"ok": 5, "changed": 1, "failures": 0}


def three_hosts(allow_missing: int = 0, **settings: object) -> RunContext:
    ctx = context(3, options=Options(allow_missing=allow_missing), **settings)
    ctx.results.hosts = {h.name: HostRecord(h.name, h.address) for h in ctx.hosts}
    return ctx


def test_each_host_gets_its_status_and_counts() -> None:
    ctx = three_hosts()
    failures = {"h2": ["preflight : Check the driver: nvidia-smi failed"]}
    outcome = PlaybookOutcome(
        2, "failed", stats={"h0": STATS}, unreachable={"h1": "ssh: timed out"}, failures=failures
    )
    record_hosts(ctx, outcome, "validate")
    assert {n: r.status for n, r in ctx.results.hosts.items()} == {
        "h0": "ok",
        "h1": "unreachable",
        "h2": "failed",
    }
    assert ctx.results.hosts["h0"].ansible == {"validate": STATS}
    assert ctx.results.hosts["h1"].ansible == {"validate": {}}
    # A later stage that goes well does not clear what an earlier one found.
    record_hosts(ctx, PlaybookOutcome(0, "successful"), "collect")
    assert ctx.results.hosts["h2"].status == "failed"


def test_configure_records_what_it_changed_and_whether_it_applied() -> None:
    ctx = three_hosts(apply_tuning=False)
    changes = ["host_tuning : Set sysctls", "host_tuning : Raise limits", "nccl_env : Write /etc/nccl.conf"]
    diff = {"path": "/etc/nccl.conf", "diff": "+NCCL_DEBUG=WARN"}
    outcome = PlaybookOutcome(0, "successful", changes={"h0": changes}, diffs={"h0": [diff]})
    record_hosts(ctx, outcome, "configure")
    record = ctx.results.hosts["h0"]
    assert record.changes == changes and record.diffs == [diff]
    assert record.change_counts == {"host_tuning": 2, "nccl_env": 1}
    assert record.tuning_applied is False  # check mode: `changes` is what it would change
    assert ctx.results.hosts["h1"].changes == []


def test_an_unreachable_host_within_allow_missing_leaves_the_run() -> None:
    ctx = three_hosts(allow_missing=1)
    raise_for_hosts(
        ctx, PlaybookOutcome(4, "failed", unreachable={"h1": "ssh: no route to host"}), "configure"
    )
    assert ctx.host_names == ["h0", "h2"]
    assert ctx.missing == {"h1": "is unreachable: ssh: no route to host"}
    assert ctx.limit == "h0,h2"  # later playbooks skip it instead of retrying it


def test_a_host_lost_mid_run_says_during_which_stage() -> None:
    ctx = three_hosts(allow_missing=1)
    raise_for_hosts(ctx, PlaybookOutcome(4, "failed", unreachable={"h2": "ssh: broken pipe"}), "validate")
    assert ctx.missing == {"h2": "became unreachable during validate: ssh: broken pipe"}


def test_more_unreachable_hosts_than_allowed_stop_the_run() -> None:
    ctx = three_hosts()
    outcome = PlaybookOutcome(4, "failed", unreachable={"h1": "ssh: timed out", "h2": "ssh: timed out"})
    with pytest.raises(PavError) as exc:
        raise_for_hosts(ctx, outcome, "configure")
    assert str(exc.value) == (
        "host h1 is unreachable: ssh: timed out (and 1 more); check its address, SSH user and key, "
        "or pass --allow-missing 2 to go on without them"
    )


def test_with_every_host_gone_the_run_goes_on_to_record_them() -> None:
    """Within --allow-missing even the last host may go: the run records each of its tests as error (the
    hint in the one-host error promises that), and the next stage has no host to start a playbook on."""
    ctx = context(1, options=Options(allow_missing=5))
    raise_for_hosts(ctx, PlaybookOutcome(4, "failed", unreachable={"h0": "ssh: refused"}), "configure")
    assert ctx.missing == {"h0": "is unreachable: ssh: refused"} and ctx.hosts == []
    with pytest.raises(PavError) as exc:
        raise_for_hosts(
            context(1), PlaybookOutcome(4, "failed", unreachable={"h0": "ssh: refused"}), "configure"
        )
    assert str(exc.value) == (
        "host h0 is unreachable: ssh: refused; check its address, SSH user and key, "
        "or pass --allow-missing 1 to go on without it"
    )


def test_a_task_that_failed_on_a_host_that_answered_stops_the_run() -> None:
    ctx = three_hosts(allow_missing=1)
    failures = {"h0": ["never reached"], "h2": ["mpi : Build: cc not found"]}
    outcome = PlaybookOutcome(2, "failed", unreachable={"h0": "ssh: refused"}, failures=failures)
    with pytest.raises(PavError) as exc:
        raise_for_hosts(ctx, outcome, "configure")
    assert str(exc.value) == "configure failed on h2: mpi : Build: cc not found"  # h0's left the run


def test_teardown_done_per_host_is_what_the_teardown_task_did() -> None:
    outcome = PlaybookOutcome(0, "successful", changes={"h0": [TORN_DOWN], "h1": [FETCHED]},
                              ok={TORN_DOWN: {"h0", "h1"}, FETCHED: {"h1"}})  # fmt: skip
    assert torn_down(outcome) == {"h0": True, "h1": False}  # h1: its folder was gone already
    assert torn_down(PlaybookOutcome(0, "successful")) == {}
