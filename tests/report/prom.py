"""The Prometheus programs the metrics tests hold the tool's output against: Debian's promtool,
node_exporter and pushgateway (scripts/install-metrics-deps), each daemon on a free loopback port and
stopped when its test ends; and a reader of the text format the tests scrape."""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from pav.secrets.basic_auth import BasicAuth

NODE_EXPORTER = "prometheus-node-exporter"
PUSHGATEWAY = "prometheus-pushgateway"
PROMTOOL = "promtool"
READY_WAIT_S = 30  # how long a daemon may take to listen; a start that takes longer fails the test
LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$")
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def binary(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed: run scripts/install-metrics-deps (as root; scripts/test does)")
    return found


def promtool(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [binary(PROMTOOL), *args], input=stdin, capture_output=True, text=True, timeout=120, check=False
    )


def assert_lint_clean(text: str) -> None:
    """promtool check metrics: valid text format and no lint finding (names, units, HELP)."""
    proc = promtool("check", "metrics", stdin=text)
    said = (proc.stdout + proc.stderr).strip()
    assert proc.returncode == 0 and not said, said


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def daemon(name: str, *args: str) -> Iterator[str]:
    """The program listening on a free loopback port, stopped (and waited for) however the test ends;
    yields its base URL."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    argv = [binary(name), f"--web.listen-address=127.0.0.1:{port}", *args]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        _wait_ready(proc, url)
        yield url
    finally:
        proc.kill()
        proc.wait(timeout=30)
        if proc.stderr is not None:
            proc.stderr.close()


def scrape(url: str, auth: BasicAuth | None = None) -> str:
    request = urllib.request.Request(f"{url}/metrics")
    if auth is not None:
        request.add_header("Authorization", auth.header())
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.read().decode()


@dataclass(frozen=True)
class Series:
    name: str
    labels: dict[str, str]
    value: float


def parse(text: str) -> list[Series]:
    out = []
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        found = LINE.match(line)
        assert found, f"not a sample line: {line}"
        # An empty label is no label, as Prometheus has it (node_exporter fills a family's missing ones so).
        labels = {k: v.replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")
                  for k, v in LABEL.findall(found.group(2) or "") if v}  # fmt: skip
        out.append(Series(found.group(1), labels, float(found.group(3))))
    return out


def pick(series: list[Series], name: str, **labels: str) -> list[Series]:
    return [s for s in series if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())]


def one(series: list[Series], name: str, **labels: str) -> float:
    found = pick(series, name, **labels)
    assert len(found) == 1, f"{name}{labels}: {found}"
    return found[0].value


def families(text: str) -> dict[str, tuple[str, str]]:
    """name -> (HELP, TYPE) of every family the text declares."""
    helps = dict(re.findall(r"^# HELP (\S+) (.*)$", text, re.M))
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))
    return {name: (helps.get(name, ""), types.get(name, "")) for name in helps.keys() | types.keys()}


def _wait_ready(proc: subprocess.Popen[str], url: str) -> None:
    deadline = time.monotonic() + READY_WAIT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            err = proc.stderr.read() if proc.stderr else ""
            pytest.fail(f"{proc.args} exited {proc.returncode}: {err[-2000:]}")
        try:
            scrape(url)
            return
        except urllib.error.HTTPError:
            return  # it answers: a daemon behind basic auth says 401 to a scrape without it
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.05)
    pytest.fail(f"{proc.args} did not answer on {url} within {READY_WAIT_S}s")


def unwritable_dir(where: Path) -> Path:
    """A DIR no process can write into, root or not: a file stands where the directory would be."""
    path = where / "textfile-dir"
    path.write_text("a file, not a directory\n")
    return path
