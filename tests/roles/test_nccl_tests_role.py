"""The nccl_tests role on this machine with real ansible-playbook: skip, prebuilt, nothing, build, download.
Each case is an inventory host of its own (local connection, its own variables and build cache), so that one
playbook run plays every case of a round: three runs in all, not one per play (issue 49).

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
from typing import Any, NamedTuple

import pytest

pytestmark = pytest.mark.slow  # real ansible-playbook runs

REPO = Path(__file__).resolve().parents[2]
PLAYBOOK = """\
- name: Run the nccl_tests role
  hosts: all
  gather_facts: false
  roles:
    - role: nccl_tests
  post_tasks:
    - name: Show nccl_tests_info
      ansible.builtin.debug:
        var: nccl_tests_info
"""
RECAP = r"^{host}\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)"  # a host's line
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


class Played(NamedTuple):
    """One host's play of the role: nccl_tests_info, the recap's changed count, the playbook's output."""

    info: dict[str, Any]
    changed: int
    out: str


class Rounds(NamedTuple):
    base: Path  # base/CASE: a case's folder
    plays: dict[str, list[Played]]  # per case, its plays in order
    cold_cache: bool  # whether the cache check's cache folder existed after its first (check mode) play


# One inventory host per case: what each test of this module plays.
SOURCE_CASES = ("built_once", "cache_check", "changed_input", "mpi", "no_gpu_required0", "no_gpu_required1")
CASES = (
    "no_gpu", "prebuilt", "nothing", "non_executable", "failed_build", "no_makefile", "download",
    "failed_download", *SOURCE_CASES,
)  # fmt: skip
NO_GPUS: tuple[dict[str, Any], ...] = ({}, {"preflight_facts": {"gpu": {"count": "0"}}})


def _plays(rounds: Rounds, case: str) -> list[Played]:
    return rounds.plays[case]


def play_round(base: Path, name: str, cases: dict[str, dict[str, Any]]) -> dict[str, Played]:
    """One ansible-playbook run of the role, one inventory host per case (all this machine, local connection,
    each with its own variables and build cache under base/CASE): the playbook starts once for every case
    of the round, not once per case (issue 49). A host's variables are the case's inputs; the role sets
    none of them (its set_facts have names of their own), so they act as the -e values they once were."""
    playbook = base / "play.yml"
    playbook.write_text(PLAYBOOK)
    hosts = {
        case: {
            "ansible_connection": "local",
            "ansible_python_interpreter": "/usr/bin/python3",
            "nccl_tests_cache_dir": str(base / case / "cache"),
            **extra_vars,
        }
        for case, extra_vars in cases.items()
    }
    inventory = base / f"{name}.yml"
    inventory.write_text(json.dumps({"all": {"hosts": hosts}}))  # JSON is YAML
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(REPO / "ansible" / "ansible.cfg"),
        "ANSIBLE_ROLES_PATH": str(REPO / "roles"),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_DEPRECATION_WARNINGS": "0",
    }
    argv = [str(REPO / ".venv" / "bin" / "ansible-playbook"), "-i", str(inventory), str(playbook)]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=base, timeout=300, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    played = {}
    for case in cases:
        recap = re.search(RECAP.format(host=case), proc.stdout, re.M)
        assert recap is not None, out
        played[case] = Played(_shown_fact(proc.stdout, case), int(recap.group(2)), out)
    return played


def _shown_fact(stdout: str, host: str) -> dict[str, Any]:
    task = stdout.index("TASK [Show nccl_tests_info]")
    start = stdout.index(f"ok: [{host}] => ", task) + len(f"ok: [{host}] => ")
    shown, _ = json.JSONDecoder().raw_decode(stdout[start:])
    return shown["nccl_tests_info"]


def fake_checkout(root: Path) -> Path:
    (root / "src").mkdir(parents=True)
    (root / "Makefile").write_text(FAKE_MAKEFILE)
    (root / "src" / "common.h").write_text(COMMON_H)
    return root


def the_build(case_dir: Path) -> Path:
    [build] = [p for p in (case_dir / "cache").iterdir() if not p.name.endswith(".tmp")]
    return build


