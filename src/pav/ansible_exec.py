"""Run a playbook through ansible-runner; its events become progress and per-host status."""

from __future__ import annotations

import atexit
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pav import interrupts, paths, processes, task_diffs
from pav.errors import PavError
from pav.progress import Progress
from pav.tools import require_tool

# Host facts roles set for the driver (each role's "Record ..." task).
# Facts the roles set that the driver keeps, by the name each gets in hosts/NAME/facts.json beside
# preflight_facts' own keys. One list: a fact a role sets and the driver does not read is lost (nccl_env_info
# once was, and the socket fabric's inter-node rule never applied).
ROLE_FACTS = {
    "torch_payload_info": "torch",
    "torch_payload_gpu_facts": "gpus",  # NVML per-GPU facts and Xid lines (pav_payload facts)
    "nccl_tests_info": "nccl_tests",
    "mpi_info": "mpi",
    "nccl_env_info": "nccl_env",  # the fabric the host was set up for: which inter-node gates apply
}
FACT_KEYS = ("preflight_facts", *ROLE_FACTS, "slurm_nodes_info")  # the last: --recheck's query


# Events that end one host's run of a task; each carries the run's duration.
FINISHED = ("runner_on_ok", "runner_on_failed", "runner_on_skipped", "runner_on_unreachable")


@dataclass
class PlaybookOutcome:
    rc: int
    status: str
    stats: dict[str, dict[str, int]] = field(default_factory=dict)  # host -> ok/changed/failures/...
    unreachable: dict[str, str] = field(default_factory=dict)  # host -> message
    failures: dict[str, list[str]] = field(default_factory=dict)  # host -> "task: message"
    changes: dict[str, list[str]] = field(
        default_factory=dict
    )  # host -> "role : task" that changed (or would)
    facts: dict[str, dict[str, Any]] = field(default_factory=dict)  # host -> FACT_KEYS the roles set
    diffs: dict[str, list[dict[str, str]]] = field(default_factory=dict)  # host -> readable task diffs
    # "role : task" -> seconds each host's run of it took (ansible-runner's event duration): where time goes
    durations: dict[str, list[float]] = field(default_factory=dict)
    ok: dict[str, set[str]] = field(default_factory=dict)  # "role : task" -> hosts it ran on and succeeded
    reached: set[str] = field(default_factory=set)  # hosts that finished at least one task

    @property
    def failed_hosts(self) -> set[str]:
        return set(self.failures) | set(self.unreachable)


def run_playbook(
    stage: str,
    playbook: str,
    inventory: Path,
    hosts: list[str],
    private_dir: Path,
    extravars: dict[str, Any],
    verbose: bool = False,
    limit: str | None = None,
    into: PlaybookOutcome | None = None,
) -> PlaybookOutcome:
    """into: filled as the events arrive, so a caller still has what the playbook did when a signal stops
    it (the error raised then carries no outcome)."""
    require_tool("ansible-playbook", "install the project (pip install -e .) to get ansible-core")
    outcome = into or PlaybookOutcome(rc=-1, status="unknown")
    private_dir.mkdir(parents=True, exist_ok=True)

    def on_event(event: dict[str, Any]) -> bool:
        progress.on_event(event)
        _record(event, outcome)
        return True

    # Ansible's own temp dir, per playbook: a cancelled playbook is SIGKILLed and cannot clean it up.
    local_tmp = private_dir / "tmp"
    envvars = _envvars() | {
        "ANSIBLE_LOCAL_TEMP": str(local_tmp),
        "ANSIBLE_SSH_CONTROL_PATH_DIR": str(control_dir(private_dir.parent)),
        "PAV_PLAYBOOK": str(private_dir),  # marks ansible-playbook, its workers and their ssh
    }
    import ansible_runner  # here, not at the top: a dry run or a refused input starts no playbook

    with Progress(stage, hosts, verbose=verbose) as progress, _removed_after(local_tmp):
        runner = ansible_runner.run(
            private_data_dir=str(private_dir),
            playbook=str(paths.PLAYBOOKS / playbook),
            inventory=str(inventory.resolve()),
            extravars=extravars,
            limit=limit,
            envvars=envvars,
            event_handler=on_event,
            # Polled by runner: a signal cancels the playbook, then the pipeline tears down.
            cancel_callback=interrupts.CANCEL.is_set,
            suppress_env_files=True,
            quiet=True,
            json_mode=False,
        )
        if runner.status == "canceled":
            # Ansible's workers run in sessions of their own: runner's SIGKILL of the playbook's process
            # group misses them, and they would go on with their task after the run.
            processes.kill_marked(f"PAV_PLAYBOOK={private_dir}")
        outcome.rc = runner.rc
        outcome.status = runner.status
        outcome.stats = _per_host(runner.stats or {})
        for host in hosts:
            progress.done(host, _host_state(host, outcome))
    if runner.status == "canceled":
        interrupts.raise_if_requested()
        raise PavError(f"{stage}: cancelled")
    if runner.rc != 0 and not outcome.failed_hosts and runner.status != "successful":
        tail = _stdout_tail(runner)
        raise PavError(f"{stage}: ansible-playbook {playbook} failed (rc={runner.rc}): {tail}")
    return outcome


