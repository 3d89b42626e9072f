"""The nccl_tests role against localhost with real ansible-playbook: skip, prebuilt, nothing, build, download.

No CUDA here: "building" runs a stand-in Makefile that records its arguments and writes an executable
build/all_reduce_perf, which is all the role checks. The recorded fact is read from a debug task's output.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow  # real ansible-playbook runs

REPO = Path(__file__).resolve().parents[2]
PLAYBOOK = """\
- name: Run the nccl_tests role
  hosts: localhost
  gather_facts: false
  roles:
    - role: nccl_tests
  post_tasks:
    - name: Show nccl_tests_info
      ansible.builtin.debug:
        var: nccl_tests_info
"""
RECAP = re.compile(r"^localhost\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)
EIGHT_GPUS = {"preflight_facts": {"gpu": {"count": "8"}}}  # preflight records the count as a string
# A stand-in for nccl-tests' Makefile: records make's variables, writes $(BUILDDIR)/all_reduce_perf.
FAKE_MAKEFILE = """\
BUILDDIR ?= build
$(BUILDDIR)/all_reduce_perf:
\tmkdir -p $(BUILDDIR)
\techo "MPI=$(MPI) CUDA_HOME=$(CUDA_HOME) NCCL_HOME=$(NCCL_HOME)" > $(BUILDDIR)/make-args.txt
\tprintf '#!/bin/sh\\n' > $@
\tchmod +x $@
"""
COMMON_H = '#ifndef __COMMON_H__\n#define __COMMON_H__\n#define NCCL_TESTS_VERSION "2.19.6"\n'


def play(tmp_path: Path, extra_vars: dict[str, Any]) -> tuple[dict[str, Any], int, str]:
    """Run the role, its build cache under tmp_path; return nccl_tests_info, the changed count, the output."""
    playbook = tmp_path / "play.yml"
    playbook.write_text(PLAYBOOK)
    vars_file = tmp_path / "vars.json"
    cache = {"nccl_tests_cache_dir": str(tmp_path / "cache")}
    vars_file.write_text(
        json.dumps({"ansible_python_interpreter": "/usr/bin/python3", **cache, **extra_vars})
    )
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(REPO / "ansible" / "ansible.cfg"),
        "ANSIBLE_ROLES_PATH": str(REPO / "roles"),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_DEPRECATION_WARNINGS": "0",
    }
    argv = [str(REPO / ".venv" / "bin" / "ansible-playbook"), "-i", "localhost,", "-c", "local"]
    proc = subprocess.run(
        [*argv, "-e", f"@{vars_file}", str(playbook)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
        check=False,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    recap = RECAP.search(proc.stdout)
    assert recap is not None, out
    return _shown_fact(proc.stdout), int(recap.group(2)), out


def _shown_fact(stdout: str) -> dict[str, Any]:
    task = stdout.index("TASK [Show nccl_tests_info]")
    start = stdout.index("=> ", task) + len("=> ")
    shown, _ = json.JSONDecoder().raw_decode(stdout[start:])
    return shown["nccl_tests_info"]


def fake_checkout(root: Path) -> Path:
    (root / "src").mkdir(parents=True)
    (root / "Makefile").write_text(FAKE_MAKEFILE)
    (root / "src" / "common.h").write_text(COMMON_H)
    return root


def test_no_gpu_skips_and_says_why(tmp_path: Path) -> None:
    info, changed, out = play(tmp_path, {"nccl_tests_bin_dir": str(tmp_path / "none")})
    assert info == {
        "available": False,
        "bin_dir": "",
        "mpi": False,
        "built_now": False,
        "reason": info["reason"],
        "version": "",
    }
    assert info["reason"].startswith("no GPU on this host (preflight found 0)")
    assert changed == 0, out


def test_prebuilt_binary_is_used(tmp_path: Path) -> None:
    build = tmp_path / "nccl-tests" / "build"
    build.mkdir(parents=True)
    (build / "all_reduce_perf").write_text("#!/bin/sh\n")
    (build / "all_reduce_perf").chmod(0o755)
    (tmp_path / "nccl-tests" / "src").mkdir()
    (tmp_path / "nccl-tests" / "src" / "common.h").write_text(COMMON_H)
    info, changed, out = play(tmp_path, {**EIGHT_GPUS, "nccl_tests_bin_dir": str(build)})
    assert info == {
        "available": True,
        "bin_dir": str(build),
        "mpi": False,
        "built_now": False,
        "reason": f"prebuilt nccl-tests in {build}",
        "version": "2.19.6",
    }
    assert changed == 0, out


def test_gpu_host_with_nothing_names_what_to_set(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "build"
    info, changed, out = play(tmp_path, {**EIGHT_GPUS, "nccl_tests_bin_dir": str(missing)})
    assert (info["available"], info["bin_dir"], info["version"]) == (False, "", "")
    assert f"{missing}/all_reduce_perf does not exist" in info["reason"]
    for variable in ("nccl_tests_bin_dir", "nccl_tests_src_dir", "nccl_tests_src_url"):
        assert variable in info["reason"]
    assert changed == 0, out


def test_non_executable_binary_is_not_used(tmp_path: Path) -> None:
    build = tmp_path / "build"
    build.mkdir()
    (build / "all_reduce_perf").write_text("not a program")
    info, _, _ = play(tmp_path, {**EIGHT_GPUS, "nccl_tests_bin_dir": str(build)})
    assert info["available"] is False and "is not an executable file" in info["reason"]


def the_build(tmp_path: Path) -> Path:
    [build] = [p for p in (tmp_path / "cache").iterdir() if not p.name.endswith(".tmp")]
    return build


def test_source_checkout_is_built_once_into_the_cache(tmp_path: Path) -> None:
    src = fake_checkout(tmp_path / "nccl-tests-src")
    extra = {**EIGHT_GPUS, "nccl_tests_bin_dir": str(tmp_path / "none"), "nccl_tests_src_dir": str(src)}
    info, changed, out = play(tmp_path, extra)
    build = the_build(tmp_path)
    assert info == {
        "available": True,
        "bin_dir": str(build),
        "mpi": False,
        "built_now": True,
        "reason": f"built from {src} now",
        "version": "2.19.6",
    }
    assert changed == 1, out
    assert (build / "make-args.txt").read_text() == "MPI=0 CUDA_HOME=/usr/local/cuda NCCL_HOME=\n"
    assert not (src / "build").exists()  # the checkout stays as it was
    # Second run: the cache holds a build of the same inputs, make does not run again.
    again, changed_again, out_again = play(tmp_path, extra)
    assert again == info | {"built_now": False, "reason": f"built from {src}, a cached build"}
    assert changed_again == 0, out_again
    # A cache hit costs no module run for make, nor a second look at the build.
    for task in ("Run make in the source folder", "Look for the built all_reduce_perf"):
        shown = out_again.split(f"TASK [nccl_tests : {task}]")[1].split("TASK [")[0]
        assert "skipping: [localhost]" in shown, shown


def test_a_cache_that_must_not_be_written_is_read_and_a_new_build_goes_to_the_run(tmp_path: Path) -> None:
    """Check mode (nccl_tests_cache_write false): a cached build of the same inputs is used; one the cache
    lacks is built into the private folder (the run's own) and the cache is left as it was."""
    src = fake_checkout(tmp_path / "nccl-tests-src")
    private = tmp_path / "run" / "nccl-tests-build"
    extra = {**EIGHT_GPUS, "nccl_tests_bin_dir": str(tmp_path / "none"), "nccl_tests_src_dir": str(src)}
    check = extra | {"nccl_tests_cache_write": False, "nccl_tests_private_build_dir": str(private)}
    cold, _, out = play(tmp_path, check)
    assert cold["built_now"] is True and cold["bin_dir"].startswith(f"{private}/"), out
    assert not (tmp_path / "cache").exists()
    warm, _, _ = play(tmp_path, extra)  # an applied run fills the cache
    cached, changed, out = play(tmp_path, check)
    assert cached["bin_dir"] == warm["bin_dir"] and cached["built_now"] is False and changed == 0, out


def test_a_changed_input_builds_anew_and_rebuild_forces_it(tmp_path: Path) -> None:
    src = fake_checkout(tmp_path / "nccl-tests-src")
    extra = {**EIGHT_GPUS, "nccl_tests_bin_dir": str(tmp_path / "none"), "nccl_tests_src_dir": str(src)}
    first, _, _ = play(tmp_path, extra)
    (src / "src" / "common.h").write_text(COMMON_H + "// patched\n")  # the source's content is an input
    patched, _, _ = play(tmp_path, extra)
    assert patched["built_now"] is True and patched["bin_dir"] != first["bin_dir"]
    forced, changed, out = play(tmp_path, extra | {"nccl_tests_rebuild": True})
    assert forced["built_now"] is True and forced["bin_dir"] == patched["bin_dir"] and changed == 1, out


def test_build_passes_mpi_and_nccl_home(tmp_path: Path) -> None:
    src = fake_checkout(tmp_path / "src")
    extra = {
        **EIGHT_GPUS,
        "nccl_tests_bin_dir": str(tmp_path / "none"),
        "nccl_tests_src_dir": str(src),
        "nccl_tests_mpi": True,
        "nccl_tests_nccl_home": "/opt/nccl",
        "nccl_tests_cuda_home": "/opt/cuda-12.8",
    }
    info, _, _ = play(tmp_path, extra)
    assert info["available"] is True
    assert (
        the_build(tmp_path) / "make-args.txt"
    ).read_text() == "MPI=1 CUDA_HOME=/opt/cuda-12.8 NCCL_HOME=/opt/nccl\n"


def test_failed_build_is_recorded_not_fatal(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "Makefile").write_text("all:\n\t@echo 'nvcc: No such file or directory' >&2; exit 2\n")
    extra = {**EIGHT_GPUS, "nccl_tests_bin_dir": str(tmp_path / "none"), "nccl_tests_src_dir": str(src)}
    info, _, _ = play(tmp_path, extra)
    assert info["available"] is False
    # The compiler's complaint, not make's "*** Error 2" line after it.
    assert info["reason"].startswith(f"building nccl-tests in {src} failed (make exited 2: nvcc: No such")
    assert "nccl_tests_cuda_home" in info["reason"]


def test_src_dir_without_makefile(tmp_path: Path) -> None:
    extra = {**EIGHT_GPUS, "nccl_tests_bin_dir": str(tmp_path / "none"), "nccl_tests_src_dir": str(tmp_path)}
    info, _, _ = play(tmp_path, extra)
    assert info["available"] is False
    assert info["reason"].startswith(f"nccl_tests_src_dir {tmp_path} has no Makefile")


def test_release_download_with_checksum(tmp_path: Path) -> None:
    release = fake_checkout(tmp_path / "release" / "nccl-tests-2.19.6")
    tarball = tmp_path / "v2.19.6.tar.gz"
    with tarfile.open(tarball, "w:gz") as tar:
        tar.add(release, arcname="nccl-tests-2.19.6")
    digest = hashlib.sha256(tarball.read_bytes()).hexdigest()
    downloads = tmp_path / "downloads"
    extra = {
        **EIGHT_GPUS,
        "nccl_tests_bin_dir": str(tmp_path / "none"),
        "nccl_tests_src_url": tarball.as_uri(),
        "nccl_tests_src_checksum": f"sha256:{digest}",
        "nccl_tests_download_dir": str(downloads),
    }
    info, changed, out = play(tmp_path, extra)
    assert info == {
        "available": True,
        "bin_dir": str(the_build(tmp_path)),
        "mpi": False,
        "built_now": True,
        "reason": f"built from {downloads}/v2.19.6 now",
        "version": "2.19.6",
    }
    assert changed >= 3, out  # folder, tarball, unpack, make
    again, changed_again, out_again = play(tmp_path, extra)
    assert again == info | {"built_now": False, "reason": f"built from {downloads}/v2.19.6, a cached build"}
    assert changed_again == 0, out_again


def test_failed_download_is_recorded_not_fatal(tmp_path: Path) -> None:
    extra = {
        **EIGHT_GPUS,
        "nccl_tests_bin_dir": str(tmp_path / "none"),
        "nccl_tests_src_url": (tmp_path / "missing.tar.gz").as_uri(),
        "nccl_tests_download_dir": str(tmp_path / "downloads"),
    }
    info, _, _ = play(tmp_path, extra)
    assert info["available"] is False
    assert info["reason"].startswith(f"downloading {(tmp_path / 'missing.tar.gz').as_uri()} failed (")
    assert "nccl_tests_src_dir or nccl_tests_bin_dir" in info["reason"]


@pytest.mark.parametrize("gpus", [{}, {"preflight_facts": {"gpu": {"count": "0"}}}])
def test_require_gpu_false_installs_anyway(tmp_path: Path, gpus: dict[str, Any]) -> None:
    src = fake_checkout(tmp_path / "src")
    extra = {**gpus, "nccl_tests_require_gpu": False, "nccl_tests_src_dir": str(src)}
    extra["nccl_tests_bin_dir"] = str(tmp_path / "none")
    info, _, _ = play(tmp_path, extra)
    assert info["available"] is True and info["bin_dir"] == str(the_build(tmp_path))
