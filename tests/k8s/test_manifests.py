"""The rendered manifests, with no cluster, under both job APIs (Kubeflow Trainer v2: TrainJob and the tool's
ClusterTrainingRuntimes; v1: PyTorchJob and MPIJob): the dry run writes them, Kubernetes' own schemas and the
pinned CRDs' OpenAPI schemas accept them, both APIs give the GPU pods the same spec, and a template that
drops what the seeds learned is refused."""

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
from pav.catalog import NCCL_CHOICES_LOGGED
from pav.envs import resolve_env
from pav.errors import PavError
from pav.k8s import job_api, render
from pav.k8s_config import load_config
from pav.k8s_fabric import fabric_env
from pav.k8s_policy import check_manifest, problems
from pav.k8s_settings import TEMPLATES
from pav.options import Options
from pav.settings import load_settings, settings_from

ENV = "nebius-eu-k8s"
K8S_VERSION = "1.31.0"  # the cluster version the Terraform module defaults to
FILES = paths.ROLES / "training_operator" / "files"
TRAINER = FILES / "kubeflow-trainer-v2.3.0"  # a folder: the namespace, a file per CRD, the controller
CRDS = {
    "PyTorchJob": [FILES / "training-operator-v1.8.1" / "training-operator.yaml"],
    "MPIJob": [FILES / "mpi-operator-v0.6.0" / "mpi-operator.yaml"],
    "TrainJob": [TRAINER / "03-crd-trainjobs.yaml"],
    "ClusterTrainingRuntime": [TRAINER / "01-crd-clustertrainingruntimes.yaml"],
}
TESTS = ["torch_nccl_allreduce", "nccl_tests_all_reduce"]


LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the CRDs are 600 KB each


@pytest.fixture(scope="module")
def pinned() -> dict[str, list[dict[str, Any]]]:
    return {
        kind: [d for path in paths for d in yaml.load_all(path.read_text(), LOADER) if d]
        for kind, paths in CRDS.items()
    }


def written(tmp_path_factory: pytest.TempPathFactory, api: str) -> dict[str, dict[str, Any]]:
    """`--env nebius-eu-k8s --dry-run -e k8s_job_api=API` without cloud credentials: what it wrote."""
    run_dir = tmp_path_factory.mktemp("dry") / "run"
    with pytest.MonkeyPatch.context() as mp:
        for name in ("NEBIUS_IAM_TOKEN", "NEBIUS_SERVICE_ACCOUNT_ID", "KUBECONFIG"):
            mp.delenv(name, raising=False)
        argv = ["--env", ENV, "--dry-run", "--run-dir", str(run_dir), "-e", f"k8s_job_api={api}"]
        assert cli.main(argv) == 0
    return {p.name: yaml.safe_load(p.read_text()) for p in sorted((run_dir / "manifests").glob("*.yaml"))}


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """The v1 API's manifests."""
    return written(tmp_path_factory, "v1")


@pytest.fixture(scope="module")
def trainer_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Kubeflow Trainer v2's manifests (the default on a fresh cluster)."""
    return written(tmp_path_factory, "trainer")


@pytest.fixture(scope="module", params=["v1", "trainer"])
def either(request: pytest.FixtureRequest) -> dict[str, dict[str, Any]]:
    return request.getfixturevalue({"v1": "dry_run", "trainer": "trainer_run"}[request.param])


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
    """A job's pod templates; a TrainJob has none of its own (its ClusterTrainingRuntime has them)."""
    if job["kind"] == "TrainJob":
        return []
    if job["kind"] == "ClusterTrainingRuntime":
        return [r["template"]["spec"]["template"] for r in job["spec"]["template"]["spec"]["replicatedJobs"]]
    key = {"PyTorchJob": "pytorchReplicaSpecs", "MPIJob": "mpiReplicaSpecs"}[job["kind"]]
    return [spec["template"] for spec in job["spec"][key].values()]


GPU_CONTAINERS = ("pytorch", "worker", "node")


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


def test_jobs_carry_what_the_seeds_learned(either: dict[str, dict[str, Any]]) -> None:
    for name, job in either.items():
        if job["kind"] in ("ConfigMap", "TrainJob"):
            continue
        assert problems(job) == [], name
        workers = [t["spec"] for t in pod_templates(job) if "nvidia.com/gpu" in str(t)]
        assert workers, name
        for pod in workers:
            gpu = pod["containers"][0]
            assert gpu["resources"]["requests"]["nvidia.com/gpu"] == 8  # a whole 8gpu-128vcpu-1600gb node
            assert gpu["resources"]["requests"]["cpu"] == 108
            assert gpu["resources"]["limits"]["memory"] == "1600G"
            # Never privileged unless asked (issue 62): the RDMA device plugin's resource and IPC_LOCK.
            assert gpu["securityContext"] == {"capabilities": {"add": ["IPC_LOCK"]}}
            assert gpu["resources"]["limits"]["rdma/rdma_shared_device_a"] == 1
            env = {e["name"]: e["value"] for e in gpu["env"]}
            assert env["NCCL_IB_HCA"] == env["UCX_NET_DEVICES"] == ",".join(f"mlx5_{i}:1" for i in range(8))
            assert env["NCCL_SOCKET_IFNAME"] == "eth0"
            assert pod["tolerations"] == [
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
            ]
        run = job["spec"].get("runPolicy") or job["spec"]["template"]["spec"]
        assert run["ttlSecondsAfterFinished"] > 0


