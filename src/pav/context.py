"""What the stages share: the options, the env, the run dir, the hosts and the results being built."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pav import paths
from pav.envs import EnvSpec
from pav.inventory import Host, ReadInventory
from pav.launch import Launch
from pav.locks import Holder
from pav.options import STAGES, Options
from pav.results import RunResults
from pav.run_inputs import RunInputs
from pav.settings import Settings
from pav.thresholds.gate import Gate

if TYPE_CHECKING:  # judging pulls in evaluate and the gates: a run loads it at its first judging
    from pav.judging import Judge

__all__ = ["STAGES", "Options", "RunContext"]  # Options and STAGES are read from here too


@dataclass
class RunContext:
    env: EnvSpec
    options: Options
    settings: Settings  # what the env's files and -e say; ctx.inputs holds what the run does with them
    run_dir: Path
    results: RunResults
    inputs: RunInputs  # resolved once before any stage (pav.run_inputs): flags over settings, tests selected
    inventory_file: Path | None = None
    # A static inventory's hosts, read before the run dir exists (pav.platform.read_inventory); None: not read
    inventory_read: ReadInventory | None = None
    hosts: list[Host] = field(default_factory=list)
    launches: list[Launch] = field(default_factory=list)  # one per test: what the report judges
    # What validate's playbook runs: ctx.launches with a host's torch tests of one world shape folded into one
    # suite (pav.suites); one launch each where nothing folds
    playbook_launches: list[Launch] = field(default_factory=list)
    provisioned: dict[str, Any] = field(default_factory=dict)  # what teardown must destroy
    missing: dict[str, str] = field(default_factory=dict)  # host -> why it left the run (unreachable)
    judge: Judge | None = None  # the run's one judge (stages/report.py run_judge): profile resolved once
    derived_gates: dict[str, list[Gate]] = field(default_factory=dict)  # test -> gates judged across tests
    playbook_time: dict[str, dict[str, Any]] = field(default_factory=dict)  # stage -> every task's durations
    # What validate's playbook did for the stages after it (pav.stages.validate.folded): hosts whose results
    # archive it fetched, and hosts whose run folder it removed (True) or found gone (False).
    collected: set[str] = field(default_factory=set)
    torn_down: dict[str, bool] = field(default_factory=dict)
    # Set before any stage (pav.ownership): what a gone run left in the env's state, destroyed before this
    # run provisions ("": nothing), and gone runs whose work on the hosts this run kills at first contact.
    leftover: str = ""
    dead_runs: list[Holder] = field(default_factory=list)
    # The run dir of the run that kept the hosts this run works under (--reuse, or a teardown given a kept
    # run's dir), from the env's record ("": none): a teardown that destroys them says so there too.
    kept_dir: str = ""

    @property
    def host_names(self) -> list[str]:
        return [h.name for h in self.hosts]

    @property
    def work_id(self) -> str:
        """The id of the run whose work on the hosts this one acts on: its own, or the kept run's whose
        --run-dir a run of stages that launch nothing was given."""
        return self.results.kept_run.get("run_id") or self.results.run_id

    @property
    def remote_run_dir(self) -> str:
        """The run's own folder on each host (roles: run_tests_run_dir; teardown removes it)."""
        return f"{self.settings.remote_dir}/runs/{self.work_id}"

    @property
    def install_dir(self) -> str:
        """Where the tools a run installs (payload, MPI program, nccl-tests) go on each host: beside the runs,
        kept for the next run; or, when tuning runs in check mode, in the run's own folder, so that the run
        leaves the host as it found it (teardown removes that folder)."""
        return self.settings.remote_dir if self.inputs.apply_tuning else self.remote_run_dir

    def extravars(self) -> dict[str, Any]:
        """Variables every playbook gets: the user's -e, then the driver's own (settings among them already
        hold -e's typed pav_* values). Never secrets: runner and Ansible may log them."""
        return self.options.extra_vars | {
            "pav_run_id": self.work_id,
            "pav_run_dir": str(self.run_dir.resolve()),
            "pav_remote_dir": self.settings.remote_dir,
            "pav_install_dir": self.install_dir,
            "pav_payload_src": str(paths.PAYLOAD),
            "pav_apply_tuning": self.inputs.apply_tuning,
            "pav_launcher": self.inputs.launcher,
            "pav_allow_missing": self.options.allow_missing,
            # Outlives the run: keys the hosts keep (mpirun's cluster key) must be the same next run.
            "pav_state_dir": str(self.env.state_dir),
            # Hosts that share this machine's filesystem (local, sim) run the payload with this Python.
            "pav_controller_python": sys.executable,
        }

    @property
    def limit(self) -> str | None:
        """Ansible's --limit once hosts were dropped: playbooks then skip them instead of retrying them."""
        return ",".join(self.host_names) if self.missing or self.options.recheck else None

    def wants(self, stage: str) -> bool:
        return stage in self.options.stages
