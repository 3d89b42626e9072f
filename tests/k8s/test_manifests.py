"""The rendered manifests, with no cluster: the dry run writes them, Kubernetes' own schemas and the pinned
CRDs' OpenAPI schemas accept them, and a template that drops what the seeds learned is refused."""

from __future__ import annotations

import copy
import dataclasses
import re
import shutil
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from pav import catalog, cli, paths, run_inputs
from pav.envs import resolve_env
from pav.errors import PavError
from pav.k8s import render
from pav.k8s.config import load_config
from pav.k8s.fabric import fabric_env
from pav.k8s.policy import check_manifest, problems
from pav.k8s_settings import TEMPLATES
from pav.options import Options
from pav.settings import load_settings, settings_from

ENV = "nebius-eu-k8s"
K8S_VERSION = "1.31.0"  # the cluster version the Terraform module defaults to
FILES = paths.ROLES / "training_operator" / "files"
CRDS = {
    "PyTorchJob": FILES / "training-operator-v1.8.1" / "training-operator.yaml",
    "MPIJob": FILES / "mpi-operator-v0.6.0" / "mpi-operator.yaml",
}
TESTS = ["torch_nccl_allreduce", "nccl_tests_all_reduce"]


LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the CRDs are 600 KB each


@pytest.fixture(scope="module")
def pinned() -> dict[str, list[dict[str, Any]]]:
    return {kind: [d for d in yaml.load_all(path.read_text(), LOADER) if d] for kind, path in CRDS.items()}


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """`--env nebius-eu-k8s --dry-run` without cloud credentials: the manifests it wrote."""
    run_dir = tmp_path_factory.mktemp("dry") / "run"
    with pytest.MonkeyPatch.context() as mp:
        for name in ("NEBIUS_IAM_TOKEN", "NEBIUS_SERVICE_ACCOUNT_ID", "KUBECONFIG"):
            mp.delenv(name, raising=False)
        assert cli.main(["--env", ENV, "--dry-run", "--run-dir", str(run_dir)]) == 0
    return {p.name: yaml.safe_load(p.read_text()) for p in sorted((run_dir / "manifests").glob("*.yaml"))}


def strict(schema: Any) -> Any:
    """The API server prunes fields a CRD does not declare; kubectl's field validation makes that an error.
    Same here: every object schema that lists its properties refuses others."""
    if isinstance(schema, dict):
        out = {k: strict(v) for k, v in schema.items()}
        declared = "properties" in out and "additionalProperties" not in out
        if declared and not out.get("x-kubernetes-preserve-unknown-fields"):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [strict(v) for v in schema]
    return schema


@pytest.fixture(scope="module")
def crd_validators(pinned: dict[str, list[dict[str, Any]]]) -> dict[tuple[str, str], Any]:
    validators = {}
    for kind, documents in pinned.items():
        for doc in documents:
            if doc["kind"] == "CustomResourceDefinition" and doc["spec"]["names"]["kind"] == kind:
                for version in doc["spec"]["versions"]:
                    schema = strict(version["schema"]["openAPIV3Schema"])
                    validators[(kind, version["name"])] = jsonschema.Draft7Validator(schema)
    return validators


def pod_templates(job: dict[str, Any]) -> list[dict[str, Any]]:
    key = {"PyTorchJob": "pytorchReplicaSpecs", "MPIJob": "mpiReplicaSpecs"}[job["kind"]]
    return [spec["template"] for spec in job["spec"][key].values()]


def test_dry_run_writes_every_job(dry_run: dict[str, dict[str, Any]]) -> None:
    """The 2-node dry run plans the VM env's GPU tests, training included, and every nccl-tests op; every
    PyTorchJob has the Master the operator needs to set a rendezvous up (and one Worker per other node)."""
    settings = yaml.safe_load((paths.INVENTORIES / ENV / "group_vars" / "all" / "pav.yml").read_text())
    by_test = {m["metadata"]["labels"]["pav-test"]: m for m in dry_run.values() if m["kind"] != "ConfigMap"}
    assert sorted(by_test) == sorted(settings["pav_tests"])
    ops = {"all_reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv", "broadcast"}
    assert {f"nccl_tests_{op}" for op in ops} <= {t for t, m in by_test.items() if m["kind"] == "MPIJob"}
    assert {"train_gpu_ddp", "train_gpu_fsdp_multi"} <= {
        t for t, m in by_test.items() if m["kind"] == "PyTorchJob"
    }
    for test, job in by_test.items():
        if job["kind"] == "PyTorchJob":
            replicas = {r: spec["replicas"] for r, spec in job["spec"]["pytorchReplicaSpecs"].items()}
            assert replicas == {"Master": 1, "Worker": 1}, test
    payload = next(m for m in dry_run.values() if m["kind"] == "ConfigMap")
    assert "__main__.py" in payload["data"] and "gpu_facts____init__.py" in payload["data"]


