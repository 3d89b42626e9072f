"""What the configure stage tells the roles: torch_payload (pav.stages.configure.payload_vars) the driver's
payload script, the facts read's job file inside the run's folder on the host, and whether that file needs a
module run to remove it (not where the folder goes at teardown or is kept for a later one); the playbook
which install roles run (install_vars)."""

from __future__ import annotations

from pathlib import Path

from pav.context import STAGES, Options
from pav.stages.configure import install_vars, installs_needed, payload_vars
from tests.driver.contexts import context

SCRIPT = Path("/run/ansible/payload.sh")


def test_a_run_that_tears_down_leaves_the_job_file_to_teardown() -> None:
    ctx = context()
    assert payload_vars(ctx, SCRIPT) == {
        "torch_payload_installer": str(SCRIPT),
        "torch_payload_async_dir": f"{ctx.remote_run_dir}/.async",
        "torch_payload_async_cleanup": False,
    }


def test_a_kept_run_keeps_it_with_its_folder() -> None:
    kept = Options(stages=("provision", "configure"), keep=True)
    assert payload_vars(context(options=kept), SCRIPT)["torch_payload_async_cleanup"] is False


def test_a_run_without_teardown_or_keep_removes_it() -> None:
    no_teardown = Options(stages=tuple(s for s in STAGES if s != "teardown"))
    assert payload_vars(context(options=no_teardown), SCRIPT)["torch_payload_async_cleanup"] is True
    configure_only = Options(stages=("configure",))
    assert payload_vars(context(options=configure_only), SCRIPT)["torch_payload_async_cleanup"] is True


def test_mpi_and_nccl_tests_are_set_up_only_for_tests_that_use_them() -> None:
    torch_only = context(tests=["torch_gloo_allreduce", "ddp_cpu_train"])
    assert install_vars(installs_needed(torch_only)) == {
        "pav_mpi_needed": False,
        "pav_nccl_tests_needed": False,
    }
    with_mpi = context(tests=["torch_gloo_allreduce", "mpi_allreduce"])
    assert install_vars(installs_needed(with_mpi)) == {"pav_mpi_needed": True, "pav_nccl_tests_needed": False}
    # nccl-tests needs MPI too: its cluster form runs under mpirun, an MPI build links it.
    with_nccl_tests = context(tests=["nccl_tests_all_reduce"])
    assert install_vars(installs_needed(with_nccl_tests)) == {
        "pav_mpi_needed": True,
        "pav_nccl_tests_needed": True,
    }


def test_a_configure_without_validate_sets_everything_up_for_what_comes_next() -> None:
    readying = Options(stages=("provision", "configure"), keep=True)
    assert install_vars(installs_needed(context(options=readying, tests=["torch_gloo_allreduce"]))) == {
        "pav_mpi_needed": True,
        "pav_nccl_tests_needed": True,
    }
