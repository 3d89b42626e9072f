"""--keep on an env that provisions: the kept hosts are the kept run's. A plain run refuses them, naming the
run, its age, its expiry and both ways out; --reuse takes them as they are; a teardown given the kept run's
dir destroys them and writes a record of its own, the kept run's staying byte for byte."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.conftest import assert_one_line_error, run_cli
from tests.faults.conftest import Sandbox
from tests.sim.leftovers import leftovers

pytestmark = pytest.mark.slow

RECORD = ("results.json", "summary.txt", "junit.xml")  # byte for byte; report.html gains one line


def test_kept_hosts_are_the_kept_runs_until_it_is_torn_down(sim_deps: None, sandbox: Sandbox) -> None:
    kept_dir = sandbox.run_dir("kept")
    one = ("--env", "sim", "--hosts", "1", "--tests", "fault_plain")
    # What is tested is whose the hosts are, not what runs on them: the kept run provisions, reports and
    # keeps, no more (a configure and a validate would change nothing here; issue 49).
    kept = sandbox.cli("--env", "sim", "--hosts", "1", "--stages", "provision,report,teardown", "--keep",
                       run="kept")  # fmt: skip
    assert kept.rc == 0, kept.stdout + kept.stderr
    kept_id = sandbox.results("kept")["run_id"]
    [host] = sandbox.results("kept")["hosts"]
    written = {name: (kept_dir / name).read_bytes() for name in (*RECORD, "report.html")}
    tfstate = (sandbox.state / "terraform.tfstate").read_bytes()

    # A plain run refuses them, touching nothing: before this, it ran on them and destroyed them.
    plain = sandbox.cli(*one, run="plain")
    assert_one_line_error(
        plain,
        f"env sim: its hosts are kept by run {kept_id} (",
        " ago, until ",
        f"pass --reuse {kept_id} to run on them, or destroy them with --stages teardown --run-dir {kept_dir}",
        documented=True,
    )
    assert not sandbox.run_dir("plain").exists()
    assert (sandbox.state / "terraform.tfstate").read_bytes() == tfstate and leftovers(sandbox.state)

    # --reuse takes them as they are; with --keep again they stay the kept run's.
    reuse = ("--env", "sim", "--reuse", kept_id, "--stages", "provision,report", "--keep")
    reused = sandbox.cli(*reuse, run="reused")
    assert reused.rc == 0, reused.stdout + reused.stderr
    results = sandbox.results("reused")
    assert results["reused"] == kept_id
    provision = next(s for s in results["stages"] if s["name"] == "provision")
    assert provision["detail"] == f"reused the 1 host(s) run {kept_id} kept: {host}"
    assert (sandbox.state / "terraform.tfstate").read_bytes() == tfstate

    # The kept run's teardown, run as the kept run printed it (no --env: the run dir's record names it):
    # the hosts go, its record stays; the teardown's own record lies beside it (issue 48).
    printed = re.search(
        r"^  teardown: provision-and-validate (--stages teardown --run-dir (\S+))$", kept.stdout, re.M
    )
    assert printed is not None and printed.group(2) == str(kept_dir), kept.stdout
    down = run_cli(*printed.group(1).split(), env=sandbox.env())
    assert down.rc == 0, down.stdout + down.stderr
    for name in RECORD:
        assert (kept_dir / name).read_bytes() == written[name], name
    link = json.loads((kept_dir / "torn-down.json").read_text())
    page = (kept_dir / "report.html").read_text().splitlines(keepends=True)
    note = [ln for ln in page if 'class="torn-down"' in ln]
    by = f'<a href="../{link["by_run"]}/report.html">{link["by_run"]}</a>'
    assert len(note) == 1 and f"torn down at {link['torn_down_at']} by run {by}" in note[0]
    assert "".join(ln for ln in page if ln not in note).encode() == written["report.html"]
    teardown = json.loads((Path(link["by_run_dir"]) / "results.json").read_text())
    assert Path(link["by_run_dir"]).parent == kept_dir.parent.resolve()
    assert teardown["kept_run"] == {"run_id": kept_id, "run_dir": str(kept_dir)}
    assert teardown["verdict"] == "NONE" and len(teardown["destroyed"]) == 2
    detail = next(s["detail"] for s in teardown["stages"] if s["name"] == "teardown")
    assert detail == f"destroyed 2 resource(s) of kept run {kept_id}"
    assert not (sandbox.state / "owner.json").exists()  # nothing kept: the next run may provision
    assert sandbox.left(("kept",)) == []
