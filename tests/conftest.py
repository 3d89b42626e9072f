"""Shared helpers: run the real CLI in a subprocess, as a user would."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pav.provisioning import sim
from tests.docs_quotes import assert_documented
from tests.report.prom import PUSHGATEWAY, daemon, scrape

if TYPE_CHECKING:
    from tests.faults.conftest import Configured

ROOT = Path(__file__).resolve().parents[1]
PAYLOAD = ROOT / "payload"  # pav_payload, importable in tests through pytest's pythonpath
# Fixtures that bring up sim hosts or run the whole pipeline: a test that uses one is slow, and
# `scripts/test --fast` (pytest -m "not slow") leaves it out.
HEAVY_FIXTURES = {
    "local_run", "sim_deps", "slurm_cluster", "configured", "sandbox",  # the pipeline, sim clusters
    "fresh_hosts",  # two sim hosts no run has configured (tests/faults/conftest.py)
    "cluster", "sim_host",  # module-scoped sim hosts of tests/sim and tests/roles
}  # fmt: skip


# Session fixtures that bring up a cluster or run the pipeline once for many tests: under pytest-xdist
# (scripts/test runs workers in parallel) every test that uses one goes to one worker, so it is made once.
SHARED_FIXTURES = ("slurm_cluster", "configured", "fresh_hosts", "local_run")


# Every Python the suite starts keeps what it compiles from zips (tests/pyhook/sitecustomize.py): Ansible's
# module runs on this machine then compile their sources once per test run, not once per task (issue 49). The
# first pytest process makes the folder (0700: only code this user wrote is read back); its xdist workers and
# every process they start inherit it.
PYHOOK = ROOT / "tests" / "pyhook"
_OWN_ZIPCACHE: list[str] = []
if "PAV_TEST_ZIPCACHE" not in os.environ:
    _OWN_ZIPCACHE.append(tempfile.mkdtemp(prefix="pav-test-pyc-"))
    os.environ["PAV_TEST_ZIPCACHE"] = _OWN_ZIPCACHE[0]
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, (str(PYHOOK), os.environ.get("PYTHONPATH"))))


def pytest_unconfigure(config: pytest.Config) -> None:
    for folder in _OWN_ZIPCACHE:
        shutil.rmtree(folder, ignore_errors=True)


# tryfirst: xdist's own hook turns the group marks into worker assignments, so they must be there before.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        if HEAVY_FIXTURES & names:
            item.add_marker(pytest.mark.slow)
        group = _xdist_group(item, names)
        if group:
            item.add_marker(pytest.mark.xdist_group(group))
    items[:] = slow_files_first(items)


def slow_files_first(items: list[pytest.Item]) -> list[pytest.Item]:
    """The test files that hold a slow test before the others, each file's tests in their own order (a group
    of a shared cluster relies on file order). xdist hands out the groups first (largest first), then single
    tests in this order: a 20-50 s end-to-end test taken last kept one worker busy after the others ran out,
    the 2 cores half idle; taken first it overlaps the rest. Sorted stably: files keep their order too."""
    slow = {item.path for item in items if item.get_closest_marker("slow")}
    return sorted(items, key=lambda item: item.path not in slow)


def _xdist_group(item: pytest.Item, names: set[str]) -> str | None:
    """The worker group of a test: the shared session fixture it uses, else its module when a fixture of
    that module's scope is made once for its tests (tests of one module then share one worker)."""
    for name in SHARED_FIXTURES:
        if name in names:
            return name
    info = getattr(item, "_fixtureinfo", None)
    defs = info.name2fixturedefs.values() if info else ()
    if any(d[-1].scope == "module" for d in defs if d):
        return item.nodeid.split("::")[0]
    return None


@dataclass
class CliRun:
    rc: int
    stdout: str
    stderr: str

    def results(self, run_dir: Path) -> dict[str, Any]:
        return json.loads((run_dir / "results.json").read_text())


