"""Names and paths are data, never shell (issue 47): every value templated into a shell command of a task or
into a shell template goes through `quote` (or is a number), so an inventory, a host or a setting cannot
plant shell text that runs as root."""

from __future__ import annotations

import re
import shlex
import subprocess
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
PRE_QUOTED = {
    "run_tests_launch_env",  # roles/run_tests/tasks/launch.yml: each NAME=VALUE through quote
    "torch_payload_read_job",  # roles/torch_payload/vars/main.yml: each argument through quote
}
# Shell code, not a value: the roles' own folder check and job start (roles/torch_payload/files/
# pav-safe-dir.sh, pav-start-job.sh), and a role's shell template (NAME.sh.j2, whose own values the template
# test below checks), pasted in.
SHELL_CODE = re.compile(
    r"^lookup\('ansible\.builtin\.file', (role_path ~ '/\.\./torch_payload/files/)?'?"
    r"pav-(safe-dir|start-job)\.sh'\)$"
    r"|^lookup\('ansible\.builtin\.template', '[a-z_-]+\.sh\.j2'\)$"
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
    """Shell scripts the roles write (profile.d files, launchers): their values outside Jinja statements;
    in a comment, quote is no help (a newline in the value ends the comment and the rest runs: issue 62),
    so a value there is one word or none."""
    bad = []
    for path in sorted(ROOT.glob("roles/*/templates/*.j2")):
        text = path.read_text()
        if not (text.startswith("#!") or path.name.endswith((".sh.j2", ".env.j2"))):
            continue
        bad += [f"{path.relative_to(ROOT)}: {e}" for e in unquoted(text)]
        bad += [f"{path.relative_to(ROOT)}: in a comment: {e}" for e in in_comments(text)]
    assert bad == []


ONE_WORD = re.compile(r"\|\s*regex_replace\('\[\^A-Za-z0-9_\]', '_'\)\s*$|\|\s*int\s*$|^ansible_managed$")


def in_comments(text: str) -> list[str]:
    """Values templated into a shell comment line that could hold a newline."""
    found = []
    for line in text.splitlines():
        stripped = line.lstrip()
        if stripped.startswith("#") and not stripped.startswith("#!"):
            found += [m.group(1).strip() for m in TEMPLATED.finditer(line)]
    return [e for e in found if not ONE_WORD.search(e)]


def test_a_newline_in_a_value_never_ends_a_comment_of_the_roles_scripts(tmp_path: Path) -> None:
    """What the guard above holds, rendered: pav-mpirun and nccl.env with a newline in every value a
    comment could show, run by bash: nothing after the newline runs."""
    from jinja2 import Environment, StrictUndefined

    marker = tmp_path / "PWNED"
    evil = f"x\ntouch {marker}\n"
    env = Environment(undefined=StrictUndefined, keep_trailing_newline=True)
    env.filters["quote"] = shlex.quote
    env.filters["regex_replace"] = lambda value, pattern, to: re.sub(pattern, to, str(value))
    nccl = env.from_string((ROOT / "roles/nccl_env/templates/nccl.env.j2").read_text()).render(
        ansible_managed="Ansible managed", nccl_env_fabric=evil, nccl_env_vars={"NCCL_DEBUG": "WARN"}
    )
    script = tmp_path / "nccl.env"
    script.write_text(nccl)
    subprocess.run(["bash", "-c", f"set -a; . {shlex.quote(str(script))}"], check=True)
    assert not marker.exists(), nccl
    head = (ROOT / "roles/mpi/templates/pav-mpirun.j2").read_text().split("set -euo pipefail")[0]
    assert "{{" not in head.replace("{{ ansible_managed }}", ""), head
