"""The files of a run dir scrubbed of secrets: what the driver's own end (pav.stages.scrub) and the reaper
of a driver that died (pav.reaper) share, so a killed run's files are held to the same rule as a finished
one's.

Every text file loses the known secret values (and anything shaped like a private key or a JWT). Ansible's
records under RUN/ansible/ also lose every value they keep under a secret-looking name ("NEBIUS_IAM_TOKEN":
"...", in `command`'s environment and in gathered facts' `ansible_env`), known or not: a remote host's
environment holds secrets the driver never had, and a reaper knows only the environment it was started with.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from pav.secrets.redact import REDACTED, is_secret_name, redact_text, secret_values

# Secret-named, but their values say where a secret is, not what it is (ansible_ssh_private_key_file).
_LOCATION_SUFFIXES = ("_FILE", "_PATH", "_DIR")
# Shorter values of secret-named variables are words, not secrets (a HOST_KEY_CHECKING of False):
# replacing them everywhere would corrupt the results.
MIN_KNOWN_LEN = 6
ANSIBLE = "ansible"  # RUN/ansible/STAGE/: each playbook's ansible-runner private data dir
# A JSON member whose value is a string: "NAME": "value" (a file cut off by a kill ends mid-value).
_JSON_MEMBER = re.compile(r'"([A-Za-z_][A-Za-z0-9_.-]*)"(\s*:\s*)"((?:[^"\\]|\\.)*)("|\Z)')


def scrub_dir(run_dir: Path, secrets: Iterable[str]) -> None:
    """Every text file of the run dir; Ansible's records by name too."""
    known = set(secrets)
    for path in files(run_dir):
        scrub_file(path, known, by_name=path.relative_to(run_dir).parts[0] == ANSIBLE)


def scrub_dead_run(run_dir: Path, environ: Mapping[str, str]) -> None:
    """A run whose driver died: the scrub its end would have done, with the secrets still knowable (environ:
    the driver's environment, which its reaper inherited; the inventory copy's secret vars). ansible-runner's
    input files (RUN/ansible/STAGE/env/: envvars, extravars, passwords, ssh_key) go whole: they exist to hold
    secrets, a password under a prompt's pattern has no secret-looking name, and nothing reads them after the
    playbook."""
    for inputs in sorted(run_dir.glob(f"{ANSIBLE}/*/env")):
        shutil.rmtree(inputs, ignore_errors=True)
    scrub_dir(run_dir, known_secrets(environ, run_dir))


def known_secrets(environ: Mapping[str, str], run_dir: Path, more: Iterable[str] = ()) -> set[str]:
    """The values of secret-named variables of the environment and of the run's inventory copy
    (RUN/inventory, group_vars too), and `more`."""
    found = secret_values(environ) | set(more)
    for path in files(run_dir / "inventory"):
        if path.suffix in (".yml", ".yaml", ".json"):
            found |= set(secret_vars(_load(path)))
    return {value for value in found if len(value) >= MIN_KNOWN_LEN}


def scrub_text(text: str, secrets: Iterable[str]) -> str:
    # Also as JSON writes them: Ansible's artifacts are JSON, where a newline or quote is escaped.
    escaped = {json.dumps(s)[1:-1] for s in secrets}
    return redact_text(text, set(secrets) | escaped)


def redact_members(text: str) -> str:
    """JSON text with the string value of every secret-named member <redacted>, parsed or not."""

    def redact(match: re.Match[str]) -> str:
        name, colon, _, closing = match.groups()
        return f'"{name}"{colon}"{REDACTED}{closing}' if is_secret_var(name) else match.group(0)

    return _JSON_MEMBER.sub(redact, text)


def scrub_file(path: Path, secrets: Iterable[str], by_name: bool = False) -> bool:
    try:
        text = path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return False  # not text (an archive, a core file): nothing a secret is written into as text
    clean = scrub_text(text, secrets)
    if by_name:
        clean = redact_members(clean)
    if clean == text:
        return False
    tmp = path.with_name(f".{path.name}.scrub")
    tmp.write_text(clean)
    os.chmod(tmp, path.stat().st_mode & 0o7777)
    os.replace(tmp, path)
    return True


def secret_vars(data: Any, name: str = "") -> Iterator[str]:
    if isinstance(data, dict):
        for key, value in data.items():
            yield from secret_vars(value, str(key))
    elif isinstance(data, list):
        for item in data:
            yield from secret_vars(item, name)
    elif isinstance(data, str) and is_secret_var(name):
        yield data


def is_secret_var(name: str) -> bool:
    return is_secret_name(name) and not name.upper().endswith(_LOCATION_SUFFIXES)


def files(root: Path) -> Iterator[Path]:
    if root.is_dir():
        yield from (p for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink())


def _load(path: Path) -> Any:
    try:
        return yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError, UnicodeDecodeError):
        return None
