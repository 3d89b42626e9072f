"""--env sim --launcher slurm: the slurm role brings up slurmctld + slurmd + munged on 2 sim hosts, the
env's own test list runs as Slurm jobs (the payload's multi-host run sbatch -> srun -> torchrun; of the two
torchrun launches across both hosts, one: HEALTHY),
Slurm's own checks run, a rank that exits non-zero fails the job and the verdict, the burn-in and the SDC
check run as jobs, --on-fail drain drains the nodes of a FAIL that names them (and none after a PASS) with
the tool's reason in the real slurmctld, --recheck returns the node that passes and keeps the other, and
teardown leaves no daemon behind.

One real run per claim of the real system (issue 49): the failing run carries every failing job (the
burn-in and the SDC check failing on each host, and a rank exiting across both), the healthy run comes last
so that its own slurm_cluster_state proves the failed jobs left nothing allocated. The decisions alone are
in process: a failure across the 2 hosts drains neither (tests/driver/test_slurm_drain.py), a node an
operator drained is listed and never touched by a recheck (tests/driver/test_slurm_recheck.py)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CliRun, run_cli
from tests.sim.conftest import SlurmCluster
from tests.sim.leftovers import alive, leftovers, slurm_daemons

pytestmark = pytest.mark.slow

MULTI = "torch_gloo_collectives_multi"
# The test the recheck returns a node on: plain Python ranks (FOR TESTING), no torch import in its 2 ranks
# and agent; torch tests passing on a host are the healthy run's (test_a_hosts_torch_tests_run_in_one_job).
PASSING = "fault_plain"
HOST_FAULT = "fault_rank_exit"  # on one host: a rank exits 3
FAULT = "fault_rank_exit_multi"
BURN, SDC = "fault_burn_cpu", "fault_sdc_cpu"  # gpu_burn and sdc_check on CPU ranks (FOR TESTING)
# The sim env's tests (inventories/sim) but ddp_cpu_train_multi: a torchrun across both nodes as MULTI is,
# whose job script is the same but for its arguments (issue 49: each rank's torch import costs ~1.7 CPU-s).
HEALTHY = ("torch_gloo_allreduce", MULTI, "ddp_cpu_train", "mpi_allreduce", "torch_nccl_allreduce",
           "nccl_tests_all_reduce")  # fmt: skip


@dataclass
class SlurmRuns:
    failing: CliRun  # the burn-in and the SDC check with the SDC fault (each host fails its own), and a
    failing_dir: Path  # rank exiting in the test across both hosts; --on-fail drain drains both nodes
    nodes: dict[str, dict[str, str]]  # scontrol show node after it: NodeName -> its fields
    fixed: str  # the node whose drain was made to name a test that passes: the recheck returns it
    before_recheck: dict[str, dict[str, str]]
    rechecked: CliRun
    rechecked_dir: Path
    after_recheck: dict[str, dict[str, str]]
    healthy: CliRun  # HEALTHY, with --on-fail drain, on both nodes returned
    healthy_dir: Path
    after_healthy: dict[str, dict[str, str]]
    daemons: list[str]  # seen while the cluster was up
    down: CliRun
    state: Path

    def results(self, run_dir: Path) -> dict[str, Any]:
        return json.loads((run_dir / "results.json").read_text())


def tasks_run(run_dir: Path, stage: str) -> dict[str, set[str]]:
    """The tasks of a stage's playbook that ran (ok or changed), each with the hosts it ran on."""
    ran: dict[str, set[str]] = {}
    for path in (run_dir / "ansible" / stage).glob("artifacts/*/job_events/*.json"):
        event = json.loads(path.read_text())
        if event.get("event") == "runner_on_ok":
            data = event["event_data"]
            ran.setdefault(data["task"], set()).add(data["host"])
    return ran


def by_name(results: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in results["tests"]}


