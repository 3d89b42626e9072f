"""Root through the tool's folder on a host (issue 62), re-tried on a sim host over SSH as a local user
(nobody) would: the work folder made first, with the attacker's sitecustomize.py where the payload goes.
The run refuses before anything of it runs, the operator reads the installer's own line (it read
"Shared connection to ... closed." before), and the default folder is root's, where no one else can make
it first."""

from __future__ import annotations

import pytest
import yaml

from tests.docs_quotes import assert_documented
from tests.faults.conftest import Sandbox, error_lines, ssh

pytestmark = pytest.mark.slow

PLANTED = "/var/tmp/pav-planted"


def test_a_work_folder_a_local_user_made_first_is_refused_and_nothing_planted_runs(
    sim_deps: None, sandbox: Sandbox
) -> None:
    up = sandbox.cli("--env", "sim", "--hosts", "1", "--stages", "provision", "--keep", run="provision")
    assert up.rc == 0, up.stdout + up.stderr
    inventory = sandbox.run_dir("provision") / "inventory" / "hosts.yml"
    [host] = yaml.safe_load(inventory.read_text())["all"]["hosts"].values()
    address = host["ansible_host"]
    plant = (
        f"mkdir -p {PLANTED}/payload && chown -R nobody: {PLANTED} && "
        f"echo \"open('/root/PWNED', 'w').close()\" > {PLANTED}/payload/sitecustomize.py"
    )
    assert ssh(sandbox, address, plant).returncode == 0
    run = sandbox.cli(
        "--inventory", str(inventory), "--stages", "configure,validate,collect,report,teardown",
        "--tests", "torch_gloo_allreduce", "-e", f"pav_remote_dir={PLANTED}",
    )  # fmt: skip
    assert run.rc == 2, run.stdout + run.stderr
    [line] = error_lines(run)
    assert f"pav: unsafe folder: {PLANTED} is owned by nobody (uid 65534), mode 755;" in line, line
    assert "Shared connection" not in line
    assert_documented(line)
    assert ssh(sandbox, address, "test ! -e /root/PWNED && test ! -e /var/lib/pav").returncode == 0
    assert ssh(sandbox, address, f"rm -rf {PLANTED}").returncode == 0

    # The default folder: made by root with a plain mkdir, root's and 0755 at each step; a launch runs there.
    good = sandbox.cli(
        "--inventory", str(inventory), "--stages", "configure,validate,collect,report",
        "--tests", "torch_gloo_allreduce", run="good",
    )  # fmt: skip
    assert good.rc == 0, good.stdout + good.stderr
    made = ssh(sandbox, address, "stat -c '%U %a %F' /var/lib/pav /var/lib/pav/payload /var/lib/pav/runs")
    assert made.stdout.splitlines() == ["root 755 directory"] * 3, made.stdout + made.stderr
    assert ssh(sandbox, address, "test ! -e /root/PWNED").returncode == 0

    kept = sandbox.results("provision")["run_id"]
    down = sandbox.cli("--env", "sim", "--stages", "teardown", "--reuse", kept, run="down")
    assert down.rc == 0, down.stdout + down.stderr
    assert sandbox.left(("provision", "run", "good", "down")) == []
