"""pav_payload.slurm_check outside Slurm: each check writes one report per task and fails what it should."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from argparse import Namespace
from pathlib import Path
from typing import Any

import pytest
from pav_payload import slurm_check

from tests.conftest import PAYLOAD


def check(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    proc = subprocess.run(
        [sys.executable, "-m", "pav_payload.slurm_check", *args, "--out", str(tmp_path), "--test-id", "t"],
        env={**base, "PYTHONPATH": str(PAYLOAD), **(env or {})},
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    rank = (env or {}).get("SLURM_PROCID", "0")
    return proc.returncode, json.loads((tmp_path / f"t.rank{rank}.json").read_text())


def test_shared_fs_reads_the_writers_token(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("job 7 on n0 123\n")
    rc, report = check(
        tmp_path, "shared-fs", "--token-file", str(tmp_path / "token"), "--token", "job 7 on n0 123"
    )
    assert rc == 0 and report["status"] == "pass" and report["metrics"]["mismatches"] == 0
    assert report["kind"] == "slurm_check"


def test_shared_fs_fails_on_another_token_or_no_file(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("stale\n")
    rc, report = check(tmp_path, "shared-fs", "--token-file", str(tmp_path / "token"), "--token", "fresh")
    assert rc == 1 and report["status"] == "fail" and "'stale'" in report["reason"]
    rc, report = check(tmp_path, "shared-fs", "--token-file", str(tmp_path / "none"), "--token", "x",
                       env={"SLURM_PROCID": "3"})  # fmt: skip
    assert rc == 1 and report["rank"] == 3 and "cannot read" in report["reason"]


def test_cpu_binding_counts_the_affinity_mask(tmp_path: Path) -> None:
    allowed = len(os.sched_getaffinity(0))
    rc, report = check(tmp_path, "cpu-binding", "--cpus-per-task", str(allowed))
    assert rc == 0 and report["metrics"]["cpus_allowed"] == sorted(os.sched_getaffinity(0))
    rc, report = check(tmp_path / "more", "cpu-binding", "--cpus-per-task", str(allowed + 1))
    assert rc == 1 and report["metrics"]["mismatches"] == 1
    assert f"{allowed + 1} requested" in report["reason"]


def test_gpu_binding_without_gpus_fails(tmp_path: Path) -> None:
    rc, report = check(tmp_path, "gpu-binding", "--gpus-per-task", "1", env={"CUDA_VISIBLE_DEVICES": ""})
    assert rc == 1 and report["status"] == "fail" and "CUDA_VISIBLE_DEVICES=(unset)" in report["reason"]


def test_the_runs_shared_folder_is_made_private_or_refused(tmp_path: Path) -> None:
    """Issue 47: the folder every node's tasks start Python in, on a filesystem others can write."""
    from pav_payload.slurm_job import private_dir

    mine = tmp_path / "pav-run-0123456789abcdef"
    private_dir(mine)
    private_dir(mine)  # a later job of the same run
    assert mine.stat().st_mode & 0o777 == 0o700
    planted = tmp_path / "pav-run-planted"
    planted.mkdir(mode=0o777)
    planted.chmod(0o777)
    with pytest.raises(SystemExit, match=r"is not this user's private folder .*mode 777"):
        private_dir(planted)
    link = tmp_path / "pav-run-link"
    link.symlink_to(mine)
    with pytest.raises(SystemExit, match="someone else made it"):
        private_dir(link)


def test_a_task_publishes_its_cpus_whole_under_the_name_its_peers_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A peer globs the published names and reads each: the file is written aside and renamed, so no peer
    meets it empty (a JSONDecodeError failed slurm_cpu_binding once in the suite)."""
    for key, value in {"SLURM_PROCID": "0", "SLURM_NTASKS_PER_NODE": "1"}.items():
        monkeypatch.setenv(key, value)
    written: list[str] = []
    real_replace = os.replace

    def replace(src: Any, dst: Any) -> None:
        written.append(Path(src).name)
        assert not Path(dst).exists()  # the published name appears only by the rename, whole
        real_replace(src, dst)

    monkeypatch.setattr(slurm_check.os, "replace", replace)
    assert slurm_check._peers(Namespace(out=str(tmp_path), test_id="t"), "cpus", ["0", "1"]) == {}
    [published] = [p for p in tmp_path.iterdir()]
    assert written == [f".writing{published.name}"] and json.loads(published.read_text()) == ["0", "1"]