def test_every_trainjob_names_a_runtime_the_run_applies(trainer_run: dict[str, dict[str, Any]]) -> None:
    """A torch test's TrainJob on the torch runtime (numProcPerNode: the test's ranks), an nccl-tests one on
    the MPI runtime (slots: the node's GPUs); both over every node, with the test's timeout and command."""
    runtimes = {
        m["metadata"]["name"]: m for m in trainer_run.values() if m["kind"] == "ClusterTrainingRuntime"
    }
    assert {r["metadata"]["labels"]["trainer.kubeflow.org/framework"] for r in runtimes.values()} == {
        "torch",
        "mpi",
    }
    trainjobs = [m for m in trainer_run.values() if m["kind"] == "TrainJob"]
    assert len(trainjobs) == len(trainer_run) - 3  # all but the payload ConfigMap and the two runtimes
    for job in trainjobs:
        test = catalog.CATALOG[job["metadata"]["labels"]["pav-test"]]
        ref = job["spec"]["runtimeRef"]
        runtime = runtimes[ref["name"]]
        assert (ref["kind"], ref["apiGroup"]) == ("ClusterTrainingRuntime", "trainer.kubeflow.org")
        assert runtime["metadata"]["labels"]["trainer.kubeflow.org/framework"] == catalog.k8s_job_kind(test)
        trainer = job["spec"]["trainer"]
        assert trainer["numNodes"] == 2 and trainer["command"][:2] == ["bash", "-c"]
        assert job["spec"]["activeDeadlineSeconds"] > 0
        if catalog.k8s_job_kind(test) == "torch":
            assert trainer["numProcPerNode"] == min(test.procs or 8, 8)
        else:
            assert runtime["spec"]["mlPolicy"]["mpi"]["numProcPerNode"] == 8


def _gpu_pod(manifest: dict[str, Any]) -> dict[str, Any]:
    return next(t["spec"] for t in pod_templates(manifest) if "nvidia.com/gpu" in str(t))


@pytest.mark.parametrize(("flavor", "v1_kind"), [("torch", "PyTorchJob"), ("mpi", "MPIJob")])
def test_both_apis_give_the_gpu_pods_the_same_spec(
    dry_run: dict[str, dict[str, Any]], trainer_run: dict[str, dict[str, Any]], flavor: str, v1_kind: str
) -> None:
    """For the same settings a runtime's GPU pod carries what the v1 job's GPU pod does (resources, memlock,
    /dev/shm, RDMA, toleration, placement, the fabric's env), the container's name and the API's own port
    aside; a TrainJob adds its test's env to the runtime's."""
    v1 = next(m for m in dry_run.values() if m["kind"] == v1_kind)
    runtime = next(
        m
        for m in trainer_run.values()
        if m["kind"] == "ClusterTrainingRuntime"
        and m["metadata"]["labels"]["trainer.kubeflow.org/framework"] == flavor
    )
    old, new = copy.deepcopy(_gpu_pod(v1)), copy.deepcopy(_gpu_pod(runtime))
    assert new.pop("restartPolicy") == "Never"  # the v1 operators take it from the replica spec
    for pod in (old, new):
        pod["containers"][0].pop("name")
        pod["containers"][0].pop("ports", None)  # PyTorchJob's rendezvous port; the torch plugin adds its own
        pod["containers"][0].pop("command", None) if flavor == "torch" else None  # the TrainJob's command
        # The inter-node tests log NCCL's choices at INFO over the fabric's NCCL_DEBUG: not shared by every
        # job of the flavor, it is left to each TrainJob, which carries its test's whole env.
        env = pod["containers"][0].get("env") or []
        pod["containers"][0]["env"] = [e for e in env if e["name"] not in NCCL_CHOICES_LOGGED]
    assert new == old


def test_the_inter_node_tests_trainjobs_log_nccl_choices(trainer_run: dict[str, dict[str, Any]]) -> None:
    """What the runtime leaves out (above), each inter-node test's TrainJob sets: NCCL logs its transport."""
    judged = [
        m
        for m in trainer_run.values()
        if m["kind"] == "TrainJob" and catalog.CATALOG[m["metadata"]["labels"]["pav-test"]].nccl_transport
    ]
    assert judged
    for job in judged:
        env = {e["name"]: e["value"] for e in job["spec"]["trainer"]["env"]}
        assert {k: env.get(k) for k in NCCL_CHOICES_LOGGED} == NCCL_CHOICES_LOGGED