def _tarball(case: Path) -> tuple[Path, str]:
    release = fake_checkout(case / "release" / "nccl-tests-2.19.6")
    tarball = case / "v2.19.6.tar.gz"
    with tarfile.open(tarball, "w:gz") as tar:
        tar.add(release, arcname="nccl-tests-2.19.6")
    return tarball, hashlib.sha256(tarball.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def played(tmp_path_factory: pytest.TempPathFactory) -> Rounds:
    """Every case's plays, in three rounds (a case that plays again does so in the next round, after what
    the test changes between its plays): per case its folder and its plays in order."""
    base = tmp_path_factory.mktemp("nccl-tests-role")
    d = {case: base / case for case in CASES}
    for case_dir in d.values():
        case_dir.mkdir()
    none = {case: {"nccl_tests_bin_dir": str(d[case] / "none")} for case in CASES}
    # Prepared hosts: a prebuilt binary, a non-executable one, source checkouts, a release tarball.
    build = d["prebuilt"] / "nccl-tests" / "build"
    build.mkdir(parents=True)
    (build / "all_reduce_perf").write_text("#!/bin/sh\n")
    (build / "all_reduce_perf").chmod(0o755)
    (d["prebuilt"] / "nccl-tests" / "src").mkdir()
    (d["prebuilt"] / "nccl-tests" / "src" / "common.h").write_text(COMMON_H)
    (d["non_executable"] / "build").mkdir()
    (d["non_executable"] / "build" / "all_reduce_perf").write_text("not a program")
    src = {case: fake_checkout(d[case] / "nccl-tests-src") for case in SOURCE_CASES}
    (d["failed_build"] / "src").mkdir()
    (d["failed_build"] / "src" / "Makefile").write_text(
        "all:\n\t@echo 'nvcc: No such file or directory' >&2; exit 2\n"
    )
    tarball, digest = _tarball(d["download"])
    built = {
        case: {**EIGHT_GPUS, **none[case], "nccl_tests_src_dir": str(src[case])} for case in SOURCE_CASES
    }
    check = {
        "nccl_tests_cache_write": False,
        "nccl_tests_private_build_dir": str(d["cache_check"] / "run" / "b"),
    }
    download = {
        **EIGHT_GPUS,
        **none["download"],
        "nccl_tests_src_url": tarball.as_uri(),
        "nccl_tests_src_checksum": f"sha256:{digest}",
        "nccl_tests_download_dir": str(d["download"] / "downloads"),
    }
    first = {
        "no_gpu": none["no_gpu"],
        "prebuilt": {**EIGHT_GPUS, "nccl_tests_bin_dir": str(build)},
        "nothing": {**EIGHT_GPUS, "nccl_tests_bin_dir": str(d["nothing"] / "nowhere" / "build")},
        "non_executable": {**EIGHT_GPUS, "nccl_tests_bin_dir": str(d["non_executable"] / "build")},
        "built_once": built["built_once"],
        "cache_check": built["cache_check"] | check,
        "changed_input": built["changed_input"],
        "mpi": built["mpi"] | {"nccl_tests_mpi": True, "nccl_tests_nccl_home": "/opt/nccl",
                               "nccl_tests_cuda_home": "/opt/cuda-12.8"},
        "failed_build": {**EIGHT_GPUS, **none["failed_build"],
                         "nccl_tests_src_dir": str(d["failed_build"] / "src")},
        "no_makefile": {**EIGHT_GPUS, **none["no_makefile"], "nccl_tests_src_dir": str(d["no_makefile"])},
        "download": download,
        "failed_download": {
            **EIGHT_GPUS,
            **none["failed_download"],
            "nccl_tests_src_url": (d["failed_download"] / "missing.tar.gz").as_uri(),
            "nccl_tests_download_dir": str(d["failed_download"] / "downloads"),
        },
        **{
            f"no_gpu_required{i}": {**gpus, **none[f"no_gpu_required{i}"], "nccl_tests_require_gpu": False,
                                    "nccl_tests_src_dir": str(src[f"no_gpu_required{i}"])}
            for i, gpus in enumerate(NO_GPUS)
        },
    }  # fmt: skip
    plays = {case: [p] for case, p in play_round(base, "first", first).items()}
    cold_cache = (d["cache_check"] / "cache").exists()
    # Between the plays: the changed input's source is patched (its content is an input of the build).
    (src["changed_input"] / "src" / "common.h").write_text(COMMON_H + "// patched\n")
    second = {  # again as before; the cache check's applied play fills the cache; the patched source
        case: first[case] for case in ("built_once", "changed_input", "download")
    } | {"cache_check": built["cache_check"]}
    for case, p in play_round(base, "second", second).items():
        plays[case].append(p)
    third = {
        "cache_check": first["cache_check"],
        "changed_input": first["changed_input"] | {"nccl_tests_rebuild": True},
    }
    for case, p in play_round(base, "third", third).items():
        plays[case].append(p)
    return Rounds(base, plays, cold_cache)


def test_no_gpu_skips_and_says_why(played: Rounds) -> None:
    [(info, changed, out)] = _plays(played, "no_gpu")
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


def test_prebuilt_binary_is_used(played: Rounds) -> None:
    build = played.base / "prebuilt" / "nccl-tests" / "build"
    [(info, changed, out)] = _plays(played, "prebuilt")
    assert info == {
        "available": True,
        "bin_dir": str(build),
        "mpi": False,
        "built_now": False,
        "reason": f"prebuilt nccl-tests in {build}",
        "version": "2.19.6",
    }
    assert changed == 0, out


def test_gpu_host_with_nothing_names_what_to_set(played: Rounds) -> None:
    missing = played.base / "nothing" / "nowhere" / "build"
    [(info, changed, out)] = _plays(played, "nothing")
    assert (info["available"], info["bin_dir"], info["version"]) == (False, "", "")
    assert f"{missing}/all_reduce_perf does not exist" in info["reason"]
    for variable in ("nccl_tests_bin_dir", "nccl_tests_src_dir", "nccl_tests_src_url"):
        assert variable in info["reason"]
    assert changed == 0, out


def test_non_executable_binary_is_not_used(played: Rounds) -> None:
    [(info, _, _)] = _plays(played, "non_executable")
    assert info["available"] is False and "is not an executable file" in info["reason"]


def test_source_checkout_is_built_once_into_the_cache(played: Rounds) -> None:
    case = played.base / "built_once"
    src = case / "nccl-tests-src"
    (info, changed, out), (again, changed_again, out_again) = _plays(played, "built_once")
    build = the_build(case)
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
    assert again == info | {"built_now": False, "reason": f"built from {src}, a cached build"}
    assert changed_again == 0, out_again
    # A cache hit costs no module run for make, nor a second look at the build.
    for task in ("Run make in the source folder", "Look for the built all_reduce_perf"):
        shown = out_again.split(f"TASK [nccl_tests : {task}]")[1].split("TASK [")[0]
        assert "skipping: [built_once]" in shown, shown


def test_a_cache_that_must_not_be_written_is_read_and_a_new_build_goes_to_the_run(
    played: Rounds,
) -> None:
    """Check mode (nccl_tests_cache_write false): a cached build of the same inputs is used; one the cache
    lacks is built into the private folder (the run's own) and the cache is left as it was."""
    private = played.base / "cache_check" / "run" / "b"
    # Cold (check mode), then an applied run that fills the cache, then check mode again.
    cold, warm, cached = _plays(played, "cache_check")
    assert cold.info["built_now"] is True and cold.info["bin_dir"].startswith(f"{private}/"), cold.out
    assert not played.cold_cache
    assert cached.info["bin_dir"] == warm.info["bin_dir"] and cached.info["built_now"] is False
    assert cached.changed == 0, cached.out


def test_a_changed_input_builds_anew_and_rebuild_forces_it(played: Rounds) -> None:
    # Between the first and the second play the source's content changed (an input of the build).
    first, patched, forced = _plays(played, "changed_input")
    assert patched.info["built_now"] is True and patched.info["bin_dir"] != first.info["bin_dir"]
    assert forced.info["built_now"] is True and forced.info["bin_dir"] == patched.info["bin_dir"]
    assert forced.changed == 1, forced.out


def test_build_passes_mpi_and_nccl_home(played: Rounds) -> None:
    [(info, _, _)] = _plays(played, "mpi")
    assert info["available"] is True
    assert (
        the_build(played.base / "mpi") / "make-args.txt"
    ).read_text() == "MPI=1 CUDA_HOME=/opt/cuda-12.8 NCCL_HOME=/opt/nccl\n"


def test_failed_build_is_recorded_not_fatal(played: Rounds) -> None:
    src = played.base / "failed_build" / "src"
    [(info, _, _)] = _plays(played, "failed_build")
    assert info["available"] is False
    # The compiler's complaint, not make's "*** Error 2" line after it.
    assert info["reason"].startswith(f"building nccl-tests in {src} failed (make exited 2: nvcc: No such")
    assert "nccl_tests_cuda_home" in info["reason"]


def test_src_dir_without_makefile(played: Rounds) -> None:
    [(info, _, _)] = _plays(played, "no_makefile")
    assert info["available"] is False
    assert info["reason"].startswith(f"nccl_tests_src_dir {played.base / 'no_makefile'} has no Makefile")


def test_release_download_with_checksum(played: Rounds) -> None:
    case = played.base / "download"
    downloads = case / "downloads"
    (info, changed, out), (again, changed_again, out_again) = _plays(played, "download")
    assert info == {
        "available": True,
        "bin_dir": str(the_build(case)),
        "mpi": False,
        "built_now": True,
        "reason": f"built from {downloads}/v2.19.6 now",
        "version": "2.19.6",
    }
    assert changed >= 3, out  # folder, tarball, unpack, make
    assert again == info | {"built_now": False, "reason": f"built from {downloads}/v2.19.6, a cached build"}
    assert changed_again == 0, out_again


def test_failed_download_is_recorded_not_fatal(played: Rounds) -> None:
    missing = played.base / "failed_download" / "missing.tar.gz"
    [(info, _, _)] = _plays(played, "failed_download")
    assert info["available"] is False
    assert info["reason"].startswith(f"downloading {missing.as_uri()} failed (")
    assert "nccl_tests_src_dir or nccl_tests_bin_dir" in info["reason"]


@pytest.mark.parametrize("gpus", range(len(NO_GPUS)), ids=[f"gpus{i}" for i in range(len(NO_GPUS))])
def test_require_gpu_false_installs_anyway(played: Rounds, gpus: int) -> None:
    [(info, _, _)] = _plays(played, f"no_gpu_required{gpus}")
    assert info["available"] is True and info["bin_dir"] == str(
        the_build(played.base / f"no_gpu_required{gpus}")
    )
