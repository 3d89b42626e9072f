"""Every command README.md and docs/ give names a command a new user has after setup: README's first lines
say how `provision-and-validate` gets on PATH (it lives in .venv/bin), each `.venv/bin/NAME` is a program
setup installs there, each `scripts/NAME` a script of the checkout."""

from __future__ import annotations

import os
import re
import sys
import tomllib
from pathlib import Path

from tests.conftest import ROOT

COMMAND = "provision-and-validate"
# The venv setup makes (scripts/setup: the project installed into it); the tests run in one made so.
VENV_BIN = Path(sys.executable).parent


def shell_lines(doc: Path) -> list[str]:
    """The commands of the doc's bash blocks, comments and continuation lines left out."""
    blocks = re.findall(r"```(?:bash|sh|shell)\n(.*?)```", doc.read_text(), re.S)
    lines = [ln.strip() for block in blocks for ln in block.splitlines()]
    return [ln for ln in lines if ln and not ln.startswith(("#", "|"))]


DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_readme_opens_with_how_the_command_gets_on_path() -> None:
    readme = (ROOT / "README.md").read_text()
    opening = readme[: readme.index("\n## ")]
    first = shell_lines(ROOT / "README.md")[:3]
    assert first[0].startswith("scripts/quickstart") and first[1].startswith(". .venv/bin/activate"), first
    assert f".venv/bin/{COMMAND}" in opening
    assert "scripts/setup" in (ROOT / "scripts" / "quickstart").read_text()  # quickstart makes the venv
    assert (VENV_BIN / "activate").is_file()


def test_every_documented_command_exists_after_setup() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert COMMAND in declared
    for doc in DOCS:
        for line in shell_lines(doc):
            word = line.split()[0]
            where = f"{doc.relative_to(ROOT)}: {line}"
            if word == COMMAND or word.startswith(".venv/bin/"):
                assert (VENV_BIN / Path(word).name).is_file(), where
            elif word.startswith("scripts/"):
                assert os.access(ROOT / word, os.X_OK), where
