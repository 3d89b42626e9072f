"""ansible-lint, production profile (.ansible-lint), over the roles, playbooks and galaxy.yml: a test of the
suite rather than a step before it, so that its ~30 CPU-s run beside the other tests instead of ahead of them
(docs/benchmarks.md)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_ansible_lint_production_profile_is_clean() -> None:
    lint = Path(sys.executable).parent / "ansible-lint"
    proc = subprocess.run(
        [str(lint), "--nocolor"], cwd=REPO, capture_output=True, text=True, timeout=600, check=False
    )
    assert proc.returncode == 0, proc.stdout[-8000:] + proc.stderr[-4000:]
