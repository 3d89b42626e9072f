"""Scrub secrets before results leave the host.

nccl-tests' -J JSON embeds the whole process environment ("env": ["NAME=value", ...]), which on a cloud
host holds tokens and keys. Variables with secret-looking names, and values that look like a private key,
a JWT or a URL with a password, become NAME=<redacted>.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pav.errors import PavError

REDACTED = "<redacted>"
# Shorter known values would replace common words all over a log.
MIN_SECRET_LEN = 4

_SECRET_WORDS = re.compile(r"SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|TOKENS?(?:_|$)")
_SECRET_PREFIXES = ("NEBIUS_", "AWS_SECRET")
# KEY only as a whole name part: API_KEY, AWS_ACCESS_KEY_ID, but not NCCL_IB_PKEY (an InfiniBand partition).
_KEY_PARTS = {"KEY", "KEYS", "APIKEY", "PRIVATEKEY", "SECRETKEY", "ACCESSKEY"}
_ENV_ENTRY = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.DOTALL)
# nccl-tests truncates strings at 2 KB, so a key may lack its END line.
_PEM = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----")
_PEM_BLOCK = re.compile(_PEM.pattern + r".*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)", re.DOTALL)
_JWT = re.compile(r"\beyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*")
_URL_PASSWORD = re.compile(r"://[^/\s:@]+:[^/\s@]+@")
# A JSON string literal; the unterminated tail of a cut-off file counts too.
_JSON_STRING = re.compile(r'"((?:[^"\\]|\\.)*)("|\Z)', re.DOTALL)


def is_secret_name(name: str) -> bool:
    upper = name.upper()
    if upper.startswith(_SECRET_PREFIXES) or _SECRET_WORDS.search(upper):
        return True
    return any(part in _KEY_PARTS for part in re.split(r"[^A-Z0-9]+", upper))


def is_secret_value(value: str) -> bool:
    return bool(_PEM.search(value) or _JWT.search(value) or _URL_PASSWORD.search(value))


def redact_string(text: str) -> str:
    """An env entry NAME=value, or any other string of a report."""
    entry = _ENV_ENTRY.match(text)
    if entry:
        name, value = entry.groups()
        return f"{name}={REDACTED}" if is_secret_name(name) or is_secret_value(value) else text
    return REDACTED if is_secret_value(text) else text


def redact_report(report: Any) -> Any:
    """A redacted copy of a parsed -J report (or any JSON value); the input is left as it was."""
    if isinstance(report, str):
        return redact_string(report)
    if isinstance(report, list):
        return [redact_report(item) for item in report]
    if isinstance(report, dict):
        return {key: redact_report(value) for key, value in report.items()}
    return report


def redact_json_text(text: str) -> tuple[str, int]:
    """Redact every string literal of JSON text, parsed or not: a crashed run leaves a cut-off file whose
    env is intact. Returns the new text and how many strings changed."""
    changed = 0

    def scrub(match: re.Match[str]) -> str:
        nonlocal changed
        literal, closing = match.groups()
        try:
            value = json.loads(f'"{literal}"')
        except json.JSONDecodeError:
            value = literal  # a literal cut off inside an escape
        redacted = redact_string(value)
        if redacted == value:
            return match.group(0)
        changed += 1
        return json.dumps(redacted)[:-1] + closing

    return _JSON_STRING.sub(scrub, text), changed


def redact_file(path: Path) -> int:
    """Rewrite a -J file in place, atomically and keeping its mode; returns how many strings changed."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise PavError(f"cannot read {path}: {exc.strerror or exc}") from None
    new_text, changed = redact_json_text(text)
    if changed:
        _replace(path, new_text)
    return changed


def _replace(path: Path, text: str) -> None:
    mode = path.stat().st_mode & 0o7777
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def secret_values(env: Mapping[str, str]) -> set[str]:
    """The values of secret-named variables of an environment (e.g. os.environ), for redact_text."""
    return {value for name, value in env.items() if is_secret_name(name) and len(value) >= MIN_SECRET_LEN}


def redact_text(text: str, secrets: Iterable[str]) -> str:
    """A log with each known secret value, and any private key block or JWT, replaced by <redacted>."""
    # Longest first, so a secret that contains another is replaced whole.
    for secret in sorted({s for s in secrets if len(s) >= MIN_SECRET_LEN}, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    text = _PEM_BLOCK.sub(REDACTED, text)
    return _JWT.sub(REDACTED, text)
