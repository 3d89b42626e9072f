"""Names and paths are data, never shell (issue 47): every value templated into a shell command of a task or
into a shell template goes through `quote` (or is a number), so an inventory, a host or a setting cannot
plant shell text that runs as root."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
TEMPLATED = re.compile(r"{{(.*?)}}", re.S)
SHELL_MODULES = (
    "ansible.builtin.shell",
    "ansible.builtin.command",
    "ansible.builtin.script",
    "ansible.builtin.raw",
)
# Values already quoted where they are built: a comment in their task says so.
PRE_QUOTED = {"run_tests_launch_env"}  # roles/run_tests/tasks/launch.yml: each NAME=VALUE through quote
# Shell code, not a value: the roles' own folder check (roles/torch_payload/files/pav-safe-dir.sh), pasted in.
SHELL_CODE = re.compile(
    r"^lookup\('ansible\.builtin\.file', (role_path ~ '/\.\./torch_payload/files/)?'?pav-safe-dir\.sh'\)$"
)
SAFE = re.compile(r"\|\s*(quote|int)\s*$|map\('quote'\)|^ansible_managed$|regex_replace\('\[\^A-Za-z0-9_\]'")


def tasks(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, list):
        for item in node:
            yield from tasks(item)
    elif isinstance(node, dict):
        yield node
        for key in ("block", "rescue", "always", "tasks", "pre_tasks", "post_tasks", "handlers"):
            yield from tasks(node.get(key))


def unquoted(text: str) -> list[str]:
    found = [m.group(1).strip() for m in TEMPLATED.finditer(text)]
    return [e for e in found if not SAFE.search(e) and e not in PRE_QUOTED and not SHELL_CODE.match(e)]


def test_every_value_in_a_shell_task_is_quoted() -> None:
    files = [
        *ROOT.glob("roles/*/tasks/*.yml"),
        *ROOT.glob("roles/*/handlers/*.yml"),
        *ROOT.glob("playbooks/*.yml"),
    ]
    bad = []
    for path in sorted(files):
        for task in tasks(yaml.safe_load(path.read_text())):
            for module in SHELL_MODULES:
                body = task.get(module)
                command = body.get("cmd") if isinstance(body, dict) else body
                if isinstance(command, str):
                    bad += [f"{path.relative_to(ROOT)}: {task.get('name')}: {e}" for e in unquoted(command)]
    assert bad == []


def test_every_value_in_a_shell_template_is_quoted() -> None:
    """Shell scripts the roles write (profile.d files, launchers): their values outside Jinja statements."""
    bad = []
    for path in sorted(ROOT.glob("roles/*/templates/*.j2")):
        text = path.read_text()
        if not (text.startswith("#!") or path.name.endswith((".sh.j2", ".env.j2"))):
            continue
        bad += [f"{path.relative_to(ROOT)}: {e}" for e in unquoted(text)]
    assert bad == []
