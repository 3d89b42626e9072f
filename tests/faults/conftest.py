"""Faults: each test breaks one thing and checks that the run survives it, says what happened, and leaves
nothing behind: no namespace, mount, process, Terraform resource or temp file of the run."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import ROOT, CliRun, run_cli
from tests.sim.leftovers import cluster_id, leftovers

SIM_HOSTS = ROOT / "scripts" / "sim-hosts"


@dataclass
class Sandbox:
    """One fault test's world: the env's state dir and temp dirs of its own, run dirs beside them."""

    base: Path
    # Where Ansible's SSH master connections keep their sockets (ansible.cfg's is shared). Not under base:
    # a socket path fits ~100 characters, and pytest-xdist's tmp_path leaves too few of them.
    control_dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="pavcp-")))

    @property
    def state(self) -> Path:
        return self.base / "state"

    @property
    def tmp(self) -> Path:
        return self.base / "tmp"

    @property
    def ansible_tmp(self) -> Path:
        return self.base / "ansible-tmp"

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        return {
            "PAV_STATE_DIR": str(self.state),
            # Whatever the driver, Ansible or Terraform leave in a temp dir lands here, where it is seen.
            "TMPDIR": str(self.tmp),
            "ANSIBLE_LOCAL_TEMP": str(self.ansible_tmp),
            "ANSIBLE_SSH_CONTROL_PATH_DIR": str(self.control_dir),
            "PAV_FAULT_TESTS": "1",
            **(extra or {}),
        }

    def run_dir(self, run: str | Path) -> Path:
        return run if isinstance(run, Path) else self.base / run

    def cli(
        self, *args: str, run: str | Path = "run", env: dict[str, str] | None = None, timeout: int = 900
    ) -> CliRun:
        return run_cli(*args, "--run-dir", str(self.run_dir(run)), env=self.env(env), timeout=timeout)

    def start(self, *args: str, run: str = "run") -> subprocess.Popen[str]:
        """The driver in a session of its own, as a shell runs a foreground job: signals go to it, or to its
        whole process group, as a test chooses."""
        return subprocess.Popen(
            [sys.executable, "-m", "pav", *args, "--run-dir", str(self.run_dir(run))],
            cwd=ROOT,
            env={**os.environ, **self.env()},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )

    def results(self, run: str | Path = "run") -> dict[str, Any]:
        return json.loads((self.run_dir(run) / "results.json").read_text())

    def host_down(self, index: int) -> None:
        subprocess.run(
            [str(SIM_HOSTS), "host-down", "--state-dir", str(self.state / "sim"), "--index", str(index)],
            check=True,
            capture_output=True,
            timeout=120,
        )

    def left(self, runs: tuple[str | Path, ...] = ()) -> list[str]:
        """Everything of the env, and of the given runs, that still exists."""
        found = leftovers(self.state) if (self.state / "sim").exists() else []
        found += [f"terraform resource {r}" for r in terraform_resources(self.state)]
        found += [f"temp file {p}" for d in (self.tmp, self.ansible_tmp) for p in sorted(d.rglob("*"))]
        found += [f"ssh master {pid}" for pid in processes(str(self.control_dir))]
        for run in runs:
            found += [f"ansible temp dir {p}" for p in self.run_dir(run).glob("ansible/*/tmp")]
            run_id = self.results(run)["run_id"]
            found += [f"process {pid} of run {run_id}" for pid in launch_processes(run_id)]
        return found

    def open(self) -> Sandbox:
        for folder in (self.tmp, self.ansible_tmp):
            folder.mkdir()
        return self

    def close(self) -> None:
        """A failed test must not leave its cluster to the next one (the test itself checked first)."""
        if (self.state / "sim").exists():
            subprocess.run(
                [str(SIM_HOSTS), "down", "--state-dir", str(self.state / "sim")],
                capture_output=True,
                timeout=300,
                check=False,
            )
        shutil.rmtree(self.control_dir, ignore_errors=True)


@pytest.fixture
def sandbox(tmp_path: Path) -> Iterator[Sandbox]:
    box = Sandbox(tmp_path).open()
    try:
        yield box
    finally:
        box.close()


@dataclass
class Configured:
    """The sim env's default run (3 hosts, every stage but teardown: --keep), made once: test_sim_env judges
    that run, and the faults that need only validate use its hosts (tests/conftest.py's `configured`).

    Tests reach it through a static inventory (--inventory) of some of its hosts: their teardown leaves
    the hosts up. Hosts 0 and 1 are for tests that leave them as they found them; host 2 may be killed.
    """

    box: Sandbox
    setup: CliRun  # the default run that made the hosts

    @property
    def names(self) -> list[str]:
        return [f"sim-{cluster_id(self.box.state)}-{i}" for i in range(3)]

    def inventory(self, *indices: int) -> Path:
        """An inventory of the given hosts, with the sim env's group_vars beside it."""
        setup = self.box.run_dir("setup") / "inventory"
        folder = self.box.base / f"inv-{'-'.join(map(str, indices))}"
        if not folder.exists():
            shutil.copytree(setup, folder)
            hosts = yaml.safe_load((setup / "hosts.yml").read_text())["all"]["hosts"]
            kept = {self.names[i]: hosts[self.names[i]] for i in indices}
            (folder / "hosts.yml").write_text(yaml.safe_dump({"all": {"hosts": kept}}, sort_keys=False))
        return folder / "hosts.yml"

    def validate(self, *indices: int) -> tuple[str, ...]:
        """Options of a run on those hosts: validate, collect, report and teardown (not destroy)."""
        return ("--inventory", str(self.inventory(*indices)), "--stages", "validate,collect,report,teardown")

    def host_dir(self, index: int) -> Path:
        """What host `index` wrote to its own root (its overlay's upper layer)."""
        return self.box.state / "sim" / "run" / str(index) / "fs" / "upper"

    def remote_run_dir(self, index: int, run_id: str) -> Path:
        return self.host_dir(index) / "var" / "lib" / "pav" / "runs" / run_id


@dataclass
class Fresh:
    """Two sim hosts the tool made and no run has configured, provisioned once (--keep) for the checks that
    need such hosts: test_check_mode on host 0, then test_fresh_hosts (file order, on one worker:
    tests/conftest.py SHARED_FIXTURES), whose refusal needs host 1 untouched. Each had a provision of its
    own (~15 s of the suite's wall time, docs/benchmarks.md)."""

    box: Sandbox
    inventory: Path  # both hosts
    addresses: list[str]

    def inventory_of(self, index: int) -> Path:
        """An inventory of one host, with the env's group_vars beside it."""
        folder = self.box.base / f"inv-{index}"
        if not folder.exists():
            shutil.copytree(self.inventory.parent, folder)
            hosts = yaml.safe_load(self.inventory.read_text())["all"]["hosts"]
            name = list(hosts)[index]
            (folder / "hosts.yml").write_text(yaml.safe_dump({"all": {"hosts": {name: hosts[name]}}}))
        return folder / "hosts.yml"

    def host_dir(self, index: int) -> Path:
        """What host `index` wrote to its own root (its overlay's upper layer)."""
        return self.box.state / "sim" / "run" / str(index) / "fs" / "upper"


# The runs the users of fresh_hosts make in its sandbox: its teardown checks that none of them left anything.
FRESH_RUNS = ("provision", "check", "run", "mpi", "down")


@pytest.fixture(scope="session")
def fresh_hosts(sim_deps: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fresh]:
    box = Sandbox(tmp_path_factory.mktemp("fresh")).open()
    try:
        up = box.cli("--env", "sim", "--hosts", "2", "--stages", "provision", "--keep", run="provision")
        assert up.rc == 0, up.stdout + up.stderr
        inventory = box.run_dir("provision") / "inventory" / "hosts.yml"
        hosts = yaml.safe_load(inventory.read_text())["all"]["hosts"]
        yield Fresh(box, inventory, [h["ansible_host"] for h in hosts.values()])
        kept = box.results("provision")["run_id"]
        down = box.cli("--env", "sim", "--stages", "teardown", "--reuse", kept, run="down")
        assert down.rc == 0, down.stdout + down.stderr
        runs = tuple(r for r in FRESH_RUNS if (box.run_dir(r) / "results.json").exists())
        assert box.left(runs) == []
    finally:
        box.close()


def terraform_resources(state: Path) -> list[str]:
    """What the env's Terraform state still holds (what `terraform state list` would print)."""
    path = state / "terraform.tfstate"
    if not path.exists():
        return []
    data = json.loads(path.read_text() or "{}")
    return [f"{r['type']}.{r['name']}" for r in data.get("resources", []) if r.get("instances")]


def launch_processes(run_id: str) -> list[int]:
    """Processes of any launch of the run, on this machine or a sim host (their /proc is this one's)."""
    marker = f"PAV_LAUNCH={run_id}/".encode()
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            environ = (proc / "environ").read_bytes()
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != "Z" and any(entry.startswith(marker) for entry in environ.split(b"\0")):
            found.append(int(proc.name))
    return found


# A check reads every process's command line or environment (~2.5-5 ms of CPU here), and a test waits
# minutes in all: at 10 polls a second that was 2.5-5% of a core all along (issue 49). What is waited for
# lasts seconds at least (a host being made, ranks that hang, a playbook), so 4 a second still sees it.
POLL_S = 0.25


def wait_for(
    what: str, check: Callable[[], Any], timeout: float, proc: subprocess.Popen[str] | None = None
) -> Any:
    """Poll until check() is truthy; fail naming `what` (and the driver's output if it already exited)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        if proc is not None and proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"the driver exited ({proc.returncode}) before {what}:\n{out}\n{err}")
        time.sleep(POLL_S)
    pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}")


def processes(*needles: str, environ: str = "") -> list[int]:
    """Live processes whose command line contains every needle (and whose environment contains environ)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            env = (proc / "environ").read_bytes().decode(errors="replace") if environ else ""
        except OSError:
            continue
        if all(n in cmd for n in needles) and environ in env:
            found.append(int(proc.name))
    return found


def error_lines(run: CliRun | tuple[str, str]) -> list[str]:
    stderr = run.stderr if isinstance(run, CliRun) else run[1]
    return [ln for ln in stderr.splitlines() if ln.startswith("error:")]


def playbook_run_id(run_dir: Path) -> str | None:
    """The run id the driver passed to the ansible-playbook of this run dir (results.json comes later)."""
    for pid in processes("ansible-playbook", str(run_dir)):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        found = re.search(r'"pav_run_id": ?"([^"]+)"', cmd)
        if found:
            return found.group(1)
    return None


def ssh(sandbox: Sandbox, address: str, command: str) -> subprocess.CompletedProcess[str]:
    """`command` on the host as root, with the env's key and the host key it pinned."""
    argv = [
        "ssh", "-F", "/dev/null", "-i", str(sandbox.state / "ssh" / "id_ed25519"),
        "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10",
        "-o", "StrictHostKeyChecking=yes", "-o", f"UserKnownHostsFile={sandbox.state / 'known_hosts'}",
        "-o", "GlobalKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", f"root@{address}", command,
    ]  # fmt: skip
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, check=False
    )
