"""What the terminal says: -v's progress lines as ansible-playbook says them, the summary's host table."""

from __future__ import annotations

import io

from pav.progress import Progress
from pav.reporting.summary import render
from pav.results import HostRecord, RunResults


def result(host: str, task: str, changed: bool) -> dict[str, object]:
    return {"event": "runner_on_ok", "event_data": {"host": host, "task": task, "res": {"changed": changed}}}


def test_verbose_lines_say_changed_for_a_task_that_changed() -> None:
    out = io.StringIO()  # not a terminal: one line per task result
    with Progress("configure", ["h0"], verbose=True, out=out) as progress:
        progress.on_event(result("h0", "Write the limits.d file", changed=True))
        progress.on_event(result("h0", "Read the limits", changed=False))
    lines = out.getvalue().splitlines()
    assert lines[0] == "[configure] h0: changed     Write the limits.d file"
    assert lines[1] == "[configure] h0: ok          Read the limits"
    assert lines[-1].endswith("ok=2 changed=1 failed=0  Read the limits")


def test_a_host_configure_never_reached_is_not_reported_as_needing_no_changes() -> None:
    results = RunResults("r", "custom", "hosts.yml", "/tmp/r")
    results.hosts = {"up": HostRecord("up", status="ok"), "never": HostRecord("never")}
    rows = {
        line.split()[0]: line for line in render(results).splitlines() if line.startswith(("up ", "never "))
    }
    assert rows["up"].endswith("no changes needed")
    assert rows["never"].endswith("not configured") and "unknown" in rows["never"]
