"""roles/training_operator by real ansible-playbook and the real kubectl, against the API-server double of
tests/k8s/apiserver (a fresh cluster: no kubeflow or mpi-operator namespace, no CRDs). What this proves: the
role creates the operators' namespaces before its server-side diff (which a real server fails while they are
missing), applies both pinned manifests, reports changed=0 on a second run, waits for the CRDs to be
established and the controllers to roll out, and fails with one clear message when no node has the GPUs the
jobs ask for. Not proven here: the operators' own pods starting (their images)."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.k8s import conftest as k8s_conftest
from tests.k8s.apiserver import ApiServer

pytestmark = pytest.mark.slow  # real ansible-playbook runs

# The double's fixtures (tests/k8s/conftest.py): `api`, a fresh cluster of the test's own.
api, api_nodes = k8s_conftest.api, k8s_conftest.api_nodes

REPO = Path(__file__).resolve().parents[2]
RECAP = re.compile(r"^localhost\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)


@pytest.fixture
def gpuless(tmp_path: Path) -> Iterator[ApiServer]:
    with ApiServer(tmp_path / "api", {"cpu-node-0": 0}) as server:
        server.store.put(
            next(r for r in server.store.resources() if r.kind == "Namespace"),
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpu-operator"}},
        )
        yield server


def run_role(tmp_path: Path, api: ApiServer, job_api: str = "v1") -> tuple[int, str]:
    env = {
        **api.env(),
        "ANSIBLE_ROLES_PATH": str(REPO / "roles"),
        "ANSIBLE_PYTHON_INTERPRETER": sys.executable,
        "ANSIBLE_NOCOWS": "1",
    }
    (tmp_path / "extra.yml").write_text(
        yaml.safe_dump(
            {"training_operator_kubeconfig": str(api.kubeconfig), "training_operator_job_api": job_api}
        )
    )
    proc = subprocess.run(
        [
            str(Path(sys.executable).parent / "ansible-playbook"),
            "-i",
            "localhost,",
            "-e",
            f"@{tmp_path / 'extra.yml'}",
            str(REPO / "playbooks" / "k8s.yml"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return proc.returncode, proc.stdout + proc.stderr


def recap(output: str) -> tuple[int, int, int]:
    match = RECAP.search(output)
    assert match, output[-2000:]
    ok, changed, _, failed = map(int, match.groups())
    return ok, changed, failed


def test_installs_trainer_v2_and_jobset_on_a_fresh_cluster_once_then_changes_nothing(
    tmp_path: Path, api: ApiServer
) -> None:
    """The default API: the pinned JobSet and Kubeflow Trainer, their namespaces made first, the CRDs
    established and both controllers rolled out; a second run changes nothing."""
    rc, out = run_role(tmp_path, api, "trainer")
    assert rc == 0, out[-3000:]
    assert recap(out)[1:] == (2, 0)  # the two namespaces (one task), one apply of both pinned manifests
    assert {"kubeflow-system", "jobset-system"} <= {o["metadata"]["name"] for o in api.objects("namespaces")}
    assert {o["metadata"]["name"] for o in api.objects("customresourcedefinitions")} == {
        "jobsets.jobset.x-k8s.io",
        "trainjobs.trainer.kubeflow.org",
        "trainingruntimes.trainer.kubeflow.org",
        "clustertrainingruntimes.trainer.kubeflow.org",
    }
    assert {o["metadata"]["name"] for o in api.objects("deployments")} == {
        "jobset-controller-manager",
        "kubeflow-trainer-controller-manager",
    }
    watched = [r for r in api.requests if "watch=true" in r or "fieldSelector" in r]
    assert any("/namespaces/kubeflow-system/deployments" in r for r in watched)  # rollout status read it
    rc, out = run_role(tmp_path, api, "trainer")
    assert rc == 0, out[-3000:]
    assert recap(out)[1:] == (0, 0)


def test_installs_the_v1_operators_on_a_fresh_cluster_once_then_changes_nothing(
    tmp_path: Path, api: ApiServer
) -> None:
    rc, out = run_role(tmp_path, api)
    assert rc == 0, out[-3000:]
    assert recap(out)[1:] == (2, 0)  # the two namespaces (one task), one apply of both pinned manifests
    names = {o["metadata"]["name"] for o in api.objects("namespaces")}
    assert {"kubeflow", "mpi-operator"} <= names
    assert {o["metadata"]["name"] for o in api.objects("customresourcedefinitions")} == {
        "pytorchjobs.kubeflow.org",
        "mpijobs.kubeflow.org",
    }
    assert {o["metadata"]["name"] for o in api.objects("deployments")} == {
        "training-operator",
        "mpi-operator",
    }
    watched = [r for r in api.requests if "watch=true" in r or "fieldSelector" in r]
    assert any("customresourcedefinitions" in r for r in watched)  # kubectl wait read the CRDs' condition
    assert any("/namespaces/mpi-operator/deployments" in r for r in watched)  # kubectl rollout status did
    rc, out = run_role(tmp_path, api)
    assert rc == 0, out[-3000:]
    assert recap(out)[1:] == (0, 0)


def test_fails_clearly_without_allocatable_gpus(tmp_path: Path, gpuless: ApiServer) -> None:
    rc, out = run_role(tmp_path, gpuless, "trainer")
    assert rc != 0
    assert "no node has 8 nvidia.com/gpu allocatable" in out
    assert "cpu-node-0" in out and "NVIDIA GPU operator namespace: gpu-operator" in out  # what it found
    assert gpuless.objects("customresourcedefinitions") == []  # nothing installed


def test_refuses_to_replace_an_mpijob_crd_that_stores_v1(tmp_path: Path, api: ApiServer) -> None:
    """A stock training-operator's v1 MPIJob CRD with objects stored at v1: applying the MPI operator's
    v2beta1 CRD over it is refused by the API server (status.storedVersions); the role says what to do."""
    crd_type = next(r for r in api.store.resources() if r.kind == "CustomResourceDefinition")
    v1 = {"name": "v1", "served": True, "storage": True}
    names = {"kind": "MPIJob", "plural": "mpijobs", "singular": "mpijob", "listKind": "MPIJobList"}
    api.store.put(crd_type, {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                             "metadata": {"name": "mpijobs.kubeflow.org"},
                             "spec": {"group": "kubeflow.org", "names": names, "scope": "Namespaced",
                                      "versions": [v1]}})  # fmt: skip
    manifest = REPO / "roles" / "training_operator" / "files" / "mpi-operator-v0.6.0" / "mpi-operator.yaml"
    direct = subprocess.run(
        ["kubectl", "--kubeconfig", str(api.kubeconfig), "apply", "--server-side", "-f", str(manifest)],
        env=api.env(), capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert 'status.storedVersions[0]: Invalid value: "v1": must appear in spec.versions' in direct.stderr
    rc, out = run_role(tmp_path, api)
    assert rc != 0
    assert "stores kubeflow.org/v1 objects" in out and "training_operator_install_mpi" in out