def run_cli(
    *args: str,
    env: dict[str, str] | None = None,
    python: str | None = None,
    timeout: int = 600,
    under: tuple[str, ...] = (),
) -> CliRun:
    """under: a program the CLI runs under (strace ... --), as a wrapper's argv before the CLI's own."""
    proc = subprocess.run(
        [*under, python or sys.executable, "-m", "pav", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=timeout,
        cwd=ROOT,
        check=False,
    )
    return CliRun(proc.returncode, proc.stdout, proc.stderr)


def run_cli_here(*args: str, env: dict[str, str] | None = None) -> CliRun:
    """The CLI as run_cli runs it (same cwd, env and CliRun), but in this process: pav.cli.main, less the
    0.2-0.5 CPU-s of a Python start and pav's imports. For what a test proves of the command's output,
    exit code and files; run_cli stays for what only a real process shows (its exit status, a traceback
    on its stderr, signals, what it inherits). An exception main does not catch propagates: the test fails
    where the real command would have printed a traceback."""
    from pav import cli

    out, err = _stream(), _stream()
    with _as_a_process(env), redirect_stdout(out), redirect_stderr(err):
        try:
            code = cli.main(list(args))
        except SystemExit as exc:  # argparse's usage errors and --help/--version
            code = _exit_status(exc.code, err)
    return CliRun(code, _text(out), _text(err))


def _stream() -> io.TextIOWrapper:
    """A real process's kind of stream, not a StringIO: the first in-process use of Ansible in a worker
    makes its Display, which patches sys.stdout and sys.stderr (their buffer, reconfigure) and warns on
    stderr where it cannot, so a StringIO would put two warnings before the error line, in whichever test
    came first (seen with 4 fast-lane workers)."""
    return io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True)


def _text(stream: io.TextIOWrapper) -> str:
    stream.flush()
    return stream.buffer.getvalue().decode()  # type: ignore[attr-defined]


@contextmanager
def _as_a_process(env: dict[str, str] | None) -> Iterator[None]:
    """What a CLI process would have of its own, given back after it: the environment (the CLI takes
    secrets out of it and marks it for its children), the cwd, and pav's signal handlers and state."""
    from tests.driver.signals import handlers_given_back

    environ = dict(os.environ)
    cwd = os.getcwd()
    os.environ.update(env or {})
    os.chdir(ROOT)
    try:
        with handlers_given_back():
            yield
    finally:
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(environ)


def _exit_status(code: object, err: io.TextIOWrapper) -> int:
    """SystemExit's code as the process's exit status: None is 0, a message is printed and is 1."""
    if code is None or isinstance(code, int):
        return code or 0
    print(code, file=err)
    return 1


