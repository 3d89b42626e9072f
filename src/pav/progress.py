"""A live line per stage and host, driven by ansible-runner events: rich on a TTY, plain lines otherwise.

Plain lines: one per host at the stage's end (hosts whose lines read the same share one, named as a range),
and (without -v) one as a host fails or becomes unreachable, which is said then, in the end line's own form;
the end line of a host that has nothing to add since is not said again. With -v, a line per task result as
ansible-playbook says it, then the end lines."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any, TextIO

from rich.console import Console
from rich.live import Live
from rich.table import Table

from pav.hostlist import describe, natural
from pav.printable import printable

RESULT_EVENTS = {
    "runner_on_ok": "ok",
    "runner_on_failed": "failed",
    "runner_on_unreachable": "unreachable",
    "runner_on_skipped": "skipped",
}


@dataclass
class HostLine:
    ok: int = 0
    changed: int = 0
    failed: int = 0
    state: str = "waiting"
    task: str = ""
    counts: dict[str, int] = field(default_factory=dict)

    def render(self) -> str:
        return f"{self.state:<11} ok={self.ok} changed={self.changed} failed={self.failed}  {self.task}"


class Progress:
    def __init__(
        self, stage: str, hosts: list[str], verbose: bool = False, out: TextIO | None = None
    ) -> None:
        self.stage = stage
        self.verbose = verbose
        self.out = out or sys.stdout
        self.lines = {h: HostLine() for h in hosts}
        self.tty = self.out.isatty()
        self._live: Live | None = None
        self._said: dict[str, str] = {}  # host -> the last line said of it in the end line's form

    def __enter__(self) -> Progress:
        if self.tty:
            self._live = Live(
                self._table(), console=Console(file=self.out), refresh_per_second=8, transient=False
            )
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live:
            self._live.update(self._table())
            self._live.__exit__(None, None, None)
        else:
            # Hosts whose end lines read the same are one line, named as a range: 64 alike hosts, one line.
            alike: dict[str, list[str]] = {}
            for host in natural(self.lines):
                said = self.lines[host].render()
                if self._said.get(host) != said:  # a failure said as it came is not said twice
                    alike.setdefault(said, []).append(host)
            for said, hosts in alike.items():
                self._print(f"[{self.stage}] {describe(hosts)}: {said}")

    def on_event(self, event: dict[str, Any]) -> None:
        kind = RESULT_EVENTS.get(event.get("event", ""))
        data = event.get("event_data", {})
        host = data.get("host") or data.get("remote_addr")
        if not kind or host is None:
            return
        line = self.lines.setdefault(host, HostLine())
        res = data.get("res") or {}
        line.task = data.get("task", "")
        if kind == "ok":
            line.ok += 1
            line.changed += bool(res.get("changed"))
        elif kind in ("failed", "unreachable"):
            if data.get("ignore_errors"):
                line.ok += 1
            else:
                line.failed += 1
                line.state = kind
        if line.state == "waiting":
            line.state = "running"
        if self._live:
            self._live.update(self._table())
        elif self.verbose:
            # As ansible-playbook says it: a task that changed the host is "changed", not "ok".
            said = "changed" if kind == "ok" and res.get("changed") else kind
            self._print(f"[{self.stage}] {host}: {said:<11} {line.task}")
        elif kind in ("failed", "unreachable") and not data.get("ignore_errors"):
            # Said now, as the end line says it: a host that does nothing after it is not said again.
            self._said[host] = line.render()
            self._print(f"[{self.stage}] {host}: {self._said[host]}")

    def done(self, host: str, state: str) -> None:
        self.lines.setdefault(host, HostLine()).state = state

    def _table(self) -> Table:
        table = Table(title=f"stage: {self.stage}", title_justify="left", show_edge=False)
        for col in ("host", "state", "ok", "changed", "failed", "task"):
            table.add_column(col)
        for host in natural(self.lines):
            line = self.lines[host]
            table.add_row(
                host, line.state, str(line.ok), str(line.changed), str(line.failed), printable(line.task[:60])
            )
        return table

    def _print(self, text: str) -> None:
        print(printable(text), file=self.out, flush=True)
