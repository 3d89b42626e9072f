"""Pushing a run's metrics to a Prometheus pushgateway (--pushgateway URL): one group per host (job pav,
env, host) and one for the run (job pav, env), each replaced by a PUT, so the gateway holds what the
latest run of the env said and nothing older: a host the latest run did not have loses its group.

https://github.com/prometheus/pushgateway#api
"""

from __future__ import annotations

import base64
import json
from typing import Any
from urllib.parse import quote, urlsplit

from pav.reporting.exposition import Family, render

JOB = "pav"  # the job label; env and host complete the grouping key
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
TIMEOUT_S = 10  # per request


def push(url: str, env: str, families: list[Family]) -> tuple[bool, str]:
    """(True, what was pushed) or (False, what failed and the fix). The hosts' groups go first and the
    run's last, so the run's end time moves only once every host's group is in."""
    # Loaded here, not at import: http.client (and ssl) would cost every start of the CLI, which imports
    # this module to check the URL.
    from http.client import HTTPException

    hosts, stale, step = _hosts(families), list[str](), ""
    try:
        for host in hosts:
            step = f"PUT group env/{env}/host/{host}"
            _request(url, "PUT", grouping_path({"env": env, "host": host}), _body(families, host))
        step = "list the gateway's groups (GET /api/v1/metrics)"
        stale = [h for h in _group_hosts(url, env) if h not in hosts]
        for host in stale:
            step = f"DELETE stale group env/{env}/host/{host}"
            _request(url, "DELETE", grouping_path({"env": env, "host": host}))
        step = f"PUT group env/{env}"
        _request(url, "PUT", grouping_path({"env": env}), _body(families, None))
    except (OSError, ValueError, HTTPException) as exc:
        return False, f"{step}: {_why(exc)}; fix: check the URL and that the pushgateway is up"
    dropped = f", {len(stale)} stale host group(s) deleted" if stale else ""
    return True, f"{len(hosts) + 1} groups pushed (job {JOB}, env {env}){dropped}"


def grouping_path(key: dict[str, str]) -> str:
    """/metrics/job/pav/LABEL/VALUE...; a value with a slash (or none) in the base64 form the gateway
    takes, since a %2F would not survive its router."""
    parts = [f"/metrics/job/{JOB}"]
    for name, value in key.items():
        if "/" in value or not value:
            encoded = base64.urlsafe_b64encode(value.encode()).decode() or "="
            parts.append(f"/{name}@base64/{encoded}")
        else:
            parts.append(f"/{name}/{quote(value, safe='')}")
    return "".join(parts)


def check_url(url: str) -> str | None:
    """Why the URL cannot be a pushgateway's, or None."""
    split = urlsplit(url)
    if split.scheme not in ("http", "https") or not split.hostname:
        return f"{public_url(url)} is not an http(s) URL with a host (e.g. http://pushgateway:9091)"
    return None


def public_url(url: str) -> str:
    """The URL without its credentials, as results.json and the summary may show it."""
    split = urlsplit(url)
    if split.username is None:
        return url
    host = split.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    netloc += f":{split.port}" if split.port else ""
    return split._replace(netloc=netloc).geturl()


def _group_hosts(url: str, env: str) -> list[str]:
    """The hosts of the env's groups the gateway holds (this tool's: job pav, env, host, nothing else)."""
    data: dict[str, Any] = json.loads(_request(url, "GET", "/api/v1/metrics"))
    out = []
    for group in data.get("data") or []:
        labels = group.get("labels") or {}
        if set(labels) == {"job", "env", "host"} and labels["job"] == JOB and labels["env"] == env:
            out.append(str(labels["host"]))
    return out


def _request(url: str, method: str, path: str, body: str | None = None) -> bytes:
    import urllib.request  # not at import: see push

    if (bad := check_url(url)) is not None:
        raise ValueError(bad)
    data = None if body is None else body.encode()
    request = urllib.request.Request(public_url(url).rstrip("/") + path, data=data, method=method)
    if body is not None:
        request.add_header("Content-Type", CONTENT_TYPE)
    split = urlsplit(url)
    if split.username is not None:  # http://USER:PASSWORD@host: the gateway's basic auth
        token = f"{split.username}:{split.password or ''}".encode()
        request.add_header("Authorization", "Basic " + base64.b64encode(token).decode())
    with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
        return bytes(response.read())


def _why(exc: Exception) -> str:
    import urllib.error  # not at import: see push

    if isinstance(exc, urllib.error.HTTPError):
        body = exc.read().decode(errors="replace").strip().splitlines()
        return f"HTTP {exc.code} {exc.reason}" + (f": {body[0][:200]}" if body else "")
    if isinstance(exc, urllib.error.URLError):
        return str(exc.reason)
    return str(exc)


def _body(families: list[Family], host: str | None) -> str:
    """The samples of one host (None: the run's own, of no host), without the labels the group adds."""
    chosen = [Family(f.name, f.help, [s for s in f.samples if s.label("host") == host]) for f in families]
    return render(chosen, drop=("env", "host"))


def _hosts(families: list[Family]) -> list[str]:
    found = (s.label("host") for f in families for s in f.samples)
    return list(dict.fromkeys(h for h in found if h is not None))
