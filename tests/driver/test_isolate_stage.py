"""The isolate stage (pav.stages.isolate) in process: which host a failing test names, and when no pair
re-run can be made. Recorded real runs (tests/thresholds/fixtures) give the failing results; where pairs
re-run, only the playbook is replaced: by the hosts' side of it, which runs each group's ranks as torchrun
would (a group per rendezvous endpoint), one host returning wrong bytes, and hands each host's results
back as the archive collect unpacks. Judging, collect's unpacking and the pairing are pav's own."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any

import pytest

from pav.context import Options, RunContext
from pav.launches import Launch
from pav.results import HostRecord, TestResult
from pav.stages import isolate, validate
from tests.driver.contexts import context
from tests.driver.test_report_stage import RUN_DIRS, collected

TEST = "torch_gloo_collectives_multi"
BAD = "h1"


def run_named(fixture: str) -> Any:
    return next(run for run in RUN_DIRS if run.fixture == fixture)


def rank(r: int, world: int, host: str, spoilt: bool, step_s: float = 0.0) -> dict[str, Any]:
    wrong = 3 if spoilt else 0
    row = {"op": "all_reduce", "size_bytes": 1024, "busbw_gbps": 0.5, "wrong": wrong}
    metrics: dict[str, Any] = {"results": [row]} | ({"step_s": step_s} if step_s else {})
    return {"rank": r, "world_size": world, "hostname": host, "kind": "collectives", "status": "pass",
            "reason": "", "metrics": metrics}  # fmt: skip


class Hosts:
    """What validate's playbook does on the hosts for a launch: each host's torchrun joins the rendezvous its
    argv names; each group's ranks write their reports into the host's results/TEST/; the archive of each
    host's results/ is fetched into the run dir (isolation's rounds collect in their own playbook)."""

    def __init__(self, remote: Path, slow: str = "") -> None:
        self.remote = remote
        self.rounds: list[list[list[str]]] = []
        self.launches: list[Launch] = []
        self.bad = "" if slow else BAD
        self.slow = slow  # its ranks time their step 10 times as long as the others' (fault_slow_host_multi)
        self.side: set[str] = set()  # a bad link between these hosts and the others: a group across fails

    def launch_tests(
        self, ctx: RunContext, launches: list[Launch], stage: str = "validate", extravars: Any = None
    ) -> None:
        [launch] = launches
        assert stage == "isolate" and extravars == isolate.ROUND_COLLECTS
        self.launches.append(launch)
        groups = _groups(launch)
        self.rounds.append(groups)
        for group in groups:
            world = sum(launch.ranks_by_host[h] for h in group)
            across = bool(self.side & set(group)) and not set(group) <= self.side
            first = 0
            for host in group:
                ranks = range(first, first + launch.ranks_by_host[host])
                self.run_ranks(host, launch.test, ranks, world, across)
                first += launch.ranks_by_host[host]
        # The round's playbook runs on every host of the run; its collect fetches from each.
        for host in ctx.host_names:
            self.fetch(ctx.run_dir, host)
        ctx.collected = set(ctx.host_names)

    def run_ranks(self, host: str, test: str, ranks: range, world: int, spoilt: bool = False) -> None:
        folder = self.remote / host / "results" / test
        folder.mkdir(parents=True)
        (folder / "launcher.rc").write_text("0\n")
        for r in ranks:
            (folder / f"{test}.rank{r}.json").write_text(
                json.dumps(rank(r, world, host, spoilt or host == self.bad, self.step_s(host)))
            )

    def step_s(self, host: str) -> float:
        if not self.slow:
            return 0.0
        return 2.0 if host == self.slow else 0.2

    def fetch(self, run_dir: Path, host: str) -> None:
        dest = run_dir / "hosts" / host
        dest.mkdir(parents=True, exist_ok=True)
        with tarfile.open(dest / "results.tgz", "w:gz") as tar:
            tar.add(self.remote / host / "results", "results")


def _groups(launch: Launch) -> list[list[str]]:
    """Hosts that meet at one rendezvous endpoint run as one torchrun world."""
    by_endpoint: dict[str, list[str]] = {}
    for host, argv in launch.argv_by_host.items():
        by_endpoint.setdefault(argv[argv.index("--rdzv_endpoint") + 1], []).append(host)
    return list(by_endpoint.values())


def cpu_cluster(tmp_path: Path, hosts: int, slow: str = "", **settings: Any) -> tuple[RunContext, Hosts]:
    """A run of TEST on CPU hosts whose collected results fail: BAD's ranks returned wrong bytes, or the
    slow host's took their step 10 times as long."""
    ctx = context(hosts, options=Options(results_root=tmp_path / "no-runs"), tests=[TEST], **settings)
    ctx.run_dir = tmp_path / "run"
    ctx.results.hosts = {h.name: HostRecord(h.name, h.address, "ok") for h in ctx.hosts}
    names = ctx.host_names
    launch = Launch(TEST, "torchrun", "cluster", 60, members=names)
    remote = Hosts(tmp_path / "remote", slow)
    for i, host in enumerate(names):
        launch.argv_by_host[host] = ["torchrun"]
        launch.ranks_by_host[host] = 2
        remote.run_ranks(host, TEST, range(2 * i, 2 * i + 2), 2 * len(names))
        remote.fetch(ctx.run_dir, host)
    validate_collect(ctx)
    ctx.launches = [launch]
    return ctx, remote


