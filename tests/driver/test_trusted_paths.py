"""What the driver trusts on the controller (issue 62): the project's files (a checkout, PAV_HOME, an
installed wheel's copy) and the state dir drive every run, as root on the hosts. A checkout is only this
package's own; a folder another account owns or can write is refused in one line, never used."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pav import paths
from tests.conftest import ROOT, run_cli, run_cli_here
from tests.docs_quotes import assert_documented

NOBODY = 65534
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="another user's folders need root (CI runs as root)")


def test_a_playbooks_folder_beside_an_installed_package_is_not_a_checkout(tmp_path: Path) -> None:
    """An installed wheel took site-packages/.. for a checkout when it held playbooks/: whoever could make
    that folder chose the roles the run used. Only a folder whose src/pav is the running package is one."""
    lib = tmp_path / "lib"
    shutil.copytree(
        paths.PACKAGE, lib / "site-packages" / "pav", ignore=shutil.ignore_patterns("__pycache__")
    )
    (lib / "playbooks").mkdir()  # planted beside site-packages
    env = {k: v for k, v in os.environ.items() if k not in ("PAV_HOME", "PYTHONPATH")}
    site = lib / "site-packages"
    code = f"import sys; sys.path.insert(0, {str(site)!r}); from pav import paths; print(paths.ROOT)"
    done = subprocess.run(
        [sys.executable, "-I", "-c", code],
        env=env, capture_output=True, text=True, check=True, cwd="/",
    )  # fmt: skip
    assert done.stdout.strip() == str(lib / "site-packages" / "pav" / "_project")
    assert paths.is_checkout(ROOT) and not paths.is_checkout(lib)


def home_copy(tmp_path: Path) -> Path:
    """A project root of its own: the checkout's run-time folders, linked."""
    home = tmp_path / "home"
    home.mkdir()
    for folder in ("playbooks", "roles", "inventories", "thresholds", "payload", "ansible", "templates"):
        (home / folder).symlink_to(ROOT / folder)
    return home


@as_root
def test_pav_home_another_account_owns_is_refused_naming_it(tmp_path: Path) -> None:
    home = home_copy(tmp_path)
    os.chown(home, NOBODY, NOBODY)
    done = run_cli("--dry-run", env={"PAV_HOME": str(home)})
    assert (done.rc, done.stdout) == (2, ""), done.stdout + done.stderr
    assert done.stderr == (
        f"error: PAV_HOME {home}: {home} is owned by nobody (uid {NOBODY}), mode 755, so another account "
        "could change what this run does; it must be owned by root and writable by no one else: chown it or "
        "chmod go-w it\n"
    )
    assert_documented(done.stderr.strip())


def test_a_project_root_others_can_write_is_refused(tmp_path: Path) -> None:
    home = home_copy(tmp_path)
    home.chmod(0o777)
    done = run_cli("--dry-run", env={"PAV_HOME": str(home)})
    assert done.rc == 2 and done.stderr.startswith(f"error: PAV_HOME {home}: {home} is owned by "), (
        done.stderr
    )
    assert "mode 777, so another account could change what this run does" in done.stderr


@as_root
def test_a_state_dir_another_account_owns_is_refused(tmp_path: Path) -> None:
    """It was used as it was (make_private chmods only its own user's): another account's Terraform state,
    keep records and cluster key would drive the run."""
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    os.chown(state, NOBODY, NOBODY)
    done = run_cli_here("--env", "local", "--dry-run", env={"PAV_STATE_DIR": str(state)})
    assert (done.rc, done.stdout) == (2, ""), done.stdout + done.stderr
    assert done.stderr.startswith(
        f"error: state dir {state}: {state} is owned by nobody (uid {NOBODY}), mode 700"
    )


@as_root
def test_make_private_refuses_a_state_folder_another_account_made(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    os.chown(state, NOBODY, NOBODY)
    with pytest.raises(paths.PavError, match=rf"^state dir {state} is owned by nobody \(uid {NOBODY}\)"):
        paths.make_private(state)