def test_jobs_carry_what_the_seeds_learned(dry_run: dict[str, dict[str, Any]]) -> None:
    for name, job in dry_run.items():
        if job["kind"] == "ConfigMap":
            continue
        assert problems(job) == [], name
        workers = [t["spec"] for t in pod_templates(job) if t["spec"]["containers"][0]["name"] != "launcher"]
        assert workers, name
        for pod in workers:
            gpu = pod["containers"][0]
            assert gpu["resources"]["requests"]["nvidia.com/gpu"] == 8  # a whole 8gpu-128vcpu-1600gb node
            assert gpu["resources"]["requests"]["cpu"] == 108
            assert gpu["resources"]["limits"]["memory"] == "1600G"
            assert gpu["securityContext"] == {"privileged": True}  # the env opts in
            env = {e["name"]: e["value"] for e in gpu["env"]}
            assert env["NCCL_IB_HCA"] == env["UCX_NET_DEVICES"] == ",".join(f"mlx5_{i}:1" for i in range(8))
            assert env["NCCL_SOCKET_IFNAME"] == "eth0"
        assert job["spec"]["runPolicy"]["ttlSecondsAfterFinished"] > 0


def test_core_objects_pass_kubernetes_schemas(dry_run: dict[str, dict[str, Any]]) -> None:
    """The ConfigMap, and every job's pod template as a v1 PodTemplate, against Kubernetes' strict schemas."""
    for manifest in dry_run.values():
        if manifest["kind"] == "ConfigMap":
            kubernetes_validate.validate(manifest, K8S_VERSION, strict=True)
            continue
        for i, template in enumerate(pod_templates(manifest)):
            wrapped = {
                "apiVersion": "v1",
                "kind": "PodTemplate",
                "metadata": {"name": f"t{i}"},
                "template": template,
            }
            kubernetes_validate.validate(wrapped, K8S_VERSION, strict=True)


def test_jobs_pass_the_pinned_crd_schemas(
    dry_run: dict[str, dict[str, Any]], crd_validators: dict[tuple[str, str], Any]
) -> None:
    for name, job in dry_run.items():
        if job["kind"] == "ConfigMap":
            continue
        version = job["apiVersion"].split("/")[1]
        errors = [e.message for e in crd_validators[(job["kind"], version)].iter_errors(job)]
        assert errors == [], name


def test_the_strict_crd_check_can_fail(
    dry_run: dict[str, dict[str, Any]], crd_validators: dict[tuple[str, str], Any]
) -> None:
    job = copy.deepcopy(next(m for m in dry_run.values() if m["kind"] == "PyTorchJob"))
    job["spec"]["runPolicy"]["cleanupPolicy"] = "All"  # a typo of cleanPodPolicy
    assert list(crd_validators[("PyTorchJob", "v1")].iter_errors(job))


def test_pinned_operator_manifests_pass_kubernetes_schemas(pinned: dict[str, list[dict[str, Any]]]) -> None:
    for documents in pinned.values():
        for doc in documents:
            kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