@pytest.fixture(scope="module")
def runs(slurm_cluster: SlurmCluster) -> SlurmRuns:
    """Fail, recheck and validate on the shared, already configured Slurm sim cluster, then tear it down."""
    base, env = slurm_cluster.base, slurm_cluster.env
    kept = slurm_cluster.reuse()
    common = ("--env", "sim", "--launcher", "slurm", "--keep", "--stages", "validate,collect,report", *kept)
    common += ("--on-fail", "drain")
    failing_dir, rechecked_dir, healthy_dir = base / "failing", base / "recheck", base / "healthy"
    try:
        assert slurm_cluster.first.rc == 0, slurm_cluster.first.stdout + slurm_cluster.first.stderr
        # The burn-in and the SDC check as Slurm jobs (issue 40), the SDC fault on local rank 1 of each host:
        # each host fails tests of its own, and is drained; the test across both fails its job too.
        failing = run_cli(*common, "--tests", f"{BURN},{SDC},{FAULT}", "--burn-in", "3s", "--run-dir",
                          str(failing_dir), env=env | {"PAV_FAULT_SDC_GPU": "1"}, timeout=900)  # fmt: skip
        nodes = slurm_nodes(slurm_cluster)
        # Each drain, as the tool writes one, now names a test of one host: the first node's still fails, the
        # second's is "fixed" and passes.
        broken, fixed = sorted(nodes)
        failing_id = json.loads((failing_dir / "results.json").read_text())["run_id"]
        scontrol(
            slurm_cluster, f"NodeName={broken} State=DRAIN Reason='pav {failing_id}: host [{HOST_FAULT}]'"
        )
        scontrol(slurm_cluster, f"NodeName={fixed} State=DRAIN Reason='pav {failing_id}: host [{PASSING}]'")
        before_recheck = slurm_nodes(slurm_cluster)
        recheck = ("--env", "sim", "--keep", "--stages", "validate,collect,report", "--recheck", *kept)
        rechecked = run_cli(*recheck, "--run-dir", str(rechecked_dir), env=env, timeout=600)
        after_recheck = slurm_nodes(slurm_cluster)
        # The node the recheck kept is returned by hand: the env's tests need both.
        scontrol(slurm_cluster, f"NodeName={broken} State=RESUME")
        healthy = run_cli(*common, "--tests", ",".join(HEALTHY), "--run-dir", str(healthy_dir), env=env,
                          timeout=900)  # fmt: skip
        after_healthy = slurm_nodes(slurm_cluster)
        daemons = slurm_daemons(slurm_cluster.state)
    finally:
        # --results-root, not --run-dir: without a keep (--reuse) this is a teardown of no kept run.
        down = run_cli("--env", "sim", "--stages", "teardown", *kept, "--results-root", str(base / "down"),
                       env=env)  # fmt: skip
        slurm_cluster.down = down
    return SlurmRuns(
        failing, failing_dir, nodes, fixed, before_recheck, rechecked, rechecked_dir, after_recheck,
        healthy, healthy_dir, after_healthy, daemons, down, slurm_cluster.state,
    )  # fmt: skip


def controller(cluster: SlurmCluster) -> str:
    """The first host's address: slurmctld's."""
    first = next(iter(cluster.configured()[0]["hosts"]))
    return str(json.loads((cluster.state / "sim" / "hosts" / f"{first}.json").read_text())["ip"])


def scontrol(cluster: SlurmCluster, update: str) -> None:
    done = cluster.ssh(controller(cluster), f"scontrol update {update}")
    assert done.returncode == 0, done.stderr


def slurm_nodes(cluster: SlurmCluster) -> dict[str, dict[str, str]]:
    """`scontrol show node --oneliner` on the controller (the first host), each node's fields by name."""
    shown = cluster.ssh(controller(cluster), "scontrol show node --oneliner")
    assert shown.returncode == 0, shown.stderr
    nodes = {}
    for line in shown.stdout.splitlines():
        # Reason=... runs to the next " Key=" field and may hold spaces: split on the field names.
        fields = dict(re.findall(r"(\w+)=(.*?)(?= \w+=|$)", line))
        if "NodeName" in fields:
            nodes[fields["NodeName"]] = fields | {"line": line}
    return nodes


def test_multi_host_run_is_a_slurm_job_and_passes(runs: SlurmRuns) -> None:
    assert runs.healthy.rc == 0, runs.healthy.stdout + runs.healthy.stderr
    results = runs.results(runs.healthy_dir)
    assert results["verdict"] == "PASS"
    test = by_name(results)[MULTI]
    assert test["status"] == "pass", test
    assert test["slurm"]["job_id"].isdigit() and test["slurm"]["state"] == "COMPLETED", test["slurm"]
    assert test["slurm"]["exit_code"] == 0
    # 2 nodes x 2 processes, ranks on both hosts: srun started one torchrun per node.
    assert test["metrics"]["world_size"] == 4
    assert set(test["metrics"]["rank_hosts"].values()) == set(results["hosts"])
    # The job's own output came back: both nodes' torchrun announce themselves in it.
    log = (runs.healthy_dir / test["slurm"]["log"]).read_text()
    assert log.count("OMP_NUM_THREADS") == 2, log[-2000:]
    script = (runs.healthy_dir / "slurm" / f"{MULTI}.sbatch").read_text()
    assert "#SBATCH --nodes=2" in script and "#SBATCH --exclusive" in script
    assert "srun --kill-on-bad-exit=1 --ntasks-per-node=1" in script
    # The job scripts reached each host as one self-unpacking script: no module run per file.
    ran = tasks_run(runs.healthy_dir, "validate")
    assert ran["Unpack the run's job scripts on the host"] == set(results["hosts"]), ran
    assert "Copy the job scripts" not in ran and "Create the run's slurm folder" not in ran
    assert not (runs.healthy_dir / "ansible" / "slurm-jobs.sh").exists()  # the driver removed its copy


