"""Turn planned tests and host facts into launches: the argv each host runs, or a skip with its reason."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pav.catalog import TestSpec
from pav.hostlist import compress
from pav.launch import Launch
from pav.results import TestResult
from pav.settings import Settings

# Placeholders the run_tests role fills in per host (where the host keeps its Python and binaries).
PYTHON, NCCL_TESTS_DIR, MPI_BIN_DIR = "{python}", "{nccl_tests_dir}", "{mpi_bin_dir}"
# torchrun, through the payload (`python -m pav_payload.torchrun` runs torch.distributed.run's main): its
# torch import then comes after the payload's warning filter (payload/pav_payload/__init__.py).
TORCHRUN = "pav_payload.torchrun"
# FOR TESTING ONLY: the launcher of the catalog's "plain" tests, ranks of plain Python (no torch).
PLAIN = "pav_payload.plain"
# A test's seconds before it is killed on every host (pav.run_inputs: --test-timeout, else the settings').
TimeoutFor = Callable[[str], int]


@dataclass(frozen=True)
class HostView:
    """What planning needs of a host: its facts and the address its peers reach it on."""

    name: str
    address: str
    facts: dict[str, Any]

    @property
    def gpus(self) -> int:
        return int(self.facts.get("gpu", {}).get("count", 0) or 0)


def only_where(wanted: Mapping[str, tuple[str, ...]]) -> Callable[..., tuple[list[Launch], list[TestResult]]]:
    """plan_launches, each test launched on the hosts `wanted` names for it and on no other (a recheck: a
    test across hosts spans only those)."""

    def plan(
        specs: list[TestSpec], views: list[HostView], *args: Any
    ) -> tuple[list[Launch], list[TestResult]]:
        launches: list[Launch] = []
        skipped: list[TestResult] = []
        for spec in specs:
            mine = [v for v in views if spec.name in wanted.get(v.name, ())]
            got, skip = plan_launches([spec], mine, *args)
            launches, skipped = launches + got, skipped + skip
        return launches, skipped

    return plan


def plan_launches(
    specs: list[TestSpec], hosts: list[HostView], settings: Settings, run_id: str, timeout_for: TimeoutFor
) -> tuple[list[Launch], list[TestResult]]:
    """The launches to run, and the results of tests that will not run (skipped, or error: unavailable)."""
    launches: list[Launch] = []
    not_launched: list[TestResult] = []
    for spec in specs:
        if spec.launcher == "slurm":
            names = [h.name for h in hosts]
            not_launched.append(TestResult(spec.name, names, "skipped", "needs --launcher slurm"))
            continue
        if spec.scope == "cluster":
            launch, skip = cluster_launch(spec, hosts, settings, run_id, timeout_for(spec.name))
            launches += [launch] if launch else []
            not_launched += [skip] if skip else []
            continue
        launch = Launch(
            spec.name,
            spec.launcher,
            spec.scope,
            timeout_for(spec.name),
            env=dict(spec.env),
            gates_of=spec.gates_of,
            payload_args=_payload_args(spec) if spec.launcher == "torchrun" else [],
            cpu_only=not spec.needs_gpu,
        )
        for host in hosts:
            argv = _host_plan(spec, host, settings)
            if isinstance(argv, TestResult):
                not_launched.append(argv)
                continue
            launch.argv_by_host[host.name] = argv
            procs = _procs(spec, host, settings)
            launch.ranks_by_host[host.name] = procs
            launch.members.append(host.name)
        if launch.argv_by_host:
            launches.append(launch)
    return launches, not_launched


def _procs(spec: TestSpec, host: HostView, settings: Settings) -> int:
    if spec.procs is not None:
        return spec.procs
    return host.gpus if spec.needs_gpu else settings.cpu_procs_per_host


def _host_plan(spec: TestSpec, host: HostView, settings: Settings) -> list[str] | TestResult:
    """The argv this host runs for a host-scope test, or the result that stands in for running it."""
    if spec.needs_gpu and host.gpus == 0:
        return TestResult(spec.name, [host.name], "skipped", "no GPU")
    if spec.needs_gpu and host.gpus < spec.min_gpus:
        # One rank has no peer: its bus bandwidth or scaling is not applicable, never a number.
        why = f"needs {spec.min_gpus} GPUs, the host has {host.gpus}: one rank has no peer to measure against"
        return TestResult(spec.name, [host.name], "skipped", why)
    argv = _host_argv(spec, _procs(spec, host, settings))
    if spec.launcher == "nccl_tests":
        found = host.facts.get("nccl_tests", {})
        if not found.get("available"):
            reason = found.get("reason") or "the configure stage did not install it"
            return TestResult(spec.name, [host.name], "error", f"nccl-tests unavailable: {reason}")
        argv = [a.replace(NCCL_TESTS_DIR, found["bin_dir"]) for a in argv]
    return argv


def cluster_launch(
    spec: TestSpec, hosts: list[HostView], settings: Settings, run_id: str, timeout_s: int
) -> tuple[Launch | None, TestResult | None]:
    names = [h.name for h in hosts]
    if len(hosts) < 2:
        return None, TestResult(spec.name, names, "skipped", "needs 2 or more hosts")
    if spec.needs_gpu and any(h.gpus == 0 for h in hosts):
        return None, TestResult(
            spec.name, names, "skipped", "no GPU on " + compress(h.name for h in hosts if not h.gpus)
        )
    procs = min(h.gpus for h in hosts) if spec.needs_gpu else settings.cpu_procs_per_host
    launch = Launch(
        spec.name, spec.launcher, spec.scope, timeout_s, members=names,
        env=dict(spec.env), gates_of=spec.gates_of,
    )  # fmt: skip
    if spec.launcher == "nccl_tests":
        return _nccl_tests_cluster(spec, hosts, launch, procs)
    if spec.launcher == "mpirun":
        # mpirun starts every rank over SSH from the first host; rank 0 writes the one result.
        first = hosts[0].name
        launch.argv_by_host[first] = [
            f"{MPI_BIN_DIR}/pav-mpirun", "-np", str(procs * len(hosts)),
            f"{MPI_BIN_DIR}/{spec.args[0]}", *spec.args[1:], *_out_args(spec),
        ]  # fmt: skip
        launch.ranks_by_host[first] = 1
        return launch, None
    endpoint = f"{hosts[0].address}:{settings.rdzv_port}"
    if spec.launcher == "plain":
        for index, host in enumerate(hosts):
            world = ("--nnodes", str(len(hosts)), "--node-rank", str(index), "--master", endpoint)
            launch.argv_by_host[host.name] = _plain_argv(spec, procs, *world)
            launch.ranks_by_host[host.name] = procs
        return launch, None
    for host in hosts:
        launch.argv_by_host[host.name] = [
            PYTHON, "-m", TORCHRUN,
            "--nnodes", str(len(hosts)), "--nproc_per_node", str(procs),
            "--rdzv_backend", "c10d", "--rdzv_endpoint", endpoint, "--rdzv_id", f"{run_id}-{spec.name}",
            # Advertise the address, not the hostname: cluster hosts often cannot resolve each other's names.
            "--local-addr", host.address,
            "-m", "pav_payload", *_payload_args(spec),
        ]  # fmt: skip
        launch.ranks_by_host[host.name] = procs
    return launch, None


def _nccl_tests_cluster(
    spec: TestSpec, hosts: list[HostView], launch: Launch, procs: int
) -> tuple[Launch | None, TestResult | None]:
    """nccl-tests across hosts: mpirun from the first host, one rank per GPU (-g 1), an MPI=1 build."""
    names = [h.name for h in hosts]
    for host in hosts:
        found = host.facts.get("nccl_tests", {})
        if not found.get("available"):
            reason = found.get("reason") or "the configure stage did not install it"
            return None, TestResult(
                spec.name, names, "error", f"nccl-tests unavailable on {host.name}: {reason}"
            )
        if not found.get("mpi"):
            return None, TestResult(
                spec.name, names, "error",
                f"nccl-tests on {host.name} is built without MPI, so its ranks cannot span hosts; "
                "set nccl_tests_mpi: true (and pav_install_mpi: true)",
            )  # fmt: skip
    first = hosts[0]
    bin_dir = first.facts["nccl_tests"]["bin_dir"]
    launch.argv_by_host[first.name] = [
        f"{MPI_BIN_DIR}/pav-mpirun", "-np", str(procs * len(hosts)),
        f"{bin_dir}/{spec.args[0]}", *spec.args[1:], "-g", "1",
    ]  # fmt: skip
    launch.ranks_by_host[first.name] = 1
    return launch, None


def _host_argv(spec: TestSpec, procs: int) -> list[str]:
    if spec.launcher == "nccl_tests":
        # One process driving every GPU of the host: the single-node form nccl-tests documents.
        return [f"{NCCL_TESTS_DIR}/{spec.args[0]}", *spec.args[1:], "-g", str(procs)]
    if spec.launcher == "plain":
        return _plain_argv(spec, procs)
    return [
        PYTHON, "-m", TORCHRUN, "--standalone", "--nproc_per_node", str(procs),
        "-m", "pav_payload", *_payload_args(spec),
    ]  # fmt: skip


def _plain_argv(spec: TestSpec, procs: int, *world: str) -> list[str]:
    """pav_payload.plain's agent: procs ranks of plain Python on the host, as torchrun would start them."""
    return [PYTHON, "-m", PLAIN, "--nproc", str(procs), *world, *spec.args, *_out_args(spec)]


def _payload_args(spec: TestSpec) -> list[str]:
    """What a torchrun test's argv runs after `-m pav_payload` (a host-scope one's Launch.payload_args)."""
    return [*spec.args, *_out_args(spec)]


def _out_args(spec: TestSpec) -> list[str]:
    return ["--out", f"results/{spec.name}", "--test-id", spec.name]
