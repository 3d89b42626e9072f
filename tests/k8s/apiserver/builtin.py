"""What the real control plane does to the built-in objects the tool and the operator manifests write:
namespaces become Active, CRDs Established (and refuse to drop a stored version), Deployments roll out."""

from __future__ import annotations

from typing import Any

from tests.k8s.apiserver.resources import Resource
from tests.k8s.apiserver.store import ApiError, Store


def install(store: Store) -> None:
    def react(resource: Resource, obj: dict[str, Any]) -> None:
        status = _status(resource.kind, obj)
        if status is not None:
            store.update_status(
                resource, obj["metadata"].get("namespace", ""), obj["metadata"]["name"], status
            )

    store.validators.append(_stored_versions_kept)
    store.hooks.append(react)


def _stored_versions_kept(resource: Resource, live: dict[str, Any] | None, new: dict[str, Any]) -> None:
    """apiextensions' own rule: every version in status.storedVersions must stay in spec.versions."""
    if resource.kind != "CustomResourceDefinition" or live is None:
        return
    names = {v["name"] for v in new.get("spec", {}).get("versions") or []}
    for i, stored in enumerate((live.get("status") or {}).get("storedVersions") or []):
        if stored not in names:
            raise ApiError(
                422,
                "Invalid",
                f'CustomResourceDefinition.apiextensions.k8s.io "{new["metadata"]["name"]}" is invalid: '
                f'status.storedVersions[{i}]: Invalid value: "{stored}": must appear in spec.versions',
            )


def _status(kind: str, obj: dict[str, Any]) -> dict[str, Any] | None:
    if kind == "Namespace":
        return {"phase": "Active"}
    if kind == "CustomResourceDefinition":
        spec = obj["spec"]
        stored = list((obj.get("status") or {}).get("storedVersions") or [])
        stored += [v["name"] for v in spec["versions"] if v.get("storage") and v["name"] not in stored]
        established = {"type": "Established", "status": "True", "reason": "InitialNamesAccepted"}
        return {"conditions": [established], "acceptedNames": spec["names"], "storedVersions": stored}
    if kind == "Deployment":
        replicas = obj["spec"].get("replicas", 1)
        available = {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"}
        progressing = {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable"}
        return {
            "observedGeneration": obj["metadata"]["generation"],
            "replicas": replicas,
            "updatedReplicas": replicas,
            "readyReplicas": replicas,
            "availableReplicas": replicas,
            "conditions": [available, progressing],
        }
    return None
