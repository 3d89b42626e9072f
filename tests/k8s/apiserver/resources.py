"""The resource types the double serves: Kubernetes' built-in ones the tool and the pinned operator manifests
use, plus one per served version of every stored CustomResourceDefinition (as a real API server adds them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Resource:
    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    short_names: tuple[str, ...] = ()

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified(self) -> str:
        """How a real server names the type in its messages: pods, pytorchjobs.kubeflow.org."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def discovery(self) -> dict[str, Any]:
        verbs = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
        return {
            "name": self.plural,
            "singularName": self.kind.lower(),
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": verbs,
            "shortNames": list(self.short_names),
        }


def _core(kind: str, plural: str, namespaced: bool = True, *short: str) -> Resource:
    return Resource("", "v1", kind, plural, namespaced, short)


RBAC = "rbac.authorization.k8s.io"
BUILTIN = (
    _core("Namespace", "namespaces", False, "ns"),
    _core("Node", "nodes", False, "no"),
    _core("Pod", "pods", True, "po"),
    _core("Service", "services", True, "svc"),
    _core("ConfigMap", "configmaps", True, "cm"),
    _core("Secret", "secrets"),
    _core("ServiceAccount", "serviceaccounts"),
    Resource("apps", "v1", "Deployment", "deployments", True, ("deploy",)),
    Resource("batch", "v1", "Job", "jobs", True),
    Resource(RBAC, "v1", "ClusterRole", "clusterroles", False),
    Resource(RBAC, "v1", "ClusterRoleBinding", "clusterrolebindings", False),
    Resource(RBAC, "v1", "Role", "roles", True),
    Resource(RBAC, "v1", "RoleBinding", "rolebindings", True),
    Resource(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingWebhookConfiguration",
        "validatingwebhookconfigurations",
        False,
    ),
    Resource(
        "admissionregistration.k8s.io",
        "v1",
        "MutatingWebhookConfiguration",
        "mutatingwebhookconfigurations",
        False,
    ),
    Resource(
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        False,
        ("crd", "crds"),
    ),
)


def from_crd(crd: dict[str, Any]) -> list[Resource]:
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    namespaced = spec.get("scope") == "Namespaced"
    return [
        Resource(
            spec["group"],
            v["name"],
            names["kind"],
            names["plural"],
            namespaced,
            tuple(names.get("shortNames") or ()),
        )
        for v in spec.get("versions") or []
        if v.get("served", True)
    ]
