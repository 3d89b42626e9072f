"""--on-fail taint and --recheck on Kubernetes (pav.k8s.taint, pav.k8s.marking) through the real kubectl
against the API-server double, which plays the control plane's part in a cordon (the unschedulable taint)
and the scheduler's filters (taints, cordon, node affinity).

The pipeline test makes a node fail the double's way (api.kubelet.broken: its pods die at once, as on a node
whose GPU is gone) and runs a test-only CPU test on each node (fault_gloo_k8s, PAV_FAULT_TESTS=1)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from pav import catalog
from pav.context import Options
from pav.errors import PavError
from pav.k8s import job_api, render, taint
from pav.k8s.kubectl import Kubectl
from pav.k8s_config import load_config
from pav.marking import decide, flow
from pav.marking import k8s as k8s_marks
from pav.marking.decide import Mark
from pav.marking.scheduler import Found, rechecking
from pav.reporting import summary
from pav.results import TestResult
from pav.stages.k8s import pin
from tests.conftest import assert_one_line_error, run_cli, run_cli_here
from tests.docs_quotes import assert_documented
from tests.driver.contexts import context
from tests.driver.test_slurm_drain import failing, gate
from tests.driver.test_slurm_drain import run as results_of
from tests.k8s.apiserver import ApiError, ApiServer, scheduler
from tests.k8s.test_kubectl import install_pytorchjob_crd
from tests.summary_lines import unfolded

NODE_PATCH = "PATCH /api/v1/nodes/"
INVENTORY = Path(__file__).parents[2] / "inventories" / "nebius-eu-k8s"


@pytest.fixture
def api_nodes() -> dict[str, int]:
    """Five nodes for each test's `api` (tests/k8s/conftest.py): a cluster of its own, its nodes marked."""
    return {f"gpu-node-{i}": 8 for i in range(5)}


def kubectl(api: ApiServer, *args: str) -> None:
    subprocess.run(["kubectl", "--kubeconfig", str(api.kubeconfig), *args], check=True, env=api.env())


def node(api: ApiServer, name: str) -> dict[str, Any]:
    return next(o for o in api.objects("nodes") if o["metadata"]["name"] == name)


def taint_keys(api: ApiServer, name: str) -> list[str]:
    return sorted(t["key"] for t in (node(api, name).get("spec") or {}).get("taints") or [])


def test_slurm_and_kubernetes_mark_the_same_parts() -> None:
    """Both mark what pav.marking.decide decides, once for any scheduler (pav.marking.flow): the hosts a
    FAIL's bad parts name, each with one reason."""
    gemm = failing("gpu_gemm", ["b"], [gate("gemm_bf16_tflops.3", 277.0, 692.6, "GPU 3")])
    multi = failing("torch_gloo_collectives_multi", ["a", "b", "c"], [], reason="wrong bytes on c")
    results = results_of([gemm, multi], suspects=("c",))
    planned = decide.decide(results).marks
    assert [(m.host, m.tests) for m in planned] == [
        ("b", ("gpu_gemm",)),
        ("c", ("torch_gloo_collectives_multi",)),
    ]
    assert decide.decide(results_of([gemm], verdict="ERROR")).marks == []
    assert k8s_marks.value(("gpu_gemm", "x")) == "gpu_gemm"


def test_a_recheck_runs_each_test_on_the_nodes_that_failed_it_alone() -> None:
    """Narrowed to the tool's nodes and their tests; each job pinned by node name, tolerating the tool's
    taint and the cordon; a run that finds none of its nodes skips validate and collect."""
    ctx = context(0, options=Options(recheck=True), platform="k8s", tests=["torch_nccl_allreduce"])
    wanted = {"n1": ("torch_nccl_allreduce", "nccl_tests_all_reduce"), "n2": ("nccl_tests_all_reduce",)}
    ctx.inputs = flow.narrowed(
        ctx,
        k8s_marks.K8s(),
        Found([rechecking(k8s_marks.RECHECK, n, "pav r1: host x", t) for n, t in wanted.items()]),
    )
    assert [s.name for s in ctx.inputs.tests] == ["torch_nccl_allreduce", "nccl_tests_all_reduce"]
    assert ctx.inputs.host_count == 2
    jobs = render.plan_jobs(
        ctx.inputs.tests, load_config(INVENTORY), {}, ctx.inputs.host_count, "r2", lambda _: 60
    )
    pinned = {j.test: (j.workers, j.node_names) for j in pin(jobs, ctx.inputs.rechecked)}
    assert pinned == {"torch_nccl_allreduce": (1, ["n1"]), "nccl_tests_all_reduce": (2, ["n1", "n2"])}
    for manifest in render.render(pin(jobs, ctx.inputs.rechecked), "pav"):  # policy-checked as any run's
        specs = manifest.body.get("spec", {}).get("pytorchReplicaSpecs") or {}
        for replica in specs.values():
            pod = replica["template"]["spec"]
            terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            assert terms["nodeSelectorTerms"][0]["matchFields"][0]["values"] == ["n1"]
            assert [t["key"] for t in pod["tolerations"]] == [
                "nvidia.com/gpu",
                taint.KEY,
                taint.UNSCHEDULABLE,
            ]
    assert catalog.CATALOG["torch_nccl_allreduce"].scope == "host"


