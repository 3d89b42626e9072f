"""Plan tests as Slurm jobs: the same tests as the direct launchers, each submitted with sbatch from a node.

- a host-scope test: one job per host, pinned to it (--nodelist), submitted from that host, its argv as
  the direct plan has it, run by srun; its reports land in the host's own run folder
- a cluster torchrun test: one job over every node, srun starts one torchrun per node; its reports go to
  the shared filesystem (pav_shared_dir) and are gathered on the submitting (first) host
- a Slurm check (catalog launcher "slurm"): a job whose every task runs pav_payload.slurm_check, or, for
  a check the catalog runs alone (slurm_check_alone: the cluster state), that check run on the first host
  before any job
- nccl-tests across nodes: one job over every node, a rank per GPU, started by `srun --mpi=PMI`
  (pav_slurm_mpi) instead of mpirun over SSH; its table goes to the job log
- mpi_allreduce keeps mpirun over SSH: under srun --mpi=pmix on the sim its ranks once died in Open MPI's
  shared-memory setup (docs/slurm.md), so that path is kept to the MPI program nccl-tests needs it for

Every job becomes a Launch whose argv, on the submitting host, is pav_payload.slurm_job (submit, wait,
record); run_tests runs it like any launch, with the launch's timeout.
"""

from __future__ import annotations

import secrets
import shlex
from pathlib import Path

from pav import suites
from pav.catalog import TestSpec
from pav.hostlist import compress
from pav.launch import Launch
from pav.launches import PYTHON, HostView, TimeoutFor, plan_launches
from pav.results import TestResult
from pav.settings import Settings
from pav.slurm.jobs import Job, minutes_for, write

SRUN_MPI_LAUNCHERS = ("nccl_tests",)  # cluster-scope MPI programs srun starts (see the docstring)


def plan_slurm(
    specs: list[TestSpec],
    hosts: list[HostView],
    settings: Settings,
    run_id: str,
    run_dir: Path,
    timeout_for: TimeoutFor,
) -> tuple[list[Launch], list[Launch], list[TestResult]]:
    """Each test's launch (what the report judges), the launches to run, and the tests that will not run.
    specs: the run's tests, the Slurm checks among them (catalog.with_slurm_checks; pav.run_inputs).

    With pav_fold_launches, a host's torch tests of one world shape run as suites in one job per host
    (pav.suites), as the direct launcher runs them: one sbatch, srun, torchrun and torch import for them all.
    """
    planner = _Planner(hosts, settings, run_id, run_dir, timeout_for)
    launches: list[Launch] = []
    skipped: list[TestResult] = []
    for spec in specs:
        if spec.launcher == "slurm":
            launch, skip = planner.check(spec)
            launches += [launch] if launch else []
            skipped += [skip] if skip else []
            continue
        direct, skips = plan_launches([spec], hosts, settings, run_id, timeout_for)
        skipped += skips
        for launch in direct:
            if launch.launcher == "mpirun" or launch.scope == "host":
                launches.append(launch)  # a host test's job is made below, once it is known what it shares
                continue
            make = planner.mpi_job if spec.launcher in SRUN_MPI_LAUNCHERS else planner.cluster_job
            launch_or_skip = make(spec, launch)
            if isinstance(launch_or_skip, Launch):
                launches.append(launch_or_skip)
            else:
                skipped.append(launch_or_skip)
    grouped = (
        suites.fold_with_members(launches) if settings.fold_launches else [(la, [la]) for la in launches]
    )
    gpu = {spec.name: spec.needs_gpu for spec in specs}
    runs = [planner.host_jobs(run, [m.test for m in members], any(gpu[m.test] for m in members))
            if run.scope == "host" else run for run, members in grouped]  # fmt: skip
    return launches, runs, skipped


