"""Which Kubeflow API runs a k8s run's jobs: Kubeflow Trainer v2 (TrainJob on JobSet) or the v1 operators
(PyTorchJob, MPIJob), from k8s_job_api and what the cluster serves."""

from __future__ import annotations

from dataclasses import dataclass

from pav.errors import PavError
from pav.k8s.kubectl import Kubectl

TRAINER, V1 = "trainer", "v1"
# The job kind of each catalog flavor (catalog.k8s_job_kind) under each API.
KINDS = {TRAINER: {"torch": "TrainJob", "mpi": "TrainJob"}, V1: {"torch": "PyTorchJob", "mpi": "MPIJob"}}
# kubectl's name of each kind's type: what detection looks for and what delete names.
RESOURCE = {
    "TrainJob": "trainjobs.trainer.kubeflow.org",
    "PyTorchJob": "pytorchjobs.kubeflow.org",
    "MPIJob": "mpijobs.kubeflow.org",
}
TRAINER_GROUP_VERSION = "trainer.kubeflow.org/v1alpha1"
DESCRIBED = {
    TRAINER: f"TrainJob ({TRAINER_GROUP_VERSION}, Kubeflow Trainer v2)",
    V1: "PyTorchJob / MPIJob (kubeflow.org, the v1 training-operator and MPI operator)",
}


@dataclass(frozen=True)
class Served:
    """The job APIs a cluster serves now."""

    trainer: bool
    v1: bool

    @property
    def neither(self) -> bool:
        return not self.trainer and not self.v1


def kind(api: str, flavor: str) -> str:
    return KINDS[api][flavor]


def served(kubectl: Kubectl, timeout_s: float = 120) -> Served:
    """From discovery (kubectl api-resources): a type the server does not serve is not listed."""
    names = set(kubectl.run("api-resources", "-o", "name", timeout_s=timeout_s).split())
    v1 = RESOURCE["PyTorchJob"] in names or RESOURCE["MPIJob"] in names
    return Served(trainer=RESOURCE["TrainJob"] in names, v1=v1)


def choose(setting: str, cluster: Served) -> str:
    """The API a run installs (configure) and submits with (validate). auto: TrainJob where the cluster serves
    it; the v1 kinds where it serves only those; a cluster with neither gets Kubeflow Trainer v2 installed.
    Both served: TrainJob, unless k8s_job_api is v1."""
    if setting in (TRAINER, V1):
        return setting
    if cluster.trainer or cluster.neither:
        return TRAINER
    return V1


def require_served(api: str, cluster: Served) -> None:
    """Before anything is submitted: the chosen API's types must be there (a run that skipped configure)."""
    if api == TRAINER and not cluster.trainer:
        raise PavError(
            f"the cluster serves no {RESOURCE['TrainJob']} (Kubeflow Trainer v2): run the configure stage to "
            "install it, or set k8s_job_api: v1 (or auto) to use the PyTorchJob/MPIJob operators it has"
        )
    if api == V1 and not cluster.v1:
        raise PavError(
            "the cluster serves neither pytorchjobs nor mpijobs.kubeflow.org (the v1 operators): run the "
            "configure stage to install them, or set k8s_job_api: auto to use Kubeflow Trainer v2"
        )


def served_job_types(kubectl: Kubectl) -> list[str]:
    """The job types of either API the server has: a delete that names one it lacks is refused whole."""
    names = set(kubectl.run("api-resources", "-o", "name").split())
    return [r for r in RESOURCE.values() if r in names]
