"""Objects by (group, plural, namespace, name), with the metadata a real server keeps (uid, resourceVersion,
generation, creationTimestamp), label and field selection, and cascading delete by ownerReferences."""

from __future__ import annotations

import copy
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from tests.k8s.apiserver.resources import BUILTIN, Resource, from_crd

Key = tuple[str, str, str, str]  # group, plural, namespace ("" when cluster-scoped), name


class ApiError(Exception):
    """A failure the server answers with a Status object, as the real one does."""

    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message

    def status(self) -> dict[str, Any]:
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }


def not_found(resource: Resource, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{resource.qualified} "{name}" not found')


class Store:
    def __init__(self) -> None:
        self.lock = threading.RLock()
        # Notified at each write (resourceVersion bumped): watches and the controllers wait on it, as a real
        # server's watchers are told of each change, instead of listing the store again and again.
        self.changed = threading.Condition(self.lock)
        self.objects: dict[Key, dict[str, Any]] = {}
        self.version = 1
        self.types: dict[Key, Resource] = {}
        # Called after each stored write: the controllers the double plays react to objects here.
        self.hooks: list[Callable[[Resource, dict[str, Any]], None]] = []
        # Called before a write with (type, live or None, new): admission checks raise ApiError.
        self.validators: list[Callable[[Resource, dict[str, Any] | None, dict[str, Any]], None]] = []

    # -- types -------------------------------------------------------------------------------------------
    def resources(self) -> list[Resource]:
        with self.lock:
            crds = [o for k, o in self.objects.items() if k[1] == "customresourcedefinitions"]
        return [*BUILTIN, *(r for crd in crds for r in from_crd(crd))]

    def resource(self, group: str, version: str, plural: str) -> Resource | None:
        for r in self.resources():
            if (r.group, r.version, r.plural) == (group, version, plural):
                return r
        return None

    def resource_of(self, obj: dict[str, Any]) -> Resource:
        group, _, version = obj.get("apiVersion", "").rpartition("/")
        for r in self.resources():
            if (r.group, r.version, r.kind) == (group, version, obj.get("kind")):
                return r
        raise ApiError(404, "NotFound", f"no resource for {obj.get('apiVersion')} {obj.get('kind')}")

    # -- reads -------------------------------------------------------------------------------------------
    def get(self, resource: Resource, namespace: str, name: str) -> dict[str, Any]:
        with self.lock:
            obj = self.objects.get(self._key(resource, namespace, name))
            if obj is None:
                raise not_found(resource, name)
            return copy.deepcopy(obj)

    def find(self, resource: Resource, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return self.get(resource, namespace, name)
        except ApiError:
            return None

    def list(
        self, resource: Resource, namespace: str, labels: str = "", fields: str = ""
    ) -> list[dict[str, Any]]:
        with self.lock:
            found = [
                copy.deepcopy(o)
                for k, o in sorted(self.objects.items())
                if k[:2] == (resource.group, resource.plural)
                and (not namespace or k[2] == namespace)
                and matches_labels(o, labels)
                and matches_fields(o, fields)
            ]
        return found

    def wait_change(self, version: int, timeout: float) -> None:
        """Until a write after `version` (at once if there was one), wake(), or the timeout."""
        with self.changed:
            if self.version == version:
                self.changed.wait(timeout)

    def wake(self) -> None:
        """Ends every wait_change now (the server stops)."""
        with self.changed:
            self.changed.notify_all()

    def _bump(self) -> str:
        self.version += 1
        self.changed.notify_all()
        return str(self.version)

    # -- writes ------------------------------------------------------------------------------------------
    def put(self, resource: Resource, obj: dict[str, Any], dry_run: bool = False) -> dict[str, Any]:
        """Create or replace; returns what is stored. A write that changes nothing keeps resourceVersion."""
        meta = obj.setdefault("metadata", {})
        namespace = meta.get("namespace", "") if resource.namespaced else ""
        if resource.namespaced:
            if not namespace:
                raise ApiError(400, "BadRequest", "the namespace of the object must be set")
            self._require_namespace(namespace)
        with self.lock:
            key = self._key(resource, namespace, meta["name"])
            live = self.objects.get(key)
            merged = self._merge(live, obj)
            for check in self.validators:
                check(resource, live, merged)
            if live is not None and _same(live, merged):
                return copy.deepcopy(live)
            if dry_run:
                return merged
            merged["metadata"]["resourceVersion"] = self._bump()
            self.objects[key] = merged
            self.types[key] = resource
            stored = copy.deepcopy(merged)
        for hook in self.hooks:
            hook(resource, stored)
        return stored

    def update_status(self, resource: Resource, namespace: str, name: str, status: dict[str, Any]) -> None:
        with self.lock:
            obj = self.objects.get(self._key(resource, namespace, name))
            if obj is None or obj.get("status") == status:
                return
            obj["status"] = copy.deepcopy(status)
            obj["metadata"]["resourceVersion"] = self._bump()

    def delete(self, resource: Resource, namespace: str, name: str) -> dict[str, Any]:
        with self.lock:
            key = self._key(resource, namespace, name)
            obj = self.objects.pop(key, None)
            if obj is None:
                raise not_found(resource, name)
            self.types.pop(key)
            self._bump()
            uid = obj["metadata"]["uid"]
            owned = [
                (k, self.types[k])
                for k, o in self.objects.items()
                if any(r.get("uid") == uid for r in o["metadata"].get("ownerReferences") or [])
            ]
            if resource.kind == "Namespace":  # the namespace controller: all that is in it goes with it
                owned += [(k, self.types[k]) for k in self.objects if k[2] == name]
        for key, kind in owned:  # the garbage collector: what the object owned goes with it (a job's pods)
            if self.find(kind, key[2], key[3]) is not None:
                self.delete(kind, key[2], key[3])
        return obj

    def _require_namespace(self, namespace: str) -> None:
        if ("", "namespaces", "", namespace) not in self.objects:
            raise ApiError(404, "NotFound", f'namespaces "{namespace}" not found')

    @staticmethod
    def _key(resource: Resource, namespace: str, name: str) -> Key:
        return (resource.group, resource.plural, namespace if resource.namespaced else "", name)

    @staticmethod
    def _merge(live: dict[str, Any] | None, applied: dict[str, Any]) -> dict[str, Any]:
        """Server-side apply of one manager: the applied fields replace the live ones; the server's own
        metadata and the status stay."""
        new = copy.deepcopy(applied)
        meta = new["metadata"]
        if live is None:
            meta.update(
                uid=str(uuid.uuid4()),
                generation=1,
                creationTimestamp=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            )
            return new
        for key in ("uid", "creationTimestamp", "resourceVersion", "ownerReferences"):
            if key in live["metadata"] and key not in meta:
                meta[key] = live["metadata"][key]
        changed = live.get("spec") != new.get("spec")
        meta["generation"] = live["metadata"].get("generation", 1) + (1 if changed else 0)
        if "status" in live and "status" not in new:
            new["status"] = copy.deepcopy(live["status"])
        return new


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Equal but for resourceVersion: a write that changes nothing."""
    return _without_version(a) == _without_version(b)


def _without_version(obj: dict[str, Any]) -> dict[str, Any]:
    meta = {k: v for k, v in obj["metadata"].items() if k != "resourceVersion"}
    return {**obj, "metadata": meta}


def matches_labels(obj: dict[str, Any], selector: str) -> bool:
    labels = obj.get("metadata", {}).get("labels") or {}
    for term in filter(None, (t.strip() for t in selector.split(","))):
        if "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key) == value:
                return False
        elif "=" in term:
            key, value = term.replace("==", "=").split("=", 1)
            if labels.get(key) != value:
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


def matches_fields(obj: dict[str, Any], selector: str) -> bool:
    for term in filter(None, selector.split(",")):
        path, _, value = term.partition("=")
        node: Any = obj
        for part in path.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if str(node) != value:
            return False
    return True
