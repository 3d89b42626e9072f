"""``python -m pav_payload.suite_launch --plan-json JSON``: run a host's suites, each a list of tests of one
world shape in one process group (``pav_payload suite`` under torchrun; a one-rank suite runs without it),
and give each test what a launch of its own gives it: a per-test watchdog, and ``launcher.log``,
``launcher.rc`` and ``launcher.time`` in its results folder.

A test that outlives its timeout is killed (exit code 124, as ``timeout`` reports it), one whose ranks die
gets the launch's exit code; either way its suite starts again from the test after it, so every test still
runs and reports. While a suite runs on the GPUs the next one is started and waits behind a gate file: its
launcher and torch import overlap the running tests, and it takes the GPUs the moment the gate opens.
Standard library only: this process must not pay the torch import it exists to save.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

BEGIN, DONE = "suite.begin", "suite.done"  # written by pav_payload.suite in each test's results folder
MARK = "pav-suite: begin "  # printed by pav_payload.suite before each test
CHILD_MARK = "PAV_SUITE_CHILD"  # in the environment of every process of one start of a suite
TIMEOUT_RC = 124
POLL_S = 0.2


@dataclass
class Test:
    name: str
    timeout_s: float
    args: list[str]

    @property
    def folder(self) -> Path:
        return Path("results") / self.name


@dataclass
class Suite:
    nproc: int
    tests: list[Test]
    env: dict[str, str] = field(default_factory=dict)
    # Whether its tests only use CPUs: a suite started early must not take CPU from such tests.
    cpu_only: bool = False


@dataclass
class Start:
    """One start of a suite over tests[first:]: its output goes to the log of the test it is running."""

    suite: Suite
    first: int
    gate: Path | None
    child: subprocess.Popen[str]
    tag: str
    current: int = 0
    opened: float = 0.0  # when it may start its first test: the gate's opening, or its own start
    lock: threading.Lock = field(default_factory=threading.Lock)
    logs: dict[str, IO[str]] = field(default_factory=dict)
    reader: threading.Thread | None = None

    def log(self, name: str) -> IO[str]:
        if name not in self.logs:
            path = Path("results") / name / "launcher.log"
            path.parent.mkdir(parents=True, exist_ok=True)
            self.logs[name] = path.open("a")
        return self.logs[name]

    def note(self, name: str, line: str) -> None:
        """A line into one test's log, whole: the reader thread writes there too."""
        with self.lock:
            self.log(name).write(line)
            self.log(name).flush()

    def pump(self, stream: IO[str]) -> None:
        names = {t.name for t in self.suite.tests}
        name = self.suite.tests[self.first].name
        for line in stream:
            # Another rank's unfinished line may stand before the mark; the mark itself is never split.
            marked = line.partition(MARK)[2].strip()
            if marked in names:
                name = marked
            self.note(name, line)
            sys.stdout.write(line)
            sys.stdout.flush()

    def open_gate(self) -> None:
        self.opened = time.time()
        if self.gate is not None:
            self.gate.touch()

    def end(self) -> None:
        _kill_tagged(self.tag)
        if self.reader is not None:
            self.reader.join(timeout=10)
        for handle in self.logs.values():
            handle.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pav_payload.suite_launch", description=__doc__)
    parser.add_argument("--plan-json", required=True, help='[{"nproc", "env", "tests": [...]}, ...]')
    parser.add_argument("--gate-dir", default="tmp", help="where the gate files of early starts go")
    args = parser.parse_args(argv)
    suites = [
        Suite(
            int(s["nproc"]),
            [Test(t["test"], float(t["timeout_s"]), list(t["args"])) for t in s["tests"]],
            dict(s.get("env", {})),
            bool(s.get("cpu_only", False)),
        )
        for s in json.loads(args.plan_json)
    ]
    gates = Path(args.gate_dir)
    gates.mkdir(parents=True, exist_ok=True)
    try:
        run_all(suites, gates)
    finally:
        for gate in gates.glob(f"{os.getpid()}-*"):
            gate.unlink(missing_ok=True)
    return 0


