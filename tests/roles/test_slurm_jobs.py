"""roles/slurm_jobs as Ansible runs it on this machine: the driver's self-unpacking script and the role's own
copy (no script given) leave the same job scripts in the run's slurm/ folder, and a second run of the
driver's way changes nothing."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pav import paths
from pav.payload_installer import write_installer

pytestmark = pytest.mark.slow  # real ansible-playbook runs

JOBS = {"a.sbatch": "#!/bin/bash\nsrun hostname\n", "b.host-0.sbatch": "#!/bin/bash\nsrun true\n"}


def stage(rendered: Path, run_dir: Path, installer: str, tmp_path: Path) -> dict[str, str]:
    """Run the role once; what each of its tasks did on localhost (ok, changed, skipping)."""
    play = [{
        "name": "Stage", "hosts": "localhost", "connection": "local", "gather_facts": False,
        "roles": [{"role": str(paths.ROLES / "slurm_jobs"), "vars": {
            "slurm_jobs_src": f"{rendered}/", "slurm_jobs_run_dir": str(run_dir),
            "slurm_jobs_installer": installer,
        }}],
    }]  # fmt: skip
    playbook = tmp_path / "stage.yml"
    playbook.write_text(yaml.safe_dump(play))
    env = {**os.environ, "ANSIBLE_PYTHON_INTERPRETER": sys.executable, "ANSIBLE_NOCOWS": "1"}
    ansible = Path(sys.executable).parent / "ansible-playbook"
    proc = subprocess.run([str(ansible), "-i", "localhost,", str(playbook)], env=env, capture_output=True,
                          text=True, timeout=120, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    # The default callback's blocks: "TASK [ROLE_PATH : name] ***", then "ok:", "changed:" or "skipping:".
    found = re.findall(r"^TASK \[\S*slurm_jobs : (.+?)\] \**\n(ok|changed|skipping):", proc.stdout, re.M)
    return {task: did for task, did in found if not task.startswith("Validating arguments")}


def staged(run_dir: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted((run_dir / "slurm").iterdir())}


def test_the_script_and_the_copy_stage_the_same_scripts(tmp_path: Path) -> None:
    rendered = tmp_path / "run" / "slurm"
    rendered.mkdir(parents=True)
    for name, text in JOBS.items():
        (rendered / name).write_text(text)
    installer = write_installer(tmp_path / "slurm-jobs.sh", rendered, whole=False)

    first = stage(rendered, tmp_path / "by-script", str(installer), tmp_path)
    assert staged(tmp_path / "by-script") == JOBS
    unpack = "Unpack the run's job scripts on the host"
    assert first == {unpack: "changed", "Copy the job scripts": "skipping"}
    again = stage(rendered, tmp_path / "by-script", str(installer), tmp_path)
    assert again[unpack] == "ok", again
    # Only the slurm/ folder is replaced when the scripts change: the run's other work in its folder stays.
    (tmp_path / "by-script" / "results").mkdir()
    (tmp_path / "by-script" / "results" / "kept").write_text("")
    (tmp_path / "by-script" / "slurm" / "a.sbatch").write_text("#!/bin/bash\n")
    third = stage(rendered, tmp_path / "by-script", str(installer), tmp_path)
    assert third[unpack] == "changed" and staged(tmp_path / "by-script") == JOBS, third
    assert (tmp_path / "by-script" / "results" / "kept").exists()

    copied = stage(rendered, tmp_path / "by-copy", "", tmp_path)
    assert staged(tmp_path / "by-copy") == JOBS
    assert copied[unpack] == "skipping", copied
    assert copied["Create the run's slurm folder"] == copied["Copy the job scripts"] == "changed", copied