# Each run's SSH control folder, made on first use by this driver: run dir's ansible/ -> the folder.
_CONTROL_DIRS: dict[Path, Path] = {}


def control_dir(ansible_dir: Path) -> Path:
    """The run's SSH master connections keep their sockets in a folder of the run's own, so the run can close
    them. Whoever can reach a socket can run commands as the run on every host: the folder is made by
    mkdtemp (mode 0700, a new name no one can guess or make first), not a fixed path in a shared /tmp. In
    /tmp, not the run dir: a socket path has ~100 characters at most (ANSIBLE_SSH_CONTROL_PATH_DIR: where
    else, a short folder)."""
    key = ansible_dir.resolve()
    if key not in _CONTROL_DIRS:
        base = os.environ.get("ANSIBLE_SSH_CONTROL_PATH_DIR") or "/tmp"
        try:
            _CONTROL_DIRS[key] = Path(tempfile.mkdtemp(prefix="pav-cp-", dir=base))
        except OSError as exc:
            raise PavError(
                f"cannot make a folder for the run's SSH control sockets in {base}: {exc.strerror or exc}; "
                "set ANSIBLE_SSH_CONTROL_PATH_DIR to a short folder you can write"
            ) from None
    return _CONTROL_DIRS[key]


def close_connections(ansible_dir: Path) -> None:
    """Stop the run's SSH masters: ControlPersist would keep each one alive for minutes after the run. Then
    the folder goes; a second call finds none."""
    folder = _CONTROL_DIRS.pop(ansible_dir.resolve(), None)
    if folder is None:
        return
    ssh = shutil.which("ssh")
    if ssh and folder.is_dir():
        for sock in sorted(folder.iterdir()):
            try:
                subprocess.run([ssh, "-S", str(sock), "-O", "exit", "pav"], capture_output=True, timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                continue
    shutil.rmtree(folder, ignore_errors=True)


def close_all_connections() -> None:
    """Close every run's SSH masters this process still holds open. At exit too: a caller that never reaches
    its run's close (an in-process test, a library user) would leave the folder in /tmp for good."""
    for ansible_dir in list(_CONTROL_DIRS):
        close_connections(ansible_dir)


atexit.register(close_all_connections)


@contextmanager
def _removed_after(path: Path) -> Iterator[None]:
    try:
        yield
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _envvars() -> dict[str, str]:
    bindir = str(Path(sys.executable).parent)
    return {
        "ANSIBLE_CONFIG": str(paths.ANSIBLE_CFG),
        "ANSIBLE_ROLES_PATH": str(paths.ROLES),
        # ansible-runner sets False unless told: Ansible then turns ssh's strict checking off ahead of the
        # inventory's pinned-key options, and ssh takes the first value it sees.
        "ANSIBLE_HOST_KEY_CHECKING": "True",
        "PATH": bindir + os.pathsep + os.environ.get("PATH", ""),
    }


def _record(event: dict[str, Any], outcome: PlaybookOutcome) -> None:
    data = event.get("event_data", {})
    host = data.get("host")
    res = data.get("res") or {}
    name = event.get("event")
    if not host:
        return
    if name in FINISHED:
        outcome.reached.add(host)
    if name == "runner_on_unreachable":
        outcome.unreachable[host] = _message(res)
    elif name == "runner_on_failed" and not data.get("ignore_errors"):
        outcome.failures.setdefault(host, []).append(f"{data.get('task', '?')}: {_message(res)}")
    if name == "runner_on_ok":
        for key, value in (res.get("ansible_facts") or {}).items():
            if key in FACT_KEYS:
                outcome.facts.setdefault(host, {})[key] = value
    task = data.get("task", "?")
    label = f"{data['role']} : {task}" if data.get("role") else task
    if name == "runner_on_ok":
        outcome.ok.setdefault(label, set()).add(host)
    if name == "runner_on_ok" and res.get("changed"):
        outcome.changes.setdefault(host, []).append(label)
        if diffs := task_diffs.per_path(label, res):
            outcome.diffs.setdefault(host, []).extend(diffs)
    if name in FINISHED and isinstance(data.get("duration"), int | float):
        outcome.durations.setdefault(label, []).append(float(data["duration"]))


def _message(res: dict[str, Any]) -> str:
    msg = res.get("msg") or res.get("stderr") or res.get("module_stderr") or "failed"
    said = [ln.strip() for ln in str(res.get("module_stderr") or "").splitlines() if ln.strip()]
    if "Module result deserialization failed" in str(msg) and said:
        msg = _python_did_not_run(res, said)
    # A script's or command's own last word says why it stopped; "non-zero return code" does not. Over SSH
    # a script's stderr comes back in its stdout (its pty) and ssh's "Shared connection to HOST closed." is
    # the stderr's last line: the tool's own refusal (`pav: ...`) is looked for in both (issue 62).
    if msg == "non-zero return code":
        stderr = [ln for ln in _lines(res.get("stderr")) if not _SSH_CLOSED.match(ln)]
        ours = [ln for ln in (*_lines(res.get("stdout")), *stderr) if ln.startswith("pav: ")]
        msg = (ours or stderr or [msg])[-1]
    return " ".join(str(msg).split())[:400]


_SSH_CLOSED = re.compile(r"^Shared connection to \S+ closed\.$")


def _lines(text: object) -> list[str]:
    return [ln.strip() for ln in str(text or "").splitlines() if ln.strip()]


def _python_did_not_run(res: dict[str, Any], said: list[str]) -> str:
    """The host's Python never ran the module (a pyenv shim to a version it lacks, a broken venv): the
    interpreter Ansible tried and its own words are the cause, Ansible's JSON complaint is not."""
    # A traceback ends with its error; a shell or a shim says first what went wrong (pyenv then adds notes).
    line = said[-1] if said[0].startswith("Traceback") else said[0]
    found = (res.get("ansible_facts") or {}).get("discovered_interpreter_python")
    which = (
        f"Python {found} (Ansible's interpreter discovery picked it; the inventory sets none)"
        if found
        else "Python (its ansible_python_interpreter)"
    )
    return (
        f"the host's {which} did not run Ansible's module ({line}; exit {res.get('rc', '?')}); "
        "set ansible_python_interpreter for the host in the inventory to a working Python, "
        "e.g. /usr/bin/python3"
    )


def _per_host(stats: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    hosts: dict[str, dict[str, int]] = {}
    for key, per_host in stats.items():
        if not isinstance(per_host, dict):
            continue
        for host, count in per_host.items():
            hosts.setdefault(host, {})[key] = count
    return hosts


def _host_state(host: str, outcome: PlaybookOutcome) -> str:
    if host in outcome.unreachable:
        return "unreachable"
    if host in outcome.failures:
        return "failed"
    if host in outcome.stats:
        return "done"
    # Cancelled before the play ended on it: a host that ran tasks was cut short, not left out.
    return "interrupted" if outcome.status == "canceled" and host in outcome.reached else "not run"


def _stdout_tail(runner: Any) -> str:
    try:
        text = runner.stdout.read()
    except Exception:
        return "see the stage's ansible log in the run dir"
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    errors = [ln for ln in lines if "ERROR" in ln]
    return " ".join((errors or lines or ["no output"])[-1].split())[:400]