def test_the_burn_in_and_the_sdc_check_run_as_slurm_jobs_and_name_the_rank(runs: SlurmRuns) -> None:
    assert runs.failing.rc == 1, runs.failing.stdout + runs.failing.stderr
    tests = runs.results(runs.failing_dir)["tests"]
    for test in (t for t in tests if t["name"] in (BURN, SDC)):
        assert test["status"] == "fail", test
        assert "SDC: local rank 1 (CPU): repetition 1 of 4 differs" in test["reason"], test["reason"]
        assert test["slurm"]["job_id"].isdigit(), test["slurm"]
    burns = [t for t in tests if t["name"] == BURN]
    assert len(burns) == 2  # one a host
    for burn in burns:
        gpus = burn["metrics"]["burn_in"]["gpus"]
        assert sorted(gpus) == ["0", "1"] and all(len(g["windows"]) == 3 for g in gpus.values()), gpus


def test_a_hosts_torch_tests_run_in_one_job(runs: SlurmRuns) -> None:
    """Each host's torch_gloo_allreduce and ddp_cpu_train run as one suite in one job (pav_fold_launches),
    each still with its own result and the record of the job it ran in."""
    results = runs.results(runs.healthy_dir)
    for host in results["hosts"]:
        mine = {t["name"]: t for t in results["tests"] if t["hosts"] == [host]}
        gloo, ddp = mine["torch_gloo_allreduce"], mine["ddp_cpu_train"]
        assert gloo["status"] == ddp["status"] == "pass", (gloo, ddp)
        assert gloo["slurm"]["job_id"] == ddp["slurm"]["job_id"] and gloo["slurm"]["state"] == "COMPLETED"
        assert gloo["metrics"]["world_size"] == ddp["metrics"]["world_size"] == 2
    detail = {s["name"]: s["detail"] for s in results["stages"]}["validate"]
    assert " launches (a host's torch tests in suites" in detail, detail


def test_slurm_checks_run_as_tests(runs: SlurmRuns) -> None:
    tests = by_name(runs.results(runs.healthy_dir))
    for name in ("slurm_cluster_state", "slurm_cpu_binding", "slurm_shared_fs"):
        assert tests[name]["status"] == "pass", tests[name]
        assert tests[name]["metrics"]["mismatches"] == 0
    assert tests["slurm_cluster_state"]["metrics"]["ranks_reported"] == 1
    assert tests["slurm_cpu_binding"]["metrics"]["ranks_reported"] == 4  # 2 tasks x 2 nodes, 1 CPU each
    assert tests["slurm_shared_fs"]["metrics"]["ranks_reported"] == 2  # one reader per node
    assert (
        tests["slurm_gpu_binding"]["status"] == "skipped" and "no GPU" in tests["slurm_gpu_binding"]["reason"]
    )


def test_rank_exiting_nonzero_fails_the_job_and_the_verdict(runs: SlurmRuns) -> None:
    assert runs.failing.rc == 1, runs.failing.stdout + runs.failing.stderr
    results = runs.results(runs.failing_dir)
    assert results["verdict"] == "FAIL"
    test = by_name(results)[FAULT]
    assert test["status"] in ("fail", "error"), test
    assert test["slurm"]["state"] == "FAILED", test["slurm"]
    assert test["slurm"]["exit_code"] != 0
    assert f"slurm job {test['slurm']['job_id']} FAILED" in test["reason"]
    # The rank that exited is the cause, named with its host from torchrun's own record (issue 64); the
    # ranks it took down follow it, not lead the reason.
    first = test["metrics"]["first_failure"]
    assert (first["rank"], first["exitcode"], first["source"]) == (1, 3, "torchrun"), first
    assert first["host"] == test["metrics"]["rank_hosts"]["1"] and first["host"] in results["hosts"]
    lead = f"rank 1 on {first['host']} exited with code 3 (the first to fail); rank "
    assert lead in test["reason"] and " lost its peer: " in test["reason"], test["reason"]
    # The cluster was idle again before the healthy run's jobs (it came after the failing run, the recheck
    # and the RESUME of the node kept drained): the failed jobs left nothing allocated.
    assert by_name(runs.results(runs.healthy_dir))["slurm_cluster_state"]["status"] == "pass"