def test_core_objects_pass_kubernetes_schemas(either: dict[str, dict[str, Any]]) -> None:
    """The ConfigMap, and every job's pod template as a v1 PodTemplate, against Kubernetes' strict schemas."""
    for manifest in either.values():
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
    either: dict[str, dict[str, Any]], crd_validators: dict[tuple[str, str], Any]
) -> None:
    for name, job in either.items():
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
@pytest.mark.parametrize(
    ("template", "api"),
    [
        ("pytorchjob.yaml.j2", job_api.V1),
        ("mpijob-nccl-tests.yaml.j2", job_api.V1),
        ("runtime-torch.yaml.j2", job_api.TRAINER),
        ("runtime-mpi-nccl-tests.yaml.j2", job_api.TRAINER),
    ],
)
def test_a_template_that_drops_a_seed_habit_is_refused(
    template: str, api: str, cut: str, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
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
        api=api,
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
    either: dict[str, dict[str, Any]], mutate: Any, message: str
) -> None:
    """The driver checks again before submit: a manifest edited in the run dir gets the same check."""
    job = copy.deepcopy(
        next(m for m in either.values() if m["kind"] in ("PyTorchJob", "ClusterTrainingRuntime"))
    )
    mutate(_gpu_pod(job))
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
    config = dataclasses.replace(load_config(inventory), privileged=False, rdma_resource="")
    with pytest.raises(PavError, match="k8s_rdma_resource"):
        render.plan_jobs(
            catalog.select(TESTS), config, fabric_env(load_settings(inventory)), 2, "r1", lambda _: 600
        )
    config = dataclasses.replace(config, rdma_resource="rdma/rdma_shared_device_a")
    (job, _) = render.plan_jobs(
        catalog.select(TESTS), config, fabric_env(load_settings(inventory)), 2, "r1", lambda _: 600
    )
    assert job.rdma_resource == "rdma/rdma_shared_device_a"


@pytest.mark.parametrize("api", [job_api.V1, job_api.TRAINER])
def test_a_tests_own_timeout_reaches_its_job(api: str) -> None:
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
        api=api,
    )
    assert {j.test: j.timeout_s for j in jobs} == {TESTS[0]: 90} | {t: 600 for t in TESTS[1:]}
    rendered = {m.test: m.body for m in render.render(jobs, "pav") if m.test}
    deadlines = {
        t: (b["spec"].get("runPolicy") or b["spec"])["activeDeadlineSeconds"] for t, b in rendered.items()
    }
    assert deadlines == {TESTS[0]: 90} | {t: 600 for t in TESTS[1:]}


def test_the_mpi_runtime_readies_sshd_and_its_launcher_waits_for_the_nodes(
    trainer_run: dict[str, dict[str, Any]],
) -> None:
    """The same sshd and launcher steps as the MPIJob's, placed where Kubeflow Trainer's MPI plugin puts
    them: the node pods run sshd, the launcher (the trainer step: the TrainJob's command) starts once they
    are Ready, and the JobSet succeeds when the launcher does."""
    runtime = next(
        m
        for m in trainer_run.values()
        if m["kind"] == "ClusterTrainingRuntime" and m["spec"]["mlPolicy"].get("mpi")
    )
    spec = runtime["spec"]["template"]["spec"]
    jobs = {r["name"]: r for r in spec["replicatedJobs"]}
    node = " ".join(jobs["node"]["template"]["spec"]["template"]["spec"]["containers"][0]["command"])
    for step in (
        "HostKey=/root/.ssh/id_rsa",
        "mkdir -p /run/sshd",
        "StrictModes=no",
        "exec /usr/sbin/sshd -De",
    ):
        assert step in node, step
    assert jobs["launcher"]["dependsOn"] == [{"name": "node", "status": "Ready"}]
    assert jobs["launcher"]["template"]["metadata"]["labels"] == {
        "trainer.kubeflow.org/trainjob-ancestor-step": "trainer"
    }
    assert spec["successPolicy"] == {"operator": "All", "targetReplicatedJobs": ["launcher"]}
    assert runtime["spec"]["mlPolicy"]["mpi"]["sshAuthMountPath"] == "/root/.ssh"
    (job,) = [
        m
        for m in trainer_run.values()
        if m["metadata"]["labels"].get("pav-test") == "nccl_tests_all_reduce_multi"
    ]
    launcher = " ".join(job["spec"]["trainer"]["command"])
    assert '"$(command -v mpirun)"' in launcher and "-x PATH -x LD_LIBRARY_PATH" in launcher
    assert 'echo "* $(cat /root/.ssh/id_rsa.pub)" > /tmp/pav-known-hosts' in launcher


def test_no_pod_mounts_a_service_account_token(either: dict[str, dict[str, Any]]) -> None:
    """Issue 47: nothing a job runs calls the API server; a token in the pod (the mpirun launcher's had one)
    is a credential whatever runs there could use."""
    jobs = {name: job for name, job in either.items() if job["kind"] != "ConfigMap"}
    assert jobs
    for name, job in jobs.items():
        for pod in pod_templates(job):
            assert pod["spec"].get("automountServiceAccountToken") is False, name
