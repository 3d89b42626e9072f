"""Pushing a run's metrics to a Prometheus pushgateway (--pushgateway URL): one group per host (job pav,
env, host) and one for the run (job pav, env), each replaced by a PUT, so the gateway holds what the
latest run of the env said and nothing older: a host the latest run did not have loses its group.

Basic auth never comes from the command line, which `ps` shows every user for the whole run: a URL with
USER:PASSWORD@ is refused; the credentials come from PAV_PUSHGATEWAY_AUTH=USER:PASSWORD (taken out of the
environment at once, so nothing the run starts inherits it) or a file holding USER:PASSWORD that only its
owner can read (--pushgateway-auth-file FILE, or PAV_PUSHGATEWAY_AUTH_FILE=FILE), as ssh holds its keys.

https://github.com/prometheus/pushgateway#api
"""

from __future__ import annotations

import base64
import json
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from pav.errors import PavError
from pav.reporting.exposition import Family, render
from pav.secrets.basic_auth import BasicAuth

JOB = "pav"  # the job label; env and host complete the grouping key
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
TIMEOUT_S = 10  # per request
AUTH_ENV = "PAV_PUSHGATEWAY_AUTH"  # USER:PASSWORD
AUTH_FILE_ENV = "PAV_PUSHGATEWAY_AUTH_FILE"  # a file holding USER:PASSWORD
SAFE_WAYS = (
    f"pass the credentials as {AUTH_ENV}=USER:PASSWORD in the environment, or in a file holding "
    f"USER:PASSWORD that only you can read (--pushgateway-auth-file FILE, or {AUTH_FILE_ENV}=FILE)"
)
PRIVATE = 0o077  # mode bits that let others than the owner at the file: ssh refuses a private key so


def credentials(
    url: str | None, auth_file: Path | None, environ: MutableMapping[str, str]
) -> BasicAuth | None:
    """--pushgateway URL's basic auth, or None; PavError on a URL with credentials or a bad auth file.
    PAV_PUSHGATEWAY_AUTH leaves environ whatever the flags: nothing the run starts (Ansible, ssh, Terraform,
    their records in the run dir) inherits it."""
    inline = environ.pop(AUTH_ENV, "") or None
    if url is None:
        if auth_file is not None:
            raise PavError(
                "--pushgateway-auth-file holds --pushgateway's credentials: give --pushgateway URL"
            )
        return None
    if (bad := check_url(url)) is not None:
        raise PavError(f"--pushgateway: {bad}")
    from_env = environ.get(AUTH_FILE_ENV) or None
    path = auth_file or (Path(from_env) if from_env else None)
    if inline is not None and path is not None:
        raise PavError(f"the pushgateway's credentials are given twice ({AUTH_ENV} and {path}): keep one")
    if path is not None:
        return _read_auth_file(path, environ)
    return _auth(inline, AUTH_ENV, AUTH_ENV) if inline is not None else None


def push(url: str, env: str, families: list[Family], auth: BasicAuth | None = None) -> tuple[bool, str]:
    """(True, what was pushed) or (False, what failed and the fix). The hosts' groups go first and the
    run's last, so the run's end time moves only once every host's group is in."""
    # Loaded here, not at import: http.client (and ssl) would cost every start of the CLI, which imports
    # this module to check the URL.
    from http.client import HTTPException

    hosts, stale, step = _hosts(families), list[str](), ""
    try:
        for host in hosts:
            step = f"PUT group env/{env}/host/{host}"
            _request(url, auth, "PUT", grouping_path({"env": env, "host": host}), _body(families, host))
        step = "list the gateway's groups (GET /api/v1/metrics)"
        stale = [h for h in _group_hosts(url, auth, env) if h not in hosts]
        for host in stale:
            step = f"DELETE stale group env/{env}/host/{host}"
            _request(url, auth, "DELETE", grouping_path({"env": env, "host": host}))
        step = f"PUT group env/{env}"
        _request(url, auth, "PUT", grouping_path({"env": env}), _body(families, None))
    except (OSError, ValueError, HTTPException) as exc:
        return False, f"{step}: {_why(exc)}; fix: {_fix(exc, auth)}"
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
    if split.username is not None or split.password is not None:
        return (
            f"the URL carries credentials, which ps shows to every user for the whole run: give it as "
            f"{public_url(url)} and {SAFE_WAYS}"
        )
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