def run_all(suites: list[Suite], gates: Path) -> None:
    early: Start | None = None
    for index, suite in enumerate(suites):
        following = suites[index + 1] if index + 1 < len(suites) else None
        start = early or begin(suite, 0, None)
        early = None
        start.open_gate()
        while True:
            # The next suite starts behind its gate once this one is at work, unless this one needs the CPUs.
            prestart = following is not None and early is None and not suite.cpu_only
            if prestart and following is not None:
                early = begin(following, 0, gates / f"{os.getpid()}-{index + 1}")
            resume = watch(start)
            start.end()
            if resume >= len(suite.tests):
                break
            start = begin(suite, resume, None)
            start.open_gate()


def begin(suite: Suite, first: int, gate: Path | None) -> Start:
    """Start tests[first:] of a suite; with a gate, its ranks wait for that file before their first test."""
    for test in suite.tests[first:]:
        for name in (BEGIN, DONE, "launcher.rc", "launcher.time"):
            (test.folder / name).unlink(missing_ok=True)
    tag = f"{os.getpid()}-{id(suite)}-{first}"
    plan = json.dumps([{"test": t.name, "args": t.args} for t in suite.tests[first:]])
    payload = ["-m", "pav_payload", "suite", "--plan-json", plan, *(["--gate", str(gate)] if gate else [])]
    # One rank needs no launcher: torchrun would only add its own start-up (and a second torch import).
    launcher = (
        []
        if suite.nproc == 1
        else ["-m", "pav_payload.torchrun", "--standalone", "--nproc_per_node", str(suite.nproc)]
    )
    child = subprocess.Popen(
        [sys.executable, *launcher, *payload],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        env={**os.environ, **suite.env, CHILD_MARK: tag},
    )
    start = Start(suite, first, gate, child, tag, current=first)
    assert child.stdout is not None
    start.reader = threading.Thread(target=start.pump, args=(child.stdout,), daemon=True)
    start.reader.start()
    return start


def watch(start: Start) -> int:
    """Follow a started suite until it ends; return the index to start it again from (len: all ran)."""
    tests, child = start.suite.tests, start.child
    since = start.opened
    while True:
        test = tests[start.current]
        done = _done(test)
        if done is not None:
            code, ended = done
            _finish(test, code, since, ended)
            since = ended
            start.current += 1
            if start.current == len(tests):
                child.wait()
                return len(tests)
            continue
        rc = child.poll()
        if rc is not None:
            if _done(test) is not None:
                continue  # it finished between the two looks
            # The ranks died in this test (or the launch before the first): it reports the launch's code.
            start.note(test.name, f"pav: the suite's launch exited {rc} during {test.name}\n")
            _finish(test, rc or 1, since, time.time())
            return start.current + 1
        if time.time() - since > test.timeout_s:
            _kill_tagged(start.tag)
            child.wait()
            start.note(test.name, f"pav: {test.name} passed its timeout of {test.timeout_s:.0f}s: killed\n")
            _finish(test, TIMEOUT_RC, since, time.time())
            return start.current + 1
        time.sleep(POLL_S)


def _done(test: Test) -> tuple[int, float] | None:
    try:
        code, ended = (test.folder / DONE).read_text().split()
        return int(code), float(ended)
    except (OSError, ValueError):
        return None


def _finish(test: Test, code: int, start: float, end: float) -> None:
    test.folder.mkdir(parents=True, exist_ok=True)
    (test.folder / "launcher.rc").write_text(f"{code}\n")
    (test.folder / "launcher.time").write_text(f"{start} {end}\n")


def _kill_tagged(tag: str) -> None:
    """Every process of one start, by the tag in its environment: torchrun's ranks run in sessions of
    their own."""
    entry = f"{CHILD_MARK}={tag}".encode()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            if entry in (proc / "environ").read_bytes().split(b"\0"):
                os.kill(int(proc.name), signal.SIGKILL)
        except (OSError, ValueError):
            continue


if __name__ == "__main__":
    sys.exit(main())
