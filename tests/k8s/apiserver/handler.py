"""The HTTP side: discovery (legacy, which kubectl falls back to), the OpenAPI v3 documents kubectl reads to
learn that PATCH takes fieldValidation, and the REST verbs on /api/v1/... and /apis/GROUP/VERSION/...."""

from __future__ import annotations

import json
import time
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

import yaml

from tests.k8s.apiserver.resources import Resource
from tests.k8s.apiserver.store import ApiError, Store


class Handler(BaseHTTPRequestHandler):
    store: Store
    logs: dict[str, str]  # namespace/pod/container -> log text
    requests: list[str]
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:  # quiet: tests read self.requests instead
        pass

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_PATCH(self) -> None:
        self._serve("PATCH")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    # ---------------------------------------------------------------------------------------------------
    def _serve(self, verb: str) -> None:
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.requests.append(f"{verb} {url.path}{'?' + url.query if url.query else ''}")
        try:
            if "protobuf" in (self.headers.get("Content-Type") or ""):  # a real server would take it
                raise ApiError(415, "UnsupportedMediaType", "the double takes JSON and YAML bodies only")
            answer = self._route(verb, url.path.strip("/").split("/"), query, body)
        except ApiError as exc:
            self._json(exc.code, exc.status())
            return
        if answer is not None:
            self._json(*answer)

    def _route(
        self, verb: str, parts: list[str], query: dict[str, str], body: bytes
    ) -> tuple[int, Any] | None:
        if parts == ["version"]:
            return 200, {
                "major": "1",
                "minor": "32",
                "gitVersion": "v1.32.0-pav-double",
                "platform": "linux/amd64",
            }
        if parts[0] == "openapi":
            return 200, self._openapi(parts[2:] if len(parts) > 2 else [])
        if parts == ["api"]:
            return 200, {
                "kind": "APIVersions",
                "versions": ["v1"],
                "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}],
            }
        if parts == ["apis"]:
            return 200, self._groups()
        if parts[0] == "api" and len(parts) == 2:
            return 200, self._resource_list("", parts[1])
        if parts[0] == "apis" and len(parts) == 3:
            return 200, self._resource_list(parts[1], parts[2])
        group, version, rest = (
            ("", parts[1], parts[2:]) if parts[0] == "api" else (parts[1], parts[2], parts[3:])
        )
        resource, namespace, name, sub = self._target(group, version, rest)
        if verb == "GET" and name and sub == "log":
            self.store.get(resource, namespace, name)  # a deleted pod's log is gone with it (404)
            return self._text(self.logs.get(f"{namespace}/{name}/{query.get('container', '')}", ""))
        if verb == "GET" and name:
            return 200, self.store.get(resource, namespace, name)
        if verb == "GET" and query.get("watch") in ("true", "1"):
            return self._watch(resource, namespace, query)
        if verb == "GET":
            items = self.store.list(
                resource, namespace, query.get("labelSelector", ""), query.get("fieldSelector", "")
            )
            return 200, {
                "kind": f"{resource.kind}List",
                "apiVersion": resource.group_version,
                "metadata": {"resourceVersion": str(self.store.version)},
                "items": items,
            }
        if verb == "DELETE":
            return 200, self.store.delete(resource, namespace, name)
        obj = _parse(body)
        obj.setdefault("metadata", {})
        if resource.namespaced:
            obj["metadata"].setdefault("namespace", namespace)
        dry_run = query.get("dryRun") == "All"
        if verb == "POST":
            if self.store.find(resource, namespace, obj["metadata"].get("name", "")):
                raise ApiError(
                    409, "AlreadyExists", f'{resource.qualified} "{obj["metadata"]["name"]}" already exists'
                )
            return 201, self.store.put(resource, obj, dry_run)
        if verb == "PATCH" and "apply-patch" not in (self.headers.get("Content-Type") or ""):
            live = self.store.get(resource, namespace, name)
            return 200, self.store.put(resource, _merge_patch(live, obj), dry_run)
        obj["metadata"]["name"] = name
        return 200, self.store.put(resource, obj, dry_run)

    def _target(self, group: str, version: str, rest: list[str]) -> tuple[Resource, str, str, str]:
        namespace = ""
        if len(rest) >= 3 and rest[0] == "namespaces":
            candidate = self.store.resource(group, version, rest[2])
            if candidate is not None and candidate.namespaced:
                namespace, rest = rest[1], rest[2:]
        resource = self.store.resource(group, version, rest[0])
        if resource is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        name = rest[1] if len(rest) > 1 else ""
        sub = rest[2] if len(rest) > 2 else ""
        return resource, namespace, name, sub

    # -- discovery ---------------------------------------------------------------------------------------
    def _groups(self) -> dict[str, Any]:
        versions: dict[str, list[str]] = {}
        for r in self.store.resources():
            if r.group and r.version not in versions.setdefault(r.group, []):
                versions[r.group].append(r.version)
        groups = []
        for group, vs in sorted(versions.items()):
            entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in vs]
            groups.append({"name": group, "versions": entries, "preferredVersion": entries[0]})
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}

    def _resource_list(self, group: str, version: str) -> dict[str, Any]:
        found = [r for r in self.store.resources() if (r.group, r.version) == (group, version)]
        if not found:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": found[0].group_version,
            "resources": [r.discovery() for r in found],
        }

    def _openapi(self, gv: list[str]) -> dict[str, Any]:
        """Root: one entry per group version. A group version: a PATCH per type that takes fieldValidation
        (all kubectl looks for before a server-side apply or diff)."""
        resources = self.store.resources()
        if not gv:
            paths = {}
            for r in resources:
                prefix = f"apis/{r.group_version}" if r.group else "api/v1"
                paths[prefix] = {"serverRelativeURL": f"/openapi/v3/{prefix}?hash={self.store.version}"}
            return {"paths": paths}
        wanted = "/".join(gv[1:]) if gv[0] == "apis" else "v1"
        paths = {}
        for r in (r for r in resources if r.group_version == wanted):
            base = f"/apis/{r.group_version}" if r.group else "/api/v1"
            scope = "/namespaces/{namespace}" if r.namespaced else ""
            gvk = {"group": r.group, "version": r.version, "kind": r.kind}
            patch = {
                "x-kubernetes-group-version-kind": gvk,
                "x-kubernetes-action": "patch",
                "parameters": [{"name": "fieldValidation", "in": "query", "schema": {"type": "string"}}],
                "responses": {"200": {"description": "OK"}},
            }
            paths[f"{base}{scope}/{r.plural}/{{name}}"] = {"patch": patch}
        return {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": "v1.32.0"}, "paths": paths}

    # -- answers ---------------------------------------------------------------------------------------------
    def _json(self, code: int, obj: Any) -> None:
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _text(self, text: str) -> None:
        data = text.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _watch(self, resource: Resource, namespace: str, query: dict[str, str]) -> None:
        """Events for what changes after the resourceVersion given, until the timeout or the client goes."""
        since = int(query.get("resourceVersion") or 0)
        end = time.monotonic() + min(float(query.get("timeoutSeconds") or 60), 60)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        seen: dict[str, str] = {}
        try:
            while time.monotonic() < end and not getattr(self.server, "stopping", False):
                version = self.store.version  # before the list: a write after it ends the wait below at once
                items = self.store.list(
                    resource, namespace, query.get("labelSelector", ""), query.get("fieldSelector", "")
                )
                now = {o["metadata"]["name"]: o for o in items}
                for name, obj in now.items():
                    rv = obj["metadata"]["resourceVersion"]
                    if seen.get(name) != rv and int(rv) > since:
                        self._chunk({"type": "MODIFIED" if name in seen else "ADDED", "object": obj})
                    seen[name] = rv
                for name in [n for n in seen if n not in now]:
                    self._chunk(
                        {
                            "type": "DELETED",
                            "object": {
                                "kind": resource.kind,
                                "apiVersion": resource.group_version,
                                "metadata": {"name": name, "namespace": namespace},
                            },
                        }
                    )
                    del seen[name]
                self.store.wait_change(version, max(0.0, min(1.0, end - time.monotonic())))
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.close_connection = True

    def _chunk(self, event: dict[str, Any]) -> None:
        data = json.dumps(event).encode() + b"\n"
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()


def _parse(body: bytes) -> dict[str, Any]:
    """kubectl sends JSON, also for a server-side apply (whose content type says YAML): JSON is parsed as
    JSON (YAML's parser takes seconds over the Trainer manifests); only a body that is not JSON as YAML."""
    text = body.decode() or "{}"
    try:
        obj = json.loads(text)
    except json.JSONDecodeError:
        obj = yaml.safe_load(text)
    if not isinstance(obj, dict):
        raise ApiError(400, "BadRequest", "the body of the request is not an object")
    return obj


def _merge_patch(live: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    for key, value in patch.items():
        if value is None:
            live.pop(key, None)
        elif isinstance(value, dict) and isinstance(live.get(key), dict):
            live[key] = _merge_patch(live[key], value)
        else:
            live[key] = value
    return live
