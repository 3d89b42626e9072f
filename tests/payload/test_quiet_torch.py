"""A torch without numpy says "UserWarning: Failed to initialize NumPy: No module named 'numpy'" at its
import (issue 48): the payload never needs numpy, so that one message is filtered before any torch import,
in the ranks (`-m pav_payload`) and in the launcher (`-m pav_payload.torchrun`); any other message, a numpy
that is there and broken among them, still shows.

Each case runs a fresh Python with a sitecustomize that makes numpy's import fail as it is asked for, so the
case holds whether or not this venv has numpy (it has none: that is where the line came from)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import PAYLOAD

pytestmark = pytest.mark.slow  # each case imports torch in a process of its own (seconds)

WARNED = "Failed to initialize NumPy"
# Imported at the interpreter's start (site), before the payload or torch: numpy's import fails with `why`.
SITE = """import sys
class _NoNumpy:
    def find_spec(self, name, path=None, target=None):
        if name == "numpy" or name.startswith("numpy."):
            raise {error}
sys.meta_path.insert(0, _NoNumpy())
"""


def python(tmp_path: Path, error: str, *argv: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "sitecustomize.py").write_text(SITE.format(error=error))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(PAYLOAD)])}
    env.pop("PYTHONWARNINGS", None)
    run = subprocess.run([sys.executable, *argv], capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    return run


MISSING = "ModuleNotFoundError(\"No module named 'numpy'\", name='numpy')"


def test_torch_without_numpy_is_quiet_under_the_payload(tmp_path: Path) -> None:
    bare = python(tmp_path, MISSING, "-c", "import torch")
    assert f"{WARNED}: No module named 'numpy'" in bare.stderr  # torch alone says it, as in the logs
    payload = python(
        tmp_path, MISSING, "-c", "import pav_payload, torch; print(torch.tensor([1]).sum().item())"
    )
    assert payload.stdout.strip() == "1" and WARNED not in payload.stderr, payload.stderr


def test_the_launcher_is_torchrun_and_as_quiet(tmp_path: Path) -> None:
    run = python(tmp_path, MISSING, "-m", "pav_payload.torchrun", "--help")
    assert "--nproc-per-node" in run.stdout and "training_script" in run.stdout  # torchrun's own usage
    assert WARNED not in run.stderr, run.stderr


def test_a_numpy_that_is_there_and_broken_still_warns(tmp_path: Path) -> None:
    """numpy installed without its compiled core: the message names another module, and is shown."""
    broken = "ModuleNotFoundError(\"No module named 'numpy._core._multiarray_umath'\", name='numpy._core')"
    run = python(tmp_path, broken, "-c", "import pav_payload, torch")
    assert f"{WARNED}: No module named 'numpy._core._multiarray_umath'" in run.stderr, run.stderr
