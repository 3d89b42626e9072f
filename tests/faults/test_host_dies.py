"""A host dies while validate runs (its namespace is deleted under a running test): its tests are error
naming it, the other host's results are kept, and teardown runs on the host that is left.

The test it dies in spans both hosts, so the surviving host's half hangs on its dead peer: the per-test
timeout (--test-timeout) is what bounds it. The dead host's earlier results died with it.

Its tests are plain Python ranks (pav_payload.plain, no torch): what is tested is the run losing a host."""

from __future__ import annotations

import pytest

from tests.docs_quotes import assert_documented
from tests.faults.conftest import Configured, Sandbox, error_lines, launch_processes, processes, wait_for

pytestmark = pytest.mark.slow


def test_host_dies_during_validate(configured: Configured, sandbox: Sandbox) -> None:
    host0, _, host2 = configured.names
    # Long enough for the host to go down while its ranks run, on a loaded 2-core machine; it also bounds
    # the survivor's hang.
    proc = sandbox.start(*configured.validate(0, 2), "--tests", "fault_plain,fault_plain_hang_multi",
                         "--test-timeout", "30")  # fmt: skip
    ranks = lambda: processes("pav_payload", "fault_plain_hang_multi", environ=f"PAV_SIM_HOST={host2}")  # noqa: E731
    wait_for(f"fault_plain_hang_multi ranks on {host2}", ranks, 400, proc)
    configured.box.host_down(2)
    out, err = proc.communicate(timeout=600)

    assert proc.returncode == 2, out + err
    assert "Traceback" not in out + err
    [line] = error_lines((out, err))
    assert f"host {host2} became unreachable during validate" in line, line
    assert "--allow-missing 1" in line
    assert_documented(line)
    results = sandbox.results()
    assert results["hosts"][host2]["status"] == "unreachable"
    tests = {(t["name"], tuple(t["hosts"])): t for t in results["tests"]}
    lost = f"no result came back from {host2}: host {host2} became unreachable during validate"
    for key in (("fault_plain_hang_multi", (host0, host2)), ("fault_plain", (host2,))):
        assert tests[key]["status"] == "error" and tests[key]["reason"].startswith(lost), tests[key]
    # The survivor's half of the cluster test timed out; its results, and its earlier ones, came back.
    assert tests[("fault_plain", (host0,))]["status"] == "pass", tests
    kept = sandbox.run_dir("run") / "hosts" / host0 / "results"
    assert (kept / "fault_plain_hang_multi" / "launcher.rc").read_text().strip() in ("124", "137")
    stages = {s["name"]: s for s in results["stages"]}
    assert {n: s["status"] for n, s in stages.items()} == {
        "validate": "failed", "collect": "ok", "report": "ok", "teardown": "ok",
    }  # fmt: skip
    assert stages["collect"]["detail"] == "collected from 1 host(s)"  # the dead host was not tried again
    assert results["verdict"] == "ERROR"
    assert launch_processes(results["run_id"]) == []
    assert not configured.remote_run_dir(0, results["run_id"]).exists()
    assert sandbox.left(("run",)) == []