def validate_collect(ctx: RunContext) -> None:
    from pav.stages import collect

    ctx.collected = set(ctx.host_names)
    collect.run(ctx)  # unpacks what the hosts sent back; every host's archive was fetched


@pytest.fixture
def hosts_side(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Hosts:
    remote = Hosts(tmp_path / "remote")
    monkeypatch.setattr(validate, "launch_tests", remote.launch_tests)
    return remote


def test_a_host_returning_wrong_bytes_is_named_by_pair_re_runs(tmp_path: Path, monkeypatch: Any) -> None:
    ctx, remote = cpu_cluster(tmp_path, 3, test_timeouts_s={TEST: 123})
    monkeypatch.setattr(validate, "launch_tests", remote.launch_tests)
    assert isolate.run(ctx) == f"suspect host(s): {BAD}"
    [failed] = ctx.results.tests
    assert (failed.name, failed.status) == (TEST, "fail") and "wrong_total" in failed.reason
    # The first pair fails; the odd host out passes with h0, which clears h0 and pins the pair's failure
    # on h1 (it failed next to a host that passed).
    assert remote.rounds == [[["h0", "h1"]], [["h0", "h2"]]]
    [suspect] = ctx.results.isolation["suspects"]
    assert suspect["host"] == BAD and suspect["reason"] == f"{TEST} fails with known-good partner h0"
    steps = [(s["hosts"], s["status"], s["round"]) for s in ctx.results.isolation["steps"]]
    assert steps == [(["h0", "h1"], "fail", 1), (["h0", "h2"], "pass", 2)]
    assert ctx.results.isolation["links"] == []
    # Each round is its own launch of the test, under the test's own timeout.
    assert [launch.test for launch in remote.launches] == [f"{TEST}.isolate{n}" for n in (1, 2)]
    assert {launch.timeout_s for launch in remote.launches} == {123}
    assert not ctx.launches


def test_a_bad_link_between_two_racks_is_named_as_a_link(tmp_path: Path, monkeypatch: Any) -> None:
    """Two racks (pav_rack) that each pass alone and fail together: isolation names the link between them,
    no host; no round sends two pairs over one rack's uplink."""
    ctx, remote = cpu_cluster(tmp_path, 8)
    for host in ctx.hosts:
        host.vars["pav_rack"] = "r0" if host.name < "h4" else "r1"
    remote.bad, remote.side = "", {"h0", "h1", "h2", "h3"}
    monkeypatch.setattr(validate, "launch_tests", remote.launch_tests)
    assert isolate.run(ctx) == "suspect link between h[0-3] and h[4-7]"
    isolation = ctx.results.isolation
    assert isolation["suspects"] == []
    [link] = isolation["links"]
    assert link["sides"] == [["h0", "h1", "h2", "h3"], ["h4", "h5", "h6", "h7"]]
    assert (link["test"], link["racks"]) == (TEST, [["r0"], ["r1"]])  # what the report and marking name
    assert [(e["hosts"], e["status"]) for e in link["evidence"][:2]] == [
        (["h0", "h1", "h2", "h3"], "pass"),
        (["h4", "h5", "h6", "h7"], "pass"),
    ]
    for groups in remote.rounds:
        assert sum(len({int(h[1:]) < 4 for h in g}) == 2 for g in groups if len(g) == 2) <= 1, groups
    from pav.reporting import summary

    assert "  link: torch_gloo_collectives_multi passes on h[0-3] alone" in summary.render(ctx.results)


def test_a_slow_host_is_named_by_its_own_step_time(tmp_path: Path, monkeypatch: Any) -> None:
    """A straggler: its ranks' own step takes 10 times as long, so the test across hosts fails on the
    per-host gate (each host against the median of the others) and so does every pair with it."""
    ctx, remote = cpu_cluster(tmp_path, 6, slow="h3")
    monkeypatch.setattr(validate, "launch_tests", remote.launch_tests)
    assert isolate.run(ctx) == "suspect host(s): h3"
    [failed] = ctx.results.tests
    assert failed.status == "fail" and failed.reason.startswith("h3: steps_per_s_per_host.h3 0.5 steps/s")
    [suspect] = ctx.results.isolation["suspects"]
    assert suspect["reason"].startswith(f"{TEST} fails with known-good partner")
    assert all("h3" in e["hosts"] and "steps_per_s_per_host.h3" in e["detail"] for e in suspect["evidence"])
    assert len(remote.rounds) == 2


def test_a_rack_that_is_not_a_name_is_refused() -> None:
    from pav.errors import PavError
    from pav.inventory import Host, racks_of
    from pav.setting_keys import refuse_outside_all

    assert racks_of(
        [Host("a", "a", {"pav_rack": "r1"}), Host("b", "b", {"pav_rack": 7}), Host("c", "c")]
    ) == {
        "a": "r1",
        "b": "7",
    }
    # A host's own variable: known, and not refused where one host's variables are written (host_vars/).
    refuse_outside_all({"pav_rack": "r1"}, "host_vars/a.yml", {})
    with pytest.raises(PavError, match=r"host b: pav_rack \[1\] is not a rack name; set it to the name"):
        racks_of([Host("a", "a", {"pav_rack": "r1"}), Host("b", "b", {"pav_rack": [1]})])


def test_a_host_that_left_the_run_is_not_paired(tmp_path: Path, monkeypatch: Any) -> None:
    ctx, remote = cpu_cluster(tmp_path, 4)
    monkeypatch.setattr(validate, "launch_tests", remote.launch_tests)
    ctx.missing = {"h3": "became unreachable during validate: ssh timed out"}
    ctx.hosts = ctx.hosts[:3]  # as validate left them: the run goes on without h3
    isolate.run(ctx)
    assert all("h3" not in group for groups in remote.rounds for group in groups)
    assert [s["host"] for s in ctx.results.isolation["suspects"]] == [BAD]


def test_three_hosts_less_one_are_too_few_to_pair(tmp_path: Path, hosts_side: Hosts) -> None:
    ctx, _ = cpu_cluster(tmp_path, 3)
    ctx.missing = {"h2": "is unreachable"}
    ctx.hosts = ctx.hosts[:2]
    assert isolate.run(ctx) == "no suspect host"
    assert ctx.results.isolation["note"] == f"{TEST}: 2 hosts are too few to tell apart by pairs"
    assert hosts_side.rounds == []


def test_no_pair_re_runs_when_isolation_is_off(tmp_path: Path, hosts_side: Hosts) -> None:
    ctx, _ = cpu_cluster(tmp_path, 3, isolate=False)
    assert isolate.run(ctx) == "no suspect host"
    assert ctx.results.isolation == {
        "suspects": [],
        "links": [],
        "steps": [],
        "note": "pav_isolate is false: no re-runs",
    }
    assert hosts_side.rounds == [] and ctx.results.tests[0].status == "fail"


def test_no_pair_re_runs_under_slurm(tmp_path: Path, hosts_side: Hosts) -> None:
    ctx, _ = cpu_cluster(tmp_path, 3, launcher="slurm")
    isolate.run(ctx)
    assert ctx.results.isolation["note"] == "pair re-runs are not done under --launcher slurm"
    assert hosts_side.rounds == []


def test_a_failing_single_host_test_names_its_host(tmp_path: Path, hosts_side: Hosts) -> None:
    """A real run with GPU 0 busy: every host-scope test that failed names the one host, once."""
    ctx = collected(run_named("h100x4-gpu-busy"), tmp_path)
    assert isolate.run(ctx) == "suspect host(s): localhost"
    [suspect] = ctx.results.isolation["suspects"]
    failed = [t for t in ctx.results.tests if t.status == "fail"]
    assert [s["test"] for s in suspect["evidence"]] == [t.name for t in failed]
    assert suspect["reason"].startswith(f"{failed[0].name} fail: {failed[0].reason}")
    assert hosts_side.rounds == []


def test_a_scaling_failure_is_not_re_run_on_pairs(tmp_path: Path, hosts_side: Hosts) -> None:
    """A real two-node run over sockets: FSDP's node scaling failed, a metric across tests worked out by the
    report after isolation, so isolation never weighs it; the tests whose own figures fail their reference
    (the network, issue 63) are weighed, and two hosts are too few to tell apart by pairs."""
    from pav.stages import report

    ctx = collected(run_named("h100x4-split-socket"), tmp_path)
    assert isolate.run(ctx) == "no suspect host"
    too_few = "2 hosts are too few to tell apart by pairs"
    note = f"torch_nccl_allreduce_multi: {too_few}; train_gpu_ddp_multi: {too_few}"
    assert ctx.results.isolation == {"suspects": [], "links": [], "steps": [], "note": note}
    assert hosts_side.rounds == []
    report.judge(ctx)
    failing = [t.name for t in ctx.results.tests if t.status == "fail"]
    assert failing == ["torch_nccl_allreduce_multi", "train_gpu_ddp_multi", "train_gpu_fsdp_multi"]


def test_the_report_after_isolation_judges_nothing_twice(tmp_path: Path, hosts_side: Hosts) -> None:
    from pav.stages import report

    ctx = collected(run_named("h100x4-gpu-busy"), tmp_path)
    isolate.run(ctx)
    judged = [(t.name, t.status) for t in ctx.results.tests]
    report.judge(ctx)
    assert [(t.name, t.status) for t in ctx.results.tests] == [*judged, ("gpu_health", "pass")]
    assert ctx.results.verdict == "FAIL"


def test_a_result_of_a_test_the_catalog_does_not_know_names_nobody(tmp_path: Path, hosts_side: Hosts) -> None:
    ctx = context(3, options=Options(results_root=tmp_path / "no-runs"))
    ctx.run_dir = tmp_path
    ctx.results.tests.append(TestResult("renamed_in_a_later_release", ["h0"], "fail", "x"))
    assert isolate.run(ctx) == "no suspect host"
