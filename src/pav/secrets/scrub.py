"""No secret stays in the run dir: once the run is over, every file of it is scrubbed.

Ansible's artifacts under RUN/ansible/ hold what no role chose to log: the environment Ansible ran with
(`command`), gathered facts with the host's environment (`job_events/`, `fact_cache/`), and the inventory
copy holds the group_vars as written. So the known secret values (secret-named variables of the
environment and of the inventory) and anything shaped like a private key or a JWT become <redacted>.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import yaml

from pav.context import RunContext
from pav.secrets.redact import is_secret_name, redact_text, secret_values

# Secret-named, but their values say where a secret is, not what it is (ansible_ssh_private_key_file).
_LOCATION_SUFFIXES = ("_FILE", "_PATH", "_DIR")
# Shorter values of secret-named variables are words, not secrets (a HOST_KEY_CHECKING of False):
# replacing them everywhere would corrupt the results.
MIN_KNOWN_LEN = 6


def scrub_run(ctx: RunContext) -> None:
    secrets = run_secrets(ctx)
    for path in _files(ctx.run_dir):
        scrub_file(path, secrets)
    ctx.results.error = scrub_text(ctx.results.error, secrets)


def run_secrets(ctx: RunContext) -> set[str]:
    found = secret_values(os.environ)
    for host in ctx.hosts:
        found |= set(_secret_vars(host.vars))
    for path in _files(ctx.run_dir / "inventory"):
        if path.suffix in (".yml", ".yaml", ".json"):
            found |= set(_secret_vars(_load(path)))
    return {value for value in found if len(value) >= MIN_KNOWN_LEN}


def scrub_text(text: str, secrets: Iterable[str]) -> str:
    # Also as JSON writes them: Ansible's artifacts are JSON, where a newline or quote is escaped.
    escaped = {json.dumps(s)[1:-1] for s in secrets}
    return redact_text(text, set(secrets) | escaped)


def scrub_file(path: Path, secrets: Iterable[str]) -> bool:
    try:
        text = path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return False  # not text (an archive, a core file): nothing a secret is written into as text
    clean = scrub_text(text, secrets)
    if clean == text:
        return False
    tmp = path.with_name(f".{path.name}.scrub")
    tmp.write_text(clean)
    os.chmod(tmp, path.stat().st_mode & 0o7777)
    os.replace(tmp, path)
    return True


def _secret_vars(data: Any, name: str = "") -> Iterator[str]:
    if isinstance(data, dict):
        for key, value in data.items():
            yield from _secret_vars(value, str(key))
    elif isinstance(data, list):
        for item in data:
            yield from _secret_vars(item, name)
    elif isinstance(data, str) and _is_secret_var(name):
        yield data


def _is_secret_var(name: str) -> bool:
    return is_secret_name(name) and not name.upper().endswith(_LOCATION_SUFFIXES)


def _load(path: Path) -> Any:
    try:
        return yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError, UnicodeDecodeError):
        return None


def _files(root: Path) -> Iterator[Path]:
    if root.is_dir():
        yield from (p for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink())
