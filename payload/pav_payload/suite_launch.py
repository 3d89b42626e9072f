"""``python -m pav_payload.suite_launch --nproc N --plan-json JSON``: run a suite of tests of one world shape
in one torchrun (``pav_payload suite``) and give each test what a launch of its own gives it: a per-test
watchdog, and ``launcher.log``, ``launcher.rc`` and ``launcher.time`` in its results folder.

A test that outlives its timeout is killed (exit code 124, as ``timeout`` reports it), one whose ranks die
gets torchrun's exit code; either way the suite starts again from the test after it, so every test still
runs and reports. Standard library only: this process must not pay the torch import it exists to save.
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
CHILD_MARK = "PAV_SUITE_CHILD"  # in the environment of every process of one torchrun of the suite
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
class Attempt:
    """One torchrun over tests[first:]: its output goes to the log of the test it is running."""

    tests: list[Test]
    first: int
    current: int = 0
    started: float = field(default_factory=time.time)
    lock: threading.Lock = field(default_factory=threading.Lock)
    logs: dict[str, IO[str]] = field(default_factory=dict)

    def log(self, name: str) -> IO[str]:
        if name not in self.logs:
            path = Path("results") / name / "launcher.log"
            path.parent.mkdir(parents=True, exist_ok=True)
            self.logs[name] = path.open("a")
        return self.logs[name]

    def pump(self, stream: IO[str]) -> None:
        names = {t.name for t in self.tests}
        name = self.tests[self.first].name
        for line in stream:
            # Another rank's unfinished line may stand before the mark; the mark itself is never split.
            marked = line.partition(MARK)[2].strip()
            if marked in names:
                name = marked
            with self.lock:
                self.log(name).write(line)
                self.log(name).flush()
            sys.stdout.write(line)
            sys.stdout.flush()

    def close(self) -> None:
        for handle in self.logs.values():
            handle.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pav_payload.suite_launch", description=__doc__)
    parser.add_argument("--nproc", type=int, required=True, help="ranks per host (torchrun --nproc_per_node)")
    parser.add_argument("--plan-json", required=True, help='[{"test", "timeout_s", "args"}, ...]')
    args = parser.parse_args(argv)
    tests = [Test(t["test"], float(t["timeout_s"]), list(t["args"])) for t in json.loads(args.plan_json)]
    first = 0
    while first < len(tests):
        first = run_from(tests, first, args.nproc)
    return 0


def run_from(tests: list[Test], first: int, nproc: int) -> int:
    """Run tests[first:] in one torchrun; return the index to start the next torchrun from."""
    for test in tests[first:]:
        for name in (BEGIN, DONE, "launcher.rc", "launcher.time"):
            (test.folder / name).unlink(missing_ok=True)
    tag = f"{os.getpid()}-{first}"
    plan = json.dumps([{"test": t.name, "args": t.args} for t in tests[first:]])
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(nproc)]
    attempt = Attempt(tests, first, current=first)
    child = subprocess.Popen(
        [*argv, "-m", "pav_payload", "suite", "--plan-json", plan],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        env={**os.environ, CHILD_MARK: tag},
    )
    assert child.stdout is not None
    reader = threading.Thread(target=attempt.pump, args=(child.stdout,), daemon=True)
    reader.start()
    try:
        return _watch(attempt, child, tag)
    finally:
        _kill_tagged(tag)
        reader.join(timeout=10)
        attempt.close()


def _watch(attempt: Attempt, child: subprocess.Popen[str], tag: str) -> int:
    tests = attempt.tests
    since = attempt.started
    while True:
        test = tests[attempt.current]
        done = _done(test)
        if done is not None:
            code, ended = done
            _finish(test, code, since, ended)
            since = ended
            attempt.current += 1
            if attempt.current == len(tests):
                child.wait()
                return len(tests)
            continue
        rc = child.poll()
        if rc is not None:
            if _done(test) is not None:
                continue  # it finished between the two looks
            # The ranks died in this test (or torchrun before the first): it reports torchrun's code.
            _note(attempt, test, f"pav: the suite's torchrun exited {rc} during {test.name}")
            _finish(test, rc or 1, since, time.time())
            return attempt.current + 1
        if time.time() - since > test.timeout_s:
            _kill_tagged(tag)
            child.wait()
            _note(attempt, test, f"pav: {test.name} passed its timeout of {test.timeout_s:.0f}s: killed")
            _finish(test, TIMEOUT_RC, since, time.time())
            return attempt.current + 1
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


def _note(attempt: Attempt, test: Test, line: str) -> None:
    with attempt.lock:
        attempt.log(test.name).write(line + "\n")
        attempt.log(test.name).flush()


def _kill_tagged(tag: str) -> None:
    """Every process of one torchrun, by the tag in its environment: ranks run in sessions of their own."""
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