def test_a_recheck_with_no_node_of_the_tools_stops_naming_the_nodes_it_looked_at(
    api: ApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Right after provision (the hook before configure installs the operators): no node carries the tool's
    taint, so the run stops in one line naming the nodes looked at and the fix; an operator's marks are
    listed as before. It went on to configure (installing the operators) and ended with verdict NONE."""
    kubectl(api, "cordon", "gpu-node-2")
    kubectl(api, "taint", "nodes", "gpu-node-4", f"{taint.KEY}=by-hand:NoSchedule")  # our key, no annotation
    ctx = context(0, options=Options(recheck=True), platform="k8s", tests=["torch_nccl_allreduce"])
    monkeypatch.setattr(k8s_marks, "kubectl", lambda ctx: Kubectl(api.kubeconfig, "pav"))
    before = len(api.requests)
    with pytest.raises(PavError) as refused:
        flow.select(ctx)
    assert str(refused.value) == (
        f"--recheck: no node carries this tool's taint ({taint.KEY} with the {taint.RUN} annotation); looked "
        "at 5 node(s): gpu-node-0, gpu-node-1, gpu-node-2 (cordoned by someone else), gpu-node-3, gpu-node-4 "
        f"(tainted {taint.KEY} without the tool's {taint.RUN} annotation, tainted {taint.KEY}=by-hand:"
        "NoSchedule by someone else); nothing was configured or tested: run with --on-fail taint first (it "
        "marks the nodes a FAIL names), then --recheck re-tests them"
    )
    assert_documented(f"error: {refused.value}")
    assert [a.host for a in ctx.results.actions] == ["gpu-node-2", "gpu-node-4"]
    assert api.requests[before:] == ["GET /api/v1/nodes?limit=500"]  # read, nothing changed


def test_nodes_of_a_failure_across_nodes_that_names_none_are_not_tainted(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The decision Slurm's drain takes (pav.reporting.marks): a test across 2 nodes that failed names no
    node, so neither is tainted and one line says so, printed and in the summary; no kubectl runs."""
    ctx = context(0, options=Options(on_fail="taint"), platform="k8s", tests=["torch_nccl_allreduce"])
    ctx.results.verdict = "FAIL"
    ctx.results.tests = [TestResult("torch_nccl_allreduce_multi", ["n1", "n2"], "error", "pod failed")]
    flow.after_report(ctx)
    [action] = ctx.results.actions
    assert action.action == k8s_marks.ACTION and action.hosts == ("n1", "n2") and action.ok is None
    line = f"{k8s_marks.ACTION}: {action.detail}"
    assert line.startswith(
        "k8s taint: not tainting n[1-2]: torch_nccl_allreduce_multi failed across them, which does not say "
        "which host is bad (2 hosts are too few to tell apart by pairs); a host is named by a test of its own"
    )
    assert capsys.readouterr().out.splitlines() == [line]
    assert line in unfolded(summary.render(ctx.results).splitlines())  # folded at 120 columns
    assert decide.decide(ctx.results.to_dict()).marks == []


def test_trainjobs_pinned_to_other_nodes_get_runtimes_of_their_own() -> None:
    """Trainer v2: the pods' placement lives in the ClusterTrainingRuntime, so each --recheck pin has its
    own runtime and each TrainJob names the one that pins it to the nodes that failed its test."""
    tests = ("torch_nccl_allreduce", "torch_nccl_collectives")
    ctx = context(0, options=Options(recheck=True), platform="k8s", tests=list(tests))
    wanted = {"n1": tests, "n2": tests[1:]}
    ctx.inputs = flow.narrowed(
        ctx,
        k8s_marks.K8s(),
        Found([rechecking(k8s_marks.RECHECK, n, "pav r1: host x", t) for n, t in wanted.items()]),
    )
    config, trainer = load_config(INVENTORY), job_api.TRAINER
    jobs = render.plan_jobs(
        ctx.inputs.tests, config, {}, ctx.inputs.host_count, "r2", lambda _: 60, api=trainer
    )
    manifests = render.render(pin(jobs, ctx.inputs.rechecked), "pav")
    runtimes = {m.body["metadata"]["name"]: m.body for m in manifests if m.kind == "ClusterTrainingRuntime"}
    assert len(runtimes) == 2
    for job in (m.body for m in manifests if m.kind == "TrainJob"):
        runtime = runtimes[job["spec"]["runtimeRef"]["name"]]
        pod = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        nodes = terms["nodeSelectorTerms"][0]["matchFields"][0]["values"]
        test = job["metadata"]["labels"]["pav-test"]
        assert nodes == (["n1"] if test == tests[0] else ["n1", "n2"]), (test, nodes)


def test_a_node_is_cordoned_tainted_annotated_then_returned(api: ApiServer) -> None:
    kube = Kubectl(api.kubeconfig, "pav")
    version = int(node(api, "gpu-node-1")["metadata"]["resourceVersion"])
    marked = k8s_marks.mark_node(
        kube, Mark("gpu-node-1", "pav r1: GPU 3 x < 5 [gpu_gemm]", ("gpu_gemm",)), "r1"
    )
    assert marked.ok, marked.detail
    live = node(api, "gpu-node-1")
    assert live["spec"]["unschedulable"] is True
    assert int(live["metadata"]["resourceVersion"]) > version  # each PATCH a new version, as the server's
    assert taint_keys(api, "gpu-node-1") == [scheduler.UNSCHEDULABLE, taint.KEY]  # the cordon's, as real
    assert {t["key"]: t.get("value") for t in live["spec"]["taints"]}[taint.KEY] == "gpu_gemm"
    ann = live["metadata"]["annotations"]
    assert (ann[taint.RUN], ann[taint.TESTS], ann[taint.CORDONED]) == ("r1", "gpu_gemm", "r1")
    assert ann[taint.REASON] == "pav r1: GPU 3 x < 5 [gpu_gemm]"
    assert [r for r in api.requests if r.startswith(NODE_PATCH)] == [
        f"{NODE_PATCH}gpu-node-1?fieldManager=kubectl-annotate",  # merge patch of metadata.annotations
        f"{NODE_PATCH}gpu-node-1",  # cordon: strategic merge patch of spec.unschedulable
        f"{NODE_PATCH}gpu-node-1?fieldManager=kubectl-taint&fieldValidation=Strict",  # spec.taints
    ]
    found = k8s_marks.find(kube.json("get", "nodes"))
    assert found.tests == {"gpu-node-1": ("gpu_gemm",)}
    assert [a.cordoned_by_pav for a in found.rechecking] == [True]
    assert (
        k8s_marks.unmark_node(kube, "gpu-node-1", cordoned_by_us=True) == f"untainted {taint.KEY}, uncordoned"
    )
    live = node(api, "gpu-node-1")
    assert not live["spec"].get("unschedulable") and taint_keys(api, "gpu-node-1") == []
    assert live["metadata"].get("annotations") == {}


def test_nodes_others_marked_are_listed_and_a_node_cordoned_first_stays_cordoned(api: ApiServer) -> None:
    kube = Kubectl(api.kubeconfig, "pav")
    kubectl(api, "cordon", "gpu-node-2")
    kubectl(api, "taint", "nodes", "gpu-node-3", "maintenance=fan:NoSchedule")
    kubectl(api, "taint", "nodes", "gpu-node-4", f"{taint.KEY}=by-hand:NoSchedule")  # our key, no annotation
    kubectl(api, "taint", "nodes", "gpu-node-0", "nvidia.com/gpu=present:NoSchedule")  # a GPU node's own
    found = k8s_marks.find(kube.json("get", "nodes"))
    assert found.tests == {}
    assert {
        a.host: a.detail.removeprefix("left alone: ").removesuffix(" by someone else") for a in found.listed
    } == {
        "gpu-node-2": "cordoned",
        "gpu-node-3": "tainted maintenance=fan:NoSchedule",
        "gpu-node-4": f"tainted {taint.KEY} without the tool's {taint.RUN} annotation, "
        f"tainted {taint.KEY}=by-hand:NoSchedule",
    }
    # Cordoned by an operator before the tool tainted it: a recheck untaints it, the cordon stays theirs.
    assert k8s_marks.mark_node(kube, Mark("gpu-node-2", "pav r1: host x [t]", ("t",)), "r1").ok
    found = k8s_marks.find(kube.json("get", "nodes"))
    assert found.tests == {"gpu-node-2": ("t",)}
    assert [a.cordoned_by_pav for a in found.rechecking] == [False]
    assert "left cordoned" in k8s_marks.unmark_node(kube, "gpu-node-2", cordoned_by_us=False)
    assert node(api, "gpu-node-2")["spec"]["unschedulable"] is True


def test_a_node_gone_is_an_outcome_naming_the_step_and_the_fix(api: ApiServer) -> None:
    marked = k8s_marks.mark_node(
        Kubectl(api.kubeconfig, "pav"), Mark("gpu-node-9", "pav r1: x", ("t",)), "r1"
    )
    assert marked.ok is False
    assert marked.detail.startswith("get: kubectl get node failed") and "NotFound" in marked.detail
    assert "RBAC verbs get, patch on nodes" in marked.detail
    assert not [r for r in api.requests if r.startswith(NODE_PATCH)]


def test_the_scheduler_keeps_pods_off_cordoned_and_tainted_nodes_unless_they_tolerate_them(
    api: ApiServer,
) -> None:
    kubectl(api, "cordon", "gpu-node-0")
    kubectl(api, "taint", "nodes", "gpu-node-1", f"{taint.KEY}=t:NoSchedule")
    names = ["gpu-node-0", "gpu-node-1", "gpu-node-2"]
    plain: dict[str, Any] = {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]}
    assert scheduler.feasible(api.store, plain, names)[0] == ["gpu-node-2"]
    pinned = {
        "tolerations": [*plain["tolerations"], *taint.RECHECK_TOLERATIONS],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In",
                                                    "values": names[:2]}]}]
        }}},
    }  # fmt: skip
    assert scheduler.feasible(api.store, pinned, names)[0] == names[:2]
    fits, why = scheduler.feasible(api.store, {}, names[:2])
    assert fits == [] and "gpu-node-0: node(s) were unschedulable" in why


