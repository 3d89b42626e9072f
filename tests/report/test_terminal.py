"""What the terminal and the report say of a run: -v's progress lines as ansible-playbook says them, and
each host's changes counted one way in summary.txt and report.html."""

from __future__ import annotations

import io
from pathlib import Path

from pav import task_diffs
from pav.progress import Progress
from pav.reporting import html
from pav.reporting.changes import by_role
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


def host_rows(results: RunResults) -> dict[str, str]:
    return {
        ln.split()[0]: ln
        for ln in render(results).splitlines()
        if ln.split() and ln.split()[0] in results.hosts
    }


def test_a_host_configure_never_reached_is_not_reported_as_needing_no_changes() -> None:
    results = RunResults("r", "custom", "hosts.yml", "/tmp/r")
    results.hosts = {"up": HostRecord("up", status="ok"), "never": HostRecord("never")}
    rows = host_rows(results)
    assert rows["up"].endswith("no changes needed")
    assert rows["never"].endswith("not configured") and "unknown" in rows["never"]


CHANGED = [
    "host_tuning : Write the limits.d file",
    "nccl_env : Write the NCCL env file",
    "mpi : Create ~/.ssh",
    "torch_payload : Unpack the payload on the host",
    "host_tuning : Write the sysctl.d file",
]


def test_summary_and_report_count_changes_one_way(tmp_path: Path) -> None:
    results = RunResults("r", "custom", "hosts.yml", str(tmp_path))
    results.hosts = {"h0": HostRecord("h0", status="ok", changes=CHANGED, tuning_applied=False)}
    assert by_role(CHANGED) == {"host_tuning": 2, "nccl_env": 1, "mpi": 1, "torch_payload": 1}
    said = "3 change(s) would apply (check mode); 2 by other roles"
    assert host_rows(results)["h0"].endswith(said)
    assert said in html.render(results.to_dict(), tmp_path)
    # Check mode held back tuning only: the summary names what still changed.
    held = "  h0: mpi : Create ~/.ssh, torch_payload : Unpack the payload on the host"
    assert held in render(results).splitlines()


LIMITS = {
    "changed": True,
    "dest": "/etc/security/limits.d/90-pav-gpu.conf",
    "diff": [
        {"before": "", "after": "*  soft  memlock  unlimited\n", "after_header": "/tmp/x/limits.conf.j2"}
    ],
}
FOLDER = {
    "changed": True,
    "path": "/etc/pav",
    "diff": {"before": {"state": "absent"}, "after": {"state": "directory"}},
}


def test_task_diffs_read_as_unified_diffs_in_the_report(tmp_path: Path) -> None:
    limits = task_diffs.unified("host_tuning : Write the limits.d file", LIMITS)
    assert limits is not None and limits["path"] == "/etc/security/limits.d/90-pav-gpu.conf"
    assert "+*  soft  memlock  unlimited" in limits["text"].splitlines()
    assert limits["text"].startswith("--- /etc/security/limits.d/90-pav-gpu.conf (before)")
    folder = task_diffs.unified("nccl_env : Create the env file's folder", FOLDER)
    assert folder is not None and folder["text"] == "/etc/pav: state: absent -> directory\n"
    assert task_diffs.unified("x", {"changed": True}) is None
    results = RunResults("r", "custom", "hosts.yml", str(tmp_path))
    results.hosts = {"h0": HostRecord("h0", status="ok", changes=CHANGED[:1], diffs=[limits])}
    page = html.render(results.to_dict(), tmp_path)
    assert "h0: what configure changed in files" in page and "+*  soft  memlock  unlimited" in page