@pytest.mark.parametrize(
    ("cut", "message"),
    [
        ("pod.shm_mount()", "/dev/shm"),
        ("pod.security(job)", "IPC_LOCK"),
        ("pod.gpu_resources(job)", "nvidia.com/gpu"),
    ],
)
@pytest.mark.parametrize("template", ["pytorchjob.yaml.j2", "mpijob-nccl-tests.yaml.j2"])
def test_a_template_that_drops_a_seed_habit_is_refused(
    template: str, cut: str, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    edited = tmp_path / "templates"
    shutil.copytree(TEMPLATES, edited)
    text = (edited / template).read_text()
    call = re.compile(r"\{\{ " + re.escape(cut) + r" \| indent\(\d+\) \}\}")
    assert call.search(text)
    (edited / template).write_text(call.sub("", text))
    monkeypatch.setattr(render, "TEMPLATES", edited)
    inventory = paths.INVENTORIES / ENV
    jobs = render.plan_jobs(
        catalog.select(TESTS),
        load_config(inventory),
        fabric_env(load_settings(inventory)),
        2,
        "r1",
        lambda _: 600,
    )
    with pytest.raises(PavError, match=message):
        render.render(jobs, "pav")


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda pod: pod["volumes"][0]["emptyDir"].pop("medium"), "/dev/shm"),
        (lambda pod: pod["containers"][0].pop("securityContext"), "IPC_LOCK"),
        (lambda pod: pod["containers"][0]["resources"]["limits"].pop("nvidia.com/gpu"), "nvidia.com/gpu"),
    ],
)
def test_the_policy_check_refuses_an_edited_manifest(
    dry_run: dict[str, dict[str, Any]], mutate: Any, message: str
) -> None:
    """The driver checks again before submit: a manifest edited in the run dir gets the same check."""
    job = copy.deepcopy(next(m for m in dry_run.values() if m["kind"] == "PyTorchJob"))
    mutate(job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"])
    with pytest.raises(PavError, match=message):
        check_manifest(job, "edited.yaml")


def test_mpijob_workers_ready_sshd_and_the_launcher_reaches_them(dry_run: dict[str, dict[str, Any]]) -> None:
    """mpi-operator v0.6.0 starts workers as `sshd -De` in images with no host keys and no /run/sshd, and
    sshd's StrictModes refuses the operator's Secret-mounted key; sessions over SSH get a bare PATH."""
    (mpijob,) = [
        m for m in dry_run.values() if m["metadata"]["labels"]["pav-test"] == "nccl_tests_all_reduce_multi"
    ]
    specs = mpijob["spec"]["mpiReplicaSpecs"]
    worker = " ".join(specs["Worker"]["template"]["spec"]["containers"][0]["command"])
    steps = ("HostKey=/root/.ssh/id_rsa", "mkdir -p /run/sshd", "/etc/environment", "exec /usr/sbin/sshd -De")
    for step in (*steps, "StrictModes=no"):
        assert step in worker, step
    launcher = " ".join(specs["Launcher"]["template"]["spec"]["containers"][0]["command"])
    assert '"$(command -v mpirun)"' in launcher  # absolute path: orted starts from the same prefix
    assert "-x PATH -x LD_LIBRARY_PATH" in launcher
    assert 'echo "* $(cat /root/.ssh/id_rsa.pub)" > /tmp/pav-known-hosts' in launcher  # pinned, checked
    assert "StrictHostKeyChecking=yes -o UserKnownHostsFile=/tmp/pav-known-hosts" in launcher


def test_an_rdma_fabric_without_rdma_devices_in_the_pods_is_refused() -> None:
    inventory = paths.INVENTORIES / ENV
    config = dataclasses.replace(load_config(inventory), privileged=False)
    with pytest.raises(PavError, match="k8s_rdma_resource"):
        render.plan_jobs(
            catalog.select(TESTS), config, fabric_env(load_settings(inventory)), 2, "r1", lambda _: 600
        )
    config = dataclasses.replace(config, rdma_resource="rdma/rdma_shared_device_a")
    (job, _) = render.plan_jobs(
        catalog.select(TESTS), config, fabric_env(load_settings(inventory)), 2, "r1", lambda _: 600
    )
    assert job.rdma_resource == "rdma/rdma_shared_device_a"


def test_a_tests_own_timeout_reaches_its_job() -> None:
    """pav_test_timeouts_s works on k8s as on hosts: the job's deadline is the test's own, else the run's;
    the tests and the timeouts are the run's inputs, as the k8s validate stage plans them."""
    settings = settings_from(
        {
            "pav_test_timeout_s": 600,
            "pav_test_timeouts_s": {TESTS[0]: 90},
            "pav_tests": TESTS,
            "pav_platform": "k8s",
        },
        "gv",
    )
    inventory = paths.INVENTORIES / ENV
    inputs = run_inputs.resolve(resolve_env(ENV), Options(), settings)
    jobs = render.plan_jobs(
        inputs.tests,
        load_config(inventory),
        fabric_env(load_settings(inventory)),
        2,
        "r1",
        inputs.timeouts.for_test,
    )
    assert {j.test: j.timeout_s for j in jobs} == {TESTS[0]: 90} | {t: 600 for t in TESTS[1:]}
