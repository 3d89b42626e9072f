"""The wheel carries what a run reads besides the code: the checkout's roles, playbooks, inventories, ...

They stay where they are in the checkout (the docs, the tests and Ansible's own tools expect them at the
top), and build_py copies them into the wheel as pav/_project/, which pav.paths finds when no checkout is
around the code. A copy at build time rather than symlinks under src/pav or package-data globs: no
duplicate tree in git for ruff, ansible-lint and pytest to walk, nothing to keep in sync, and every file of
these folders goes (package-data globs would need each suffix, and would drop a new one silently). An
editable install builds nothing: it runs from the checkout itself. Everything else is in pyproject.toml.
"""

from __future__ import annotations

import fnmatch
import shutil
import subprocess
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
# The folders a run reads (pav.paths); MANIFEST.in lists the same ones for an sdist.
RUNTIME_DIRS = (
    "ansible", "inventories", "payload", "playbooks", "plugins", "roles", "templates", "terraform",
    "thresholds",
)  # fmt: skip
# Single files a run reads: the sim env's Terraform root runs scripts/sim-hosts.
RUNTIME_FILES = ("scripts/sim-hosts",)
# Never shipped: caches, and each user's own cloud values (inventories/ENV/terraform.yml) and Terraform state.
EXCLUDED = ("__pycache__", "*.pyc", ".*", "terraform.yml", "*.tfstate", "*.tfstate.*")


def _ignored(_folder: str, names: list[str]) -> set[str]:
    return {name for name in names if any(fnmatch.fnmatch(name, pattern) for pattern in EXCLUDED)}


def _tracked() -> set[str] | None:
    """The files git tracks in the runtime folders, when HERE is a git checkout; None otherwise (an sdist's
    tree holds only what its MANIFEST.in took). A file git does not track (a local note, a planted
    playbook, a build's leftovers) never ships in the wheel: every installed run would read it (issue 62)."""
    if not (HERE / ".git").exists() or shutil.which("git") is None:
        return None
    listed = subprocess.run(
        ["git", "-C", str(HERE), "ls-files", "-z", "--", *RUNTIME_DIRS],
        capture_output=True, check=True, text=True,
    ).stdout  # fmt: skip
    return {name for name in listed.split("\0") if name}


class BuildPyWithProject(build_py):
    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return
        target = Path(self.build_lib) / "pav" / "_project"
        # A build folder kept from an earlier build may hold files since removed from the checkout.
        shutil.rmtree(target, ignore_errors=True)
        tracked = _tracked()
        for name in RUNTIME_DIRS:
            # symlinks=False: a role's library/ link to plugins/modules/ ships as the file it points at.
            shutil.copytree(HERE / name, target / name, symlinks=False, ignore=_ignored)
        if tracked is not None:
            for path in sorted(target.rglob("*"), reverse=True):
                name = path.relative_to(target).as_posix()
                if path.is_file() and name not in tracked and not _inside_tracked_link(name, tracked):
                    path.unlink()
        for name in RUNTIME_FILES:
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(HERE / name, target / name)  # copy2: sim-hosts stays executable


def _inside_tracked_link(name: str, tracked: set[str]) -> bool:
    """Whether name lies under a folder git tracks as a link (roles/preflight/library -> plugins/modules)."""
    parts = name.split("/")
    return any("/".join(parts[:i]) in tracked for i in range(1, len(parts)))


setup(cmdclass={"build_py": BuildPyWithProject})
