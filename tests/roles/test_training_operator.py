"""roles/training_operator by real ansible-playbook, against a kubectl stand-in (fixtures/kubectl_stub.py): no
Kubernetes API can run on this machine. What this proves: the role applies both pinned manifests when the
cluster differs, reports changed=0 on a second run, waits for the CRDs and controllers, records what it found,
and fails with one clear message when no node has the GPUs the jobs ask for. Not proven: real kubectl."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.slow  # real ansible-playbook runs

REPO = Path(__file__).resolve().parents[2]
STUB = Path(__file__).parent / "fixtures" / "kubectl_stub.py"
RECAP = re.compile(r"^localhost\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)


def run_role(tmp_path: Path, state: Path, gpus: int) -> tuple[int, str]:
    env = {
        **os.environ,
        "STUB_STATE": str(state),
        "STUB_GPUS": str(gpus),
        "ANSIBLE_ROLES_PATH": str(REPO / "roles"),
        "ANSIBLE_PYTHON_INTERPRETER": sys.executable,
        "ANSIBLE_NOCOWS": "1",
    }
    extra = {
        "training_operator_kubectl": str(STUB),
        "training_operator_kubeconfig": str(tmp_path / "kubeconfig"),
    }
    (tmp_path / "extra.yml").write_text(yaml.safe_dump(extra))
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,",
         "-e", f"@{tmp_path / 'extra.yml'}", str(REPO / "playbooks" / "k8s.yml")],
        env=env, capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    return proc.returncode, proc.stdout + proc.stderr


def recap(output: str) -> tuple[int, int, int]:
    match = RECAP.search(output)
    assert match, output[-2000:]
    ok, changed, _, failed = map(int, match.groups())
    return ok, changed, failed


def test_installs_once_then_changes_nothing(tmp_path: Path) -> None:
    state = tmp_path / "cluster"
    rc, out = run_role(tmp_path, state, gpus=8)
    assert rc == 0, out[-3000:]
    assert recap(out)[1:] == (1, 0)  # one apply of both pinned manifests
    calls = (state / "calls.log").read_text()
    files = "training-operator-v1.8.1/training-operator.yaml -f {}/mpi-operator-v0.6.0/mpi-operator.yaml"
    assert f"apply --server-side --force-conflicts -f {REPO}/roles/training_operator/files/" in calls
    assert files.format(REPO / "roles" / "training_operator" / "files") in calls
    crds = "crd/pytorchjobs.kubeflow.org crd/mpijobs.kubeflow.org"
    assert f"wait --for condition=established --timeout 300s {crds}" in calls
    assert "rollout status -n mpi-operator deployment/mpi-operator" in calls
    assert f"--kubeconfig {tmp_path / 'kubeconfig'}" in calls
    rc, out = run_role(tmp_path, state, gpus=8)
    assert rc == 0, out[-3000:]
    assert recap(out)[1:] == (0, 0)


@pytest.mark.parametrize("gpus", [0])
def test_fails_clearly_without_allocatable_gpus(tmp_path: Path, gpus: int) -> None:
    rc, out = run_role(tmp_path, tmp_path / "cluster", gpus=gpus)
    assert rc != 0
    assert "no node has 8 nvidia.com/gpu allocatable" in out
    assert "gpu-node-0" in out and "NVIDIA GPU operator namespace: gpu-operator" in out  # what it found
    assert not (tmp_path / "cluster" / "calls.log").read_text().count("apply")  # nothing installed