def test_on_fail_is_refused_on_the_platform_it_does_not_act_on(tmp_path: Path) -> None:
    run = run_cli_here("--on-fail", "taint", "--dry-run", "--run-dir", str(tmp_path / "r"))
    assert_one_line_error(run, "--on-fail taint", "platform k8s", "use --on-fail drain on platform hosts")
    run = run_cli_here(
        "--on-fail", "drain", "--platform", "k8s", "--dry-run", "--run-dir", str(tmp_path / "r")
    )
    assert_one_line_error(run, "--on-fail drain", "platform hosts", "use --on-fail taint on platform k8s")


SETTINGS = """\
pav_platform: k8s
pav_hosts: 3
pav_tests: [fault_gloo_k8s]
pav_test_timeout_s: 120
nccl_env_fabric: socket
"""


@pytest.mark.slow
def test_a_fail_taints_its_nodes_and_a_recheck_returns_the_one_that_passes(
    tmp_path: Path, api: ApiServer
) -> None:
    """Five nodes: 3 and 4 marked by an operator (the scheduler keeps the run off them), 0, 1 and 2 broken.
    A FAIL without the flag patches no node; with --on-fail taint it taints 0 and 1, and node 2, whose
    PATCH the server forbids, is a FAILED summary line with the verdict and exit unchanged. Node 0 is
    repaired: --recheck runs the test on 0 and 1 alone, returns 0, keeps 1, lists 3 and 4."""
    inventory = tmp_path / "inventory"
    (inventory / "group_vars").mkdir(parents=True)
    (inventory / "hosts.yml").write_text("all:\n  hosts: {}\n")
    (inventory / "group_vars" / "all.yml").write_text(SETTINGS)
    install_pytorchjob_crd(api)
    kubectl(api, "cordon", "gpu-node-3")
    kubectl(api, "taint", "nodes", "gpu-node-4", "maintenance=fan:NoSchedule")
    api.kubelet.broken.update({"gpu-node-0", "gpu-node-1", "gpu-node-2"})
    env = {**api.env(), "KUBECONFIG": str(api.kubeconfig), "PAV_FAULT_TESTS": "1"}

    def run(name: str, *flags: str) -> tuple[int, dict[str, Any], str]:
        got = run_cli("--inventory", str(inventory / "hosts.yml"), "--run-dir", str(tmp_path / name),
                      "--stages", "validate,collect,report", *flags, env=env)  # fmt: skip
        results = json.loads((tmp_path / name / "results.json").read_text())
        return got.rc, results, got.stdout + got.stderr

    before = len(api.requests)
    rc, results, out = run("plain")
    assert (rc, results["verdict"], results["actions"]) == (1, "FAIL", []), out[-3000:]
    assert not [r for r in api.requests[before:] if r.startswith(NODE_PATCH)]  # no flag, no change

    def forbid(resource: Any, live: dict[str, Any] | None, new: dict[str, Any]) -> None:
        if resource.kind == "Node" and new["metadata"]["name"] == "gpu-node-2":
            raise ApiError(403, "Forbidden", 'nodes "gpu-node-2" is forbidden: user cannot patch nodes')

    api.store.validators.append(forbid)
    rc, results, out = run("taint", "--on-fail", "taint")
    assert (rc, results["verdict"]) == (1, "FAIL"), out[-3000:]
    outcome = {a["host"]: a["ok"] for a in results["actions"]}
    assert outcome == {"gpu-node-0": True, "gpu-node-1": True, "gpu-node-2": False}
    summary = (tmp_path / "taint" / "summary.txt").read_text()
    assert "k8s taint FAILED: gpu-node-2: annotate: " in summary and "Forbidden" in summary
    for name in ("gpu-node-0", "gpu-node-1"):
        assert taint_keys(api, name) == [scheduler.UNSCHEDULABLE, taint.KEY]
        assert node(api, name)["metadata"]["annotations"][taint.RUN] == results["run_id"]
    assert taint_keys(api, "gpu-node-2") == [] and not node(api, "gpu-node-2")["metadata"].get("annotations")
    assert taint_keys(api, "gpu-node-3") == [scheduler.UNSCHEDULABLE]
    assert taint_keys(api, "gpu-node-4") == ["maintenance"]

    api.store.validators.remove(forbid)
    api.kubelet.broken.discard("gpu-node-0")
    rc, results, out = run("recheck", "--recheck")
    assert (rc, results["verdict"]) == (1, "FAIL"), out[-3000:]
    ran = {(t["hosts"][0], t["status"]) for t in results["tests"]}
    assert ran == {("gpu-node-0", "pass"), ("gpu-node-1", "error")}  # the tainted nodes alone
    acts = {a["host"]: (a["ok"], a["detail"]) for a in results["actions"]}
    assert acts["gpu-node-0"][0] is True and acts["gpu-node-0"][1].startswith(
        "returned: passed fault_gloo_k8s"
    )
    assert acts["gpu-node-1"][0] is None and acts["gpu-node-1"][1].startswith("kept tainted: still failing")
    assert acts["gpu-node-3"] == (None, "left alone: cordoned by someone else")
    assert acts["gpu-node-4"] == (None, "left alone: tainted maintenance=fan:NoSchedule by someone else")
    assert "gpu-node-2" not in acts
    assert taint_keys(api, "gpu-node-0") == [] and not node(api, "gpu-node-0")["spec"].get("unschedulable")
    assert taint_keys(api, "gpu-node-1") == [scheduler.UNSCHEDULABLE, taint.KEY]
    assert taint_keys(api, "gpu-node-3") == [scheduler.UNSCHEDULABLE]
    assert taint_keys(api, "gpu-node-4") == ["maintenance"]
    (manifest,) = (tmp_path / "recheck" / "manifests").glob("*pytorchjob*")
    text = manifest.read_text()
    assert '["gpu-node-0", "gpu-node-1"]' in text and f'"key": "{taint.KEY}"' in text
