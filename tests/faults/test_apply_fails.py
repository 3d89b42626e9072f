"""Terraform apply fails midway (one host cannot be created): exit 2 with one line naming the failure,
destroy runs for what was created, and nothing the run created remains."""

from __future__ import annotations

import pytest

from tests.conftest import assert_one_line_error
from tests.faults.conftest import Sandbox

pytestmark = pytest.mark.slow


def test_failed_apply_is_named_and_destroyed(sim_deps: None, sandbox: Sandbox) -> None:
    run = sandbox.cli("--env", "sim", "--hosts", "2", "--tests", "torch_gloo_allreduce",
                      env={"PAV_SIM_FAIL_HOST": "1"})  # fmt: skip
    assert_one_line_error(run, "terraform apply failed", "injected by PAV_SIM_FAIL_HOST=1", documented=True)
    results = sandbox.results()
    stages = {s["name"]: s for s in results["stages"]}
    assert stages["provision"]["status"] == "failed"
    assert "configure" not in stages and "validate" not in stages
    assert stages["teardown"]["status"] == "ok", stages["teardown"]
    # The network and host 0 were created before host 1 failed; both were destroyed (and host 1's
    # half-made remains, tainted in the state, went with them).
    assert "terraform_data.network" in results["destroyed"]
    assert any(r.startswith("terraform_data.host") for r in results["destroyed"])
    assert results["verdict"] == "ERROR"
    assert (sandbox.run_dir("run") / "summary.txt").is_file()
    assert sandbox.left(("run",)) == []
