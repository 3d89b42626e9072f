"""One real local run, shared by the report tests: its results.json is what they render and compare.

Its results root is seeded with an earlier run of the same env whose numbers the real run cannot reach,
so the run's own report stage must find it and flag the drop.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli

EARLIER_ID = "20000101T000000Z-local"
# Far above what gloo on a CPU reaches: the real run's busbw is a drop against it.
EARLIER_BUSBW = 1.0e6


@dataclass
class LocalRun:
    rc: int
    output: str
    root: Path
    run_dir: Path

    @property
    def results(self) -> dict[str, Any]:
        return json.loads((self.run_dir / "results.json").read_text())


def earlier_run(root: Path) -> None:
    """A results.json this test writes: the env's previous run, with one metric of the real run's tests."""
    run_dir = root / EARLIER_ID
    run_dir.mkdir(parents=True)
    test = {
        "name": "torch_gloo_allreduce",
        "hosts": ["localhost"],
        "status": "pass",
        "metrics": {"busbw_gbps": {"all_reduce": {"1048576": EARLIER_BUSBW}}},
    }
    results = {"run_id": EARLIER_ID, "env": "local", "started": "2000-01-01T00:00:00Z", "tests": [test]}
    (run_dir / "results.json").write_text(json.dumps(results))


@pytest.fixture(scope="session")
def local_run(tmp_path_factory: pytest.TempPathFactory) -> LocalRun:
    root = tmp_path_factory.mktemp("results-root")
    earlier_run(root)
    run = run_cli("--env", "local", "--tests", "torch_gloo_allreduce,ddp_cpu_train,nccl_tests_all_reduce",
                  env={"PAV_RESULTS_ROOT": str(root)})  # fmt: skip
    run_dirs = [p for p in root.iterdir() if p.name != EARLIER_ID]
    assert len(run_dirs) == 1, (run_dirs, run.stdout, run.stderr)
    return LocalRun(run.rc, run.stdout + run.stderr, root, run_dirs[0])