def assert_one_line_error(run: CliRun, *needles: str, documented: bool = False) -> None:
    """Bad input: exit 2, no traceback, and an error line naming the problem (and, if documented, the line
    docs/reliability.md quotes)."""
    assert run.rc == 2, (run.stdout, run.stderr)
    assert "Traceback" not in run.stderr + run.stdout
    errors = [ln for ln in run.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, run.stderr
    for needle in needles:
        assert needle in errors[0], errors[0]
    if documented:
        assert_documented(errors[0])


@pytest.fixture
def cli():
    return run_cli


EARLIER_ID = "20000101T000000Z-local"
# The env's earlier runs, oldest first, EARLIER_ID the last: history flags a drop from 3 of them on.
EARLIER_IDS = ("19991230T000000Z-local", "19991231T000000Z-local", EARLIER_ID)
# Far above what gloo on a CPU reaches: the real run's busbw is a drop against it.
EARLIER_BUSBW = 1.0e6


@dataclass
class LocalRun:
    rc: int
    output: str
    root: Path
    run_dir: Path
    stdout: str
    # Its metrics (tests/report/test_metrics_daemons.py): the --metrics-textfile folder, and what the
    # --pushgateway held right after the run ("" where the gateway is not installed: that test fails so).
    textfiles: Path
    gateway: str = ""
    pushed: str = ""

    @property
    def results(self) -> dict[str, Any]:
        return json.loads((self.run_dir / "results.json").read_text())


def _earlier_runs(root: Path) -> None:
    """The env's previous runs as results.json files written here, each with one metric of the real run's
    tests, on the same host and GPUs (history's key: localhost, no GPU, as the suite's machine has)."""
    hosts = {"localhost": {"name": "localhost", "facts": {"gpu": {"count": 0, "devices": []}}}}
    for run_id in EARLIER_IDS:
        run_dir = root / run_id
        run_dir.mkdir(parents=True)
        test = {
            "name": "torch_gloo_allreduce",
            "hosts": ["localhost"],
            "status": "pass",
            "metrics": {"busbw_gbps": {"all_reduce": {"1048576": EARLIER_BUSBW}}},
        }
        started = f"{run_id[:4]}-{run_id[4:6]}-{run_id[6:8]}T00:00:00Z"
        results = {"run_id": run_id, "env": "local", "started": started, "hosts": hosts, "tests": [test]}
        (run_dir / "results.json").write_text(json.dumps(results))


@pytest.fixture(scope="session")
def local_run(tmp_path_factory: pytest.TempPathFactory) -> LocalRun:
    """The whole pipeline on --env local, once per session (tests/driver and tests/report share it).

    Its results root (PAV_RESULTS_ROOT, so also its default run dir) holds earlier runs of the env whose
    busbw the real run cannot reach: the run's own report stage must find them and flag the drop.

    It exports its metrics too, as an operator's run would: a textfile for node_exporter and a push to a
    real pushgateway, up for the run and scraped right after it (issue 49: one real run, not a second one).
    """
    root = tmp_path_factory.mktemp("results-root")
    _earlier_runs(root)
    textfiles = tmp_path_factory.mktemp("textfiles")
    env = {"PAV_RESULTS_ROOT": str(root)}
    with ExitStack() as stack:
        # Debian's pushgateway persists to /var/lib by default: nothing here.
        up = shutil.which(PUSHGATEWAY) is not None
        gateway = stack.enter_context(daemon(PUSHGATEWAY, "--persistence.file=")) if up else ""
        metrics = ("--metrics-textfile", str(textfiles), *(("--pushgateway", gateway) if gateway else ()))
        run = run_cli("--env", "local", *metrics, env=env)
        pushed = scrape(gateway) if gateway else ""
    run_dirs = [p for p in root.iterdir() if p.name not in EARLIER_IDS]
    assert len(run_dirs) == 1, (run_dirs, run.stdout, run.stderr)
    output = run.stdout + run.stderr
    return LocalRun(run.rc, output, root, run_dirs[0], run.stdout, textfiles, gateway, pushed)


@pytest.fixture(scope="session")
def sim_deps() -> None:
    """Make sure sshd, ip and MPI are installed (a no-op when they are)."""
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        pytest.skip("simulated hosts need root on Linux (namespaces, mounts)")
    result = subprocess.run(
        [str(ROOT / "scripts" / "install-sim-deps")],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if result.returncode != 0:
        pytest.fail("scripts/install-sim-deps failed:\n" + result.stdout + result.stderr)


@pytest.fixture(scope="session")
def configured(sim_deps: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Configured]:
    """The sim env's default run on 3 hosts, kept (tests/faults/conftest.py's Configured), once per session:
    tests/sim/test_sim_env.py judges the run, the faults validate on its hosts (issue 49: one provision and
    configure, not two). Its teardown comes last and must leave nothing."""
    from tests.faults.conftest import Configured, Sandbox  # here: that module imports this one

    box = Sandbox(tmp_path_factory.mktemp("configured")).open()
    try:
        up = box.cli("--env", "sim", "--keep", run="setup", timeout=1500)
        assert up.rc == 0, up.stdout + up.stderr
        yield Configured(box, up)
        # The hosts are the setup run's, kept: only a run that names it may destroy them.
        kept = box.results("setup")["run_id"]
        down = box.cli("--env", "sim", "--stages", "teardown", "--reuse", kept, run="down")
        assert down.rc == 0, down.stdout + down.stderr
        assert len(box.results("down")["destroyed"]) == 4  # the network and 3 hosts
        assert box.left(("setup", "down")) == []
        assert not sim.subnet_file(box.state).exists()  # the subnet is free for the next cluster to probe
        # Nor does the script's record of it: a next run may be given another id or subnet.
        assert sorted(p.name for p in (box.state / "sim").iterdir()) == []
    finally:
        box.close()


@pytest.fixture
def sticky() -> Iterator[Path]:
    """A root-owned 1777 folder others can reach, as /var/tmp is (pytest's tmp_path is 0700)."""
    base = Path(tempfile.mkdtemp(prefix="pav-sticky-", dir="/var/tmp"))
    base.chmod(0o1777)
    yield base
    shutil.rmtree(base)