class _Planner:
    def __init__(
        self, hosts: list[HostView], settings: Settings, run_id: str, run_dir: Path, timeout_for: TimeoutFor
    ) -> None:
        self.hosts = hosts
        self.settings = settings
        self.timeout_for = timeout_for
        self.run_dir = run_dir
        self.remote_run = f"{settings.remote_dir}/runs/{run_id}"
        # Unguessable, and made 0700 by the first job (slurm_job --private-dir): others who can write the
        # shared folder cannot plant the folder every node's tasks start Python in (issue 47).
        shared = f"{settings.shared_dir.rstrip('/')}/pav-{run_id}-{secrets.token_hex(8)}"
        self.shared_run = shared if settings.shared_dir else ""
        self.submit = hosts[0]

    def _submit(self, job: Job, test: str, *extra: str) -> list[str]:
        """Write the job's script; the argv that submits it from a node and records it in results/TEST."""
        write(job, self.run_dir)
        return [PYTHON, "-m", "pav_payload.slurm_job", "--script", f"slurm/{job.name}.sbatch",
                "--out", f"results/{test}", *extra]  # fmt: skip

    def _launch(self, spec: TestSpec, job: Job, ranks: int, host: HostView, gather: bool) -> Launch:
        gathering = ("--private-dir", job.workdir, "--mkdir", job.out, "--gather", job.out) if gather else ()
        argv = self._submit(job, spec.name, *gathering)
        # sbatch exports the submitting environment to every task, the test's own (NCCL_ALGO=Ring) with it.
        launch = Launch(
            spec.name, spec.launcher, spec.scope, self.timeout_for(spec.name), env=dict(spec.env),
            gates_of=spec.gates_of,
        )  # fmt: skip
        launch.argv_by_host[host.name] = argv
        launch.ranks_by_host[host.name] = ranks
        return launch

    def host_jobs(self, direct: Launch, tests: list[str], needs_gpu: bool) -> Launch:
        """One job per host of a host-scope launch (a test's, or a suite's), pinned to the host and submitted
        from it; a suite's job record goes to each of its tests' results too."""
        launch = Launch(
            direct.test, direct.launcher, "host", direct.timeout_s, members=list(direct.members),
            env=dict(direct.env), gates_of=direct.gates_of,
        )  # fmt: skip
        records = [arg for test in tests if test != direct.test for arg in ("--record-to", f"results/{test}")]
        for host in self.hosts:
            if host.name not in direct.argv_by_host:
                continue
            argv = [a.replace(PYTHON, "$PAV_PYTHON") for a in direct.argv_by_host[host.name]]
            job = Job(
                name=f"{direct.test}.{host.name}", test=direct.test, template="host", nodes=1,
                tasks_per_node=1, cpus_per_task=_cpus(host), gpus_per_node=host.gpus if needs_gpu else 0,
                minutes=minutes_for(direct.timeout_s), workdir=self.remote_run,
                log=f"{self.remote_run}/slurm/{direct.test}.{host.name}-%j.out", out=f"results/{direct.test}",
                nodelist=_node_name(host), argv=["bash", "-c", _expand_python(argv), "pav"],
            )  # fmt: skip
            launch.argv_by_host[host.name] = self._submit(job, direct.test, *records)
            if host.name in direct.ranks_by_host:  # a suite's are its tests' (each judged on its own)
                launch.ranks_by_host[host.name] = direct.ranks_by_host[host.name]
        return launch

    def cluster_job(self, spec: TestSpec, direct: Launch) -> Launch | TestResult:
        if not self.shared_run:
            return _no_shared(spec, direct.members)
        out = f"{self.shared_run}/{spec.name}"
        procs = next(iter(direct.ranks_by_host.values()))
        payload_args = [*spec.args, "--out", out, "--test-id", spec.name]
        job = Job(
            name=spec.name, test=spec.name, template="cluster_torchrun", nodes=len(self.hosts),
            tasks_per_node=1, cpus_per_task=min(_cpus(h) for h in self.hosts),
            gpus_per_node=procs if spec.needs_gpu else 0, minutes=minutes_for(direct.timeout_s),
            workdir=self.shared_run, log=f"{out}/job-%j.out", out=out, argv=payload_args,
            extra={"procs": procs, "rdzv_port": self.settings.rdzv_port},
        )  # fmt: skip
        launch = self._launch(spec, job, procs * len(self.hosts), self.submit, gather=True)
        launch.members = list(direct.members)
        return launch

    def mpi_job(self, spec: TestSpec, direct: Launch) -> Launch | TestResult:
        """The direct plan's mpirun command without mpirun: srun starts its ranks on every node."""
        if not self.shared_run:
            return _no_shared(spec, direct.members)
        argv = next(iter(direct.argv_by_host.values()))
        program = argv[argv.index("-np") + 2 :]  # after pav-mpirun -np N
        out = f"{self.shared_run}/{spec.name}"
        tasks = min(h.gpus for h in self.hosts) if spec.needs_gpu else self.settings.cpu_procs_per_host
        job = Job(
            name=spec.name, test=spec.name, template="cluster_mpi", nodes=len(self.hosts),
            tasks_per_node=tasks, cpus_per_task=max(1, min(_cpus(h) for h in self.hosts) // tasks),
            gpus_per_node=tasks if spec.needs_gpu else 0, minutes=minutes_for(direct.timeout_s),
            workdir=self.shared_run, log=f"{out}/job-%j.out", out=out,
            extra={"mpi": self.settings.slurm_mpi, "command": " ".join(map(shlex.quote, program))},
        )  # fmt: skip
        launch = self._launch(spec, job, 1, self.submit, gather=True)
        launch.members = list(direct.members)
        return launch

    def check(self, spec: TestSpec) -> tuple[Launch | None, TestResult | None]:
        names = [h.name for h in self.hosts]
        if spec.needs_gpu and any(h.gpus == 0 for h in self.hosts):
            no_gpu = compress(h.name for h in self.hosts if not h.gpus)
            return None, TestResult(spec.name, names, "skipped", f"no GPU on {no_gpu}")
        if spec.slurm_check_alone:
            launch = Launch(spec.name, "slurm", "cluster", self.timeout_for(spec.name), members=names)
            launch.argv_by_host[self.submit.name] = [
                PYTHON, "-m", "pav_payload.slurm_check", spec.slurm_check, "--expect-nodes", str(len(names)),
                "--out", f"results/{spec.name}", "--test-id", spec.name,
            ]  # fmt: skip
            launch.ranks_by_host[self.submit.name] = 1
            return launch, None
        if not self.shared_run:
            return None, _no_shared(spec, names)
        gpus = min(h.gpus for h in self.hosts) if spec.needs_gpu else 0
        tasks = gpus or self.settings.cpu_procs_per_host
        cpus = max(1, min(_cpus(h) for h in self.hosts) // tasks)
        if spec.slurm_check_per_node:
            tasks = 1
        out = f"{self.shared_run}/{spec.name}"
        job = Job(
            name=spec.name, test=spec.name, template="check", nodes=len(self.hosts), tasks_per_node=tasks,
            cpus_per_task=cpus, gpus_per_node=gpus, minutes=minutes_for(self.timeout_for(spec.name)),
            workdir=self.shared_run, log=f"{out}/job-%j.out", out=out,
            extra={"check": spec.slurm_check},
        )  # fmt: skip
        launch = self._launch(spec, job, tasks * len(self.hosts), self.submit, gather=True)
        launch.members = names
        return launch, None


def _cpus(host: HostView) -> int:
    return max(1, int(host.facts.get("cpu", {}).get("vcpus", 1) or 1))


def _node_name(host: HostView) -> str:
    """slurmd's NodeName is the short hostname (what `slurmd -C` prints and preflight records)."""
    return str(host.facts.get("hostname") or host.name)


def _expand_python(argv: list[str]) -> str:
    return " ".join('"$PAV_PYTHON"' if a == "$PAV_PYTHON" else shlex.quote(a) for a in argv)


def _no_shared(spec: TestSpec, names: list[str]) -> TestResult:
    return TestResult(
        spec.name, names, "error",
        "pav_shared_dir is not set: name a folder every node mounts (e.g. an NFS export) in group_vars",
    )  # fmt: skip
