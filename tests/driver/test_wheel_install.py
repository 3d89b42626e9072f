"""Installed the ordinary Python way (issue 48, item 7): the wheel `pip wheel .` builds carries the roles,
playbooks, inventories, payload, thresholds, Terraform roots and templates a run reads (pav/_project/), so
the installed command plans and runs from any folder, and writes its runs outside site-packages.

The proof builds the wheel from a copy of this checkout (offline: no build isolation, no dependencies),
installs it into a fresh venv as pipx would, and runs that venv's provision-and-validate from a folder
that is no checkout. The venv gets the dependencies (ansible-core, torch, ...) from this interpreter's
site-packages through a .pth line, and their commands (ansible-playbook, ...) linked beside its Python, where
pip would have put them: nothing else of this checkout is on its path.
"""

from __future__ import annotations

import csv
import json
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from pav import paths, rundir
from pav.provisioning import sim
from tests.conftest import ROOT

# What the copy the wheel is built from leaves out: caches, runs, venvs, earlier builds.
NOT_COPIED = shutil.ignore_patterns(
    ".git", ".venv", "runs", "build", "dist", "*.egg-info", "__pycache__", ".*cache", ".hypothesis", ".state",
    ".whl", ".src",
)  # fmt: skip


PLANTED = "roles/run_tests/tasks/planted.yml"  # untracked: never in the wheel (issue 62)


@dataclass(frozen=True)
class Installed:
    wheel: Path
    venv: Path
    site: Path  # the venv's site-packages, where the wheel went
    env: dict[str, str]  # for its commands: nothing of this checkout, per-test XDG folders
    data_home: Path  # XDG_DATA_HOME: the default results root's parent

    @property
    def command(self) -> Path:
        return self.venv / "bin" / "provision-and-validate"

    def run(
        self, *args: str, cwd: Path, timeout: int = 120, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.command), *args],
            capture_output=True, text=True, env=self.env | (env or {}), cwd=cwd, timeout=timeout, check=False,
        )  # fmt: skip