def test_on_fail_drain_drains_the_failing_nodes_with_the_tools_reason(runs: SlurmRuns) -> None:
    """Tests of each host failed on both (the burn-in and the SDC check): each host is named by its own
    tests, and both nodes drain in the real slurmctld with the reason the tool wrote, naming the run and the
    tests. The test across both hosts failed too, and names the host of the rank that exited first (issue
    64): its drain names that test as well, its bad part that rank; no "not draining" line. The healthy
    run, with the same flag, drained nothing: no node is drained after it."""
    assert runs.failing.rc == 1, runs.failing.stdout + runs.failing.stderr
    results = runs.results(runs.failing_dir)
    assert by_name(results)["slurm_cluster_state"]["status"] == "pass"
    drains = [a for a in results["actions"] if a["action"] == "slurm drain"]
    assert sorted(a["host"] for a in drains) == sorted(results["hosts"]), results["actions"]
    assert all(a["ok"] for a in drains), drains
    assert len(runs.nodes) == 2, runs.nodes
    crashed = by_name(results)[FAULT]["metrics"]["first_failure"]["host"]
    for drain in drains:
        named = [BURN, SDC, FAULT] if drain["host"] == crashed else [BURN, SDC]
        assert sorted(drain["tests"]) == sorted(named), drain
        assert drain["reason"].startswith(f"pav {results['run_id']}: "), drain["reason"]
        assert drain["reason"].endswith(f" [{','.join(drain['tests'])}]"), drain["reason"]
        node = runs.nodes[drain["host"]]  # the Slurm NodeName is the host's short hostname
        assert "DRAIN" in node["State"], node
        assert f" Reason={drain['reason']} [" in node["line"], (drain["reason"], node["line"])
    summary = (runs.failing_dir / "summary.txt").read_text()
    assert summary.count("slurm drain: ") == 2 and "VERDICT: FAIL" in summary
    bad_part = f"  {crashed}: rank 1 on {crashed} exited with code 3 (the first to fail) [{FAULT}]; likely "
    assert bad_part in summary, summary
    assert "not draining" not in summary
    assert runs.results(runs.healthy_dir)["actions"] == []
    assert len(runs.after_healthy) == 2
    assert not [n for n in runs.after_healthy.values() if "DRAIN" in n["State"]], runs.after_healthy


def rechecks(run_dir: Path) -> list[dict[str, Any]]:
    results = json.loads((run_dir / "results.json").read_text())
    return [a for a in results["actions"] if a["action"] == "slurm recheck"]


def test_recheck_resumes_the_node_that_passes_and_keeps_the_one_that_fails(runs: SlurmRuns) -> None:
    """Each node ran only the test its drain names, alone: the fixed node's passed and slurmctld returned it;
    the other's still fails and its drain stays as it was."""
    assert runs.rechecked.rc == 1, runs.rechecked.stdout + runs.rechecked.stderr
    results = runs.results(runs.rechecked_dir)
    tests = {t["name"]: t for t in results["tests"]}
    assert set(tests) == {PASSING, HOST_FAULT}, list(tests)
    assert tests[PASSING]["status"] == "pass" and tests[HOST_FAULT]["status"] in ("fail", "error")
    assert len(tests[PASSING]["hosts"]) == 1 and tests[PASSING]["hosts"] != tests[HOST_FAULT]["hosts"]
    acts = rechecks(runs.rechecked_dir)
    resumed = [a for a in acts if a["ok"]]
    assert len(acts) == 2 and len(resumed) == 1, acts
    assert (
        resumed[0]["detail"] == f"resumed: passed {PASSING}"
        and resumed[0]["host"] == tests[PASSING]["hosts"][0]
    )
    kept = next(a for a in acts if not a["ok"])
    assert kept["detail"].startswith("kept drained: ") and kept["ok"] is None, kept
    # It still fails, and says so by the rank that exited and its host, not the rank it took down.
    [host] = tests[HOST_FAULT]["hosts"]
    lead = f"rank 1 on {host} exited with code 3 (the first to fail)"
    assert tests[HOST_FAULT]["reason"].startswith(lead), tests[HOST_FAULT]["reason"]
    assert kept["detail"].startswith(f"kept drained: still failing: {host}: {lead} [{HOST_FAULT}]; "), kept
    assert "DRAIN" not in runs.after_recheck[runs.fixed]["State"], runs.after_recheck[runs.fixed]
    [other] = [n for n in runs.after_recheck if n != runs.fixed]
    assert "DRAIN" in runs.after_recheck[other]["State"]
    # A recheck that fails keeps the drain as it was.
    assert runs.after_recheck[other]["Reason"] == runs.before_recheck[other]["Reason"]
    summary = (runs.rechecked_dir / "summary.txt").read_text()
    assert f"slurm recheck: {resumed[0]['host']}: resumed: passed {PASSING}" in summary


def test_teardown_leaves_no_daemon(runs: SlurmRuns) -> None:
    assert runs.down.rc == 0, runs.down.stdout + runs.down.stderr
    names = {entry.split()[2] for entry in runs.daemons}
    assert {"slurmctld", "slurmd", "munged"} <= names, runs.daemons
    assert alive(runs.daemons) == []
    assert leftovers(runs.state) == []
    assert not (runs.state / "sim" / "shared").exists()
