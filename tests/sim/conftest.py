"""Fixtures for the simulated-host tests (scripts/sim-hosts)."""

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pav.provisioning import keeper
from tests.conftest import CliRun, run_cli


@dataclass
class SlurmCluster:
    """2 sim hosts provisioned and configured with --launcher slurm (slurmctld, slurmd, munged up), then
    configured once more: test_roles_on_sim reads both configure runs, test_slurm validates on the hosts
    and tears them down (it runs after test_roles_on_sim: file order)."""

    base: Path
    env: dict[str, str]
    first: CliRun
    second: CliRun
    down: CliRun | None = None  # set by the test that tears the cluster down

    @property
    def state(self) -> Path:
        return self.base / "state"

    def reuse(self) -> tuple[str, ...]:
        return reuse(self.state)

    def configured(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """results.json of the two configures, each asserted to have exited 0."""
        for run in (self.first, self.second):
            assert run.rc == 0, run.stdout + run.stderr
        one, two = (json.loads((self.base / r / "results.json").read_text()) for r in ("r1", "r2"))
        return one, two

    def ssh(self, address: str, command: str, timeout: int = 60) -> subprocess.CompletedProcess[str]:
        """`command` on a host as root, over SSH with the env's key and the host keys it pinned."""
        argv = [
            "ssh", "-F", "/dev/null", "-i", str(self.state / "ssh" / "id_ed25519"),
            "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10",
            "-o", "StrictHostKeyChecking=yes", "-o", f"UserKnownHostsFile={self.state / 'known_hosts'}",
            "-o", "GlobalKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
            f"root@{address}", command,
        ]  # fmt: skip
        return subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, check=False
        )


def reuse(state: Path) -> tuple[str, ...]:
    """--reuse of the run that kept the env's hosts (--keep), if one did: any other run refuses them."""
    kept = keeper.read(state).kept
    return ("--reuse", kept.run_id) if kept else ()


@pytest.fixture(scope="session")
def slurm_cluster(sim_deps: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    base = tmp_path_factory.mktemp("simslurm")
    env = {"PAV_STATE_DIR": str(base / "state"), "PAV_FAULT_TESTS": "1"}
    cluster = None
    try:
        # --launcher slurm: the slurm role is one of the configure roles too (docs/slurm.md).
        first = run_cli("--env", "sim", "--hosts", "2", "--stages", "provision,configure", "--keep",
                        "--launcher", "slurm", "--run-dir", str(base / "r1"), env=env)  # fmt: skip
        second = run_cli("--env", "sim", "--stages", "configure", "--keep", "--launcher", "slurm",
                         *reuse(base / "state"), "--run-dir", str(base / "r2"), env=env)  # fmt: skip
        cluster = SlurmCluster(base, env, first, second)
        yield cluster
    finally:
        # Only when test_slurm's teardown did not run (a selection, a failure): nothing may outlive us.
        if cluster is None or cluster.down is None:
            late = reuse(base / "state")
            # --results-root, not --run-dir: with no keep (no --reuse) it is a teardown of no kept run.
            run_cli("--env", "sim", "--stages", "teardown", *late, "--results-root", str(base / "down-late"),
                    env=env)  # fmt: skip