def _checked(argv: list[str], **kwargs: object) -> None:
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, **kwargs)  # type: ignore[call-overload]
    assert proc.returncode == 0, (argv, proc.stdout, proc.stderr)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    base = tmp_path_factory.mktemp("wheel")
    source = base / "checkout"
    shutil.copytree(ROOT, source, ignore=NOT_COPIED, symlinks=True)
    # A git checkout, as a build's is: what git tracks is the project; a file it does not (planted in
    # roles/ after the copy) must not ship.
    _checked(["git", "init", "-q", str(source)], timeout=60)
    _checked(["git", "-C", str(source), "add", "-A"], timeout=120)
    (source / PLANTED).write_text("- name: Planted\n  hosts: all\n")
    dist = base / "dist"
    _checked(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
         "--no-cache-dir", "-q", "-w", str(dist), str(source)],
        timeout=300,
    )  # fmt: skip
    (wheel,) = dist.glob("provision_and_validate-*.whl")
    venv = base / "venv"
    _checked([sys.executable, "-m", "venv", "--without-pip", str(venv)], timeout=120)
    python = venv / "bin" / "python"
    site = Path(
        subprocess.check_output(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]
        )
        .decode()
        .strip()
    )
    # A plain path line: the dependencies' site-packages, without the .pth files there (this checkout's
    # editable install among them).
    (site / "pav-test-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    for tool in Path(sys.executable).parent.glob("ansible*"):
        (venv / "bin" / tool.name).symlink_to(tool)
    _checked([str(python), "-m", "pip", "install", "--no-deps", "--no-index", "-q", str(wheel)], timeout=300)
    drop = {"PYTHONPATH", "PAV_HOME", "PAV_RESULTS_ROOT", "PAV_RUNS", "PAV_STATE_DIR", "VIRTUAL_ENV"}
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env |= {"XDG_DATA_HOME": str(base / "data"), "XDG_STATE_HOME": str(base / "state")}
    return Installed(wheel, venv, site, env, base / "data")


@pytest.mark.slow
def test_the_wheel_carries_what_a_run_reads(installed: Installed) -> None:
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    project = "pav/_project/"
    for needed in (
        "ansible/ansible.cfg",
        "playbooks/configure.yml",
        "roles/run_tests/tasks/main.yml",
        "roles/preflight/meta/argument_specs.yml",
        "plugins/modules/pav_host_probe.py",
        "inventories/local/hosts.yml",
        "inventories/sim/provision.yml",
        "payload/pav_payload/__main__.py",
        "thresholds/cpu.yml",
        "thresholds/hardware/gpus.yml",
        "terraform/envs/sim/main.tf",
        "templates/k8s/defaults.yml",
        "scripts/sim-hosts",
    ):
        assert project + needed in names, needed
    # A role's library/ link to its module ships as the file.
    assert project + "roles/preflight/library/pav_host_probe.py" in names
    assert project + PLANTED not in names  # a file git does not track in the checkout built from
    for data in ("reporting/templates/report.html.j2", "slurm/templates/host.sbatch.j2"):
        assert "pav/" + data in names
    assert not [n for n in names if "__pycache__" in n or n.endswith((".pyc", "/terraform.yml"))]
    assert not [
        n for n in names if n.startswith(tuple(project + d for d in ("tests/", "docs/", "src/", "runs/")))
    ]


@pytest.mark.slow
def test_installed_command_plans_from_any_folder(installed: Installed, tmp_path: Path) -> None:
    import_path = subprocess.check_output(
        [str(installed.venv / "bin" / "python"), "-c", "import pav; print(pav.__file__)"], env=installed.env
    )
    assert Path(import_path.decode().strip()).is_relative_to(installed.site)  # not this checkout's src/
    run = installed.run("--env", "local", "--dry-run", cwd=tmp_path)
    assert run.returncode == 0, (run.stdout, run.stderr)
    assert "env: local" in run.stdout.splitlines()
    assert "  localhost (localhost)" in run.stdout.splitlines()
    # The default run dir: the user's data folder, never site-packages nor the current folder.
    default_root = installed.data_home / "provision-and-validate" / "runs"
    assert f"run dir: {default_root}/" in run.stdout
    # The sim env's Terraform root and its sim-hosts are the installed copy's, run with the venv's Python.
    sim_plan = installed.run("--env", "sim", "--hosts", "2", "--dry-run", cwd=tmp_path)
    assert sim_plan.returncode == 0, (sim_plan.stdout, sim_plan.stderr)
    project = installed.site / "pav" / "_project"
    assert f"created by Terraform root {project / 'terraform' / 'envs' / 'sim'}" in sim_plan.stdout
    script = f"sim_hosts_script = {installed.venv / 'bin' / 'python'} {project / 'scripts' / 'sim-hosts'}"
    assert script in sim_plan.stdout
    assert list(tmp_path.iterdir()) == []  # a plan writes nothing where it runs


@pytest.mark.slow
def test_installed_command_runs_the_local_pipeline(installed: Installed, tmp_path: Path) -> None:
    """The whole pipeline from the installed copy (its roles, playbooks, payload). The launch is plain Python
    ranks of the installed payload (fault_plain, FOR TESTING): what is under test is the installed copy, not
    torch, which configure's torch_payload role still imports there (issue 49)."""
    run_dir = tmp_path / "my-run"
    run = installed.run(
        "--env", "local", "--tests", "fault_plain", "--run-dir", "my-run", cwd=tmp_path, timeout=600,
        env={"PAV_FAULT_TESTS": "1"},
    )  # fmt: skip
    assert run.returncode == 0, (run.stdout, run.stderr)
    assert "VERDICT: PASS" in run.stdout
    assert "run dir: my-run" in run.stdout.splitlines()  # relative to where it ran, as given
    results = json.loads((run_dir / "results.json").read_text())
    assert results["verdict"] == "PASS"
    assert [(t["name"], t["status"]) for t in results["tests"]] == [("fault_plain", "pass")]
    # The run wrote nothing into the installed package (what pip recorded, and Python's bytecode caches).
    (record,) = installed.site.glob("provision_and_validate-*.dist-info/RECORD")
    with record.open() as f:
        recorded = {row[0] for row in csv.reader(f)}
    written = {
        str(p.relative_to(installed.site))
        for p in (installed.site / "pav").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    assert written - recorded == set()


def test_without_the_files_the_error_says_where_it_looked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PAV_HOME", raising=False)
    package = tmp_path / "site-packages" / "pav"
    monkeypatch.setattr(paths, "CHECKOUT", tmp_path)
    monkeypatch.setattr(paths, "INSTALLED", package / "_project")
    monkeypatch.setattr(paths, "ROOT", paths.project_root())
    assert package / "_project" == paths.ROOT
    files = "the project's files (roles/, playbooks/, inventories/, ...)"
    fix = "install a wheel built from a checkout (pip wheel .) or set PAV_HOME to a checkout"
    assert paths.missing() == (
        f"{files} are not in {tmp_path} (a checkout) nor in {package / '_project'} (an installed wheel); "
        + fix
    )
    monkeypatch.setenv("PAV_HOME", str(tmp_path))
    monkeypatch.setattr(paths, "ROOT", paths.project_root())
    assert paths.missing() == f"{files} are not in PAV_HOME={tmp_path}; {fix}"


def test_from_the_checkout_nothing_changes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("PAV_HOME", raising=False)
    for name in ("PAV_RESULTS_ROOT", "PAV_RUNS"):
        monkeypatch.delenv(name, raising=False)
    assert paths.project_root() == ROOT and paths.from_checkout() and paths.missing() is None
    assert rundir.results_root() == ROOT / "runs"
    assert sim.installed_script() == {}
    # The installed copy: runs under the user's data folder, sim-hosts from the copy with this Python.
    monkeypatch.setattr(paths, "ROOT", paths.INSTALLED)
    monkeypatch.setattr(paths, "SCRIPTS", paths.INSTALLED / "scripts")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert not paths.from_checkout()
    assert rundir.results_root() == tmp_path / "provision-and-validate" / "runs"
    script = paths.INSTALLED / "scripts" / "sim-hosts"
    assert sim.installed_script() == {
        "sim_hosts_script": f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}"
    }