def _group_hosts(url: str, auth: BasicAuth | None, env: str) -> list[str]:
    """The hosts of the env's groups the gateway holds (this tool's: job pav, env, host, nothing else)."""
    data: dict[str, Any] = json.loads(_request(url, auth, "GET", "/api/v1/metrics"))
    out = []
    for group in data.get("data") or []:
        labels = group.get("labels") or {}
        if set(labels) == {"job", "env", "host"} and labels["job"] == JOB and labels["env"] == env:
            out.append(str(labels["host"]))
    return out


def _request(url: str, auth: BasicAuth | None, method: str, path: str, body: str | None = None) -> bytes:
    import urllib.request  # not at import: see push

    if (bad := check_url(url)) is not None:
        raise ValueError(bad)
    data = None if body is None else body.encode()
    request = urllib.request.Request(url.rstrip("/") + path, data=data, method=method)
    if body is not None:
        request.add_header("Content-Type", CONTENT_TYPE)
    if auth is not None:
        # Never sent on: urllib copies add_header's headers to wherever a redirect leads, another host too.
        request.add_unredirected_header("Authorization", auth.header())
    # No redirect is followed: the gateway's API answers where it is asked, and a redirect to another host
    # would take the run's metrics (and, before issue 62, its password) there. A 3xx fails the push.
    opener = urllib.request.build_opener(_no_redirect_handler()())
    with opener.open(request, timeout=TIMEOUT_S) as response:
        return bytes(response.read())


def _no_redirect_handler() -> type:
    import urllib.request

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any, **kwargs: Any) -> None:
            return None  # urllib then raises HTTPError for the 3xx answer

    return NoRedirect


def _read_auth_file(path: Path, environ: MutableMapping[str, str]) -> BasicAuth:
    try:
        mode = path.stat().st_mode & 0o7777
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise PavError(f"pushgateway auth file {path}: {why}; give a file holding USER:PASSWORD") from None
    if mode & PRIVATE and not _systemd_credential(path, environ):
        raise PavError(
            f"pushgateway auth file {path} has mode {mode:04o}: others than its owner can read the password; "
            f"chmod 600 {path} (or load it with systemd's LoadCredential=, docs/nightly.md)"
        )
    return _auth(text.removesuffix("\n").removesuffix("\r"), str(path), f"pushgateway auth file {path}")


def _systemd_credential(path: Path, environ: MutableMapping[str, str]) -> bool:
    """A file of the service's $CREDENTIALS_DIRECTORY (LoadCredential=): systemd writes it 0400 and gives the
    service's user read access by an ACL, whose mask stat shows as group read; the user alone reads it."""
    folder = environ.get("CREDENTIALS_DIRECTORY")
    return bool(folder) and path.resolve().parent == Path(folder or "").resolve()


def _auth(text: str, source: str, named: str) -> BasicAuth:
    user, colon, password = text.partition(":")
    if not colon or not user or "\n" in text:
        # The text itself is never quoted: it holds the password.
        raise PavError(f"{named} must hold one line USER:PASSWORD, the pushgateway's basic auth")
    return BasicAuth(user, password, source)


def _why(exc: Exception) -> str:
    import urllib.error  # not at import: see push

    if isinstance(exc, urllib.error.HTTPError):
        body = exc.read().decode(errors="replace").strip().splitlines()
        return f"HTTP {exc.code} {exc.reason}" + (f": {body[0][:200]}" if body else "")
    if isinstance(exc, urllib.error.URLError):
        return str(exc.reason)
    return str(exc)


def _fix(exc: Exception, auth: BasicAuth | None) -> str:
    code = getattr(exc, "code", None)
    if isinstance(code, int) and 300 <= code < 400:
        headers = getattr(exc, "headers", None)
        where = f" to {headers.get('Location')}" if headers and headers.get("Location") else ""
        return f"the gateway redirects{where}: give --pushgateway the URL it answers at"
    if code not in (401, 403):  # urllib's HTTPError: the gateway's basic auth said no
        return "check the URL and that the pushgateway is up"
    if auth is None:
        return f"the gateway asks for credentials: {SAFE_WAYS}"
    return f"check the user and password of {auth.source}"


def _body(families: list[Family], host: str | None) -> str:
    """The samples of one host (None: the run's own, of no host), without the labels the group adds."""
    chosen = [Family(f.name, f.help, [s for s in f.samples if s.label("host") == host]) for f in families]
    return render(chosen, drop=("env", "host"))


def _hosts(families: list[Family]) -> list[str]:
    found = (s.label("host") for f in families for s in f.samples)
    return list(dict.fromkeys(h for h in found if h is not None))
