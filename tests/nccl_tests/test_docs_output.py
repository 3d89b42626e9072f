"""docs/check-nccl.md quotes check-nccl's output for a 2-node H100 all_reduce log: the real command on that
log (a recorded real run) prints it, line for line where the doc does not elide with `...`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli_here

LOG = ROOT / "tests" / "nccl_tests" / "fixtures" / "oci_h100_2node_all_reduce_perf.txt"
DOC = ROOT / "docs" / "check-nccl.md"


def doc_block(after: str, fence: str) -> str:
    text = DOC.read_text()
    start = text.index(fence, text.index(after)) + len(fence)
    return text[start : text.index("\n```", start)].strip("\n")


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    (tmp_path / "logs").mkdir()
    shutil.copy(LOG, tmp_path / "logs" / "all_reduce_perf.txt")
    return tmp_path


def check_nccl(where: Path, *args: str) -> str:
    path = str(where / "logs" / "all_reduce_perf.txt")
    run = run_cli_here("check-nccl", path, "--profile", "h100-sxm-8gpu", *args)
    assert run.rc == 0, run.stderr
    return run.stdout.replace(path, "logs/all_reduce_perf.txt")


def test_the_quoted_text_output_is_what_check_nccl_prints(logs: Path) -> None:
    printed = check_nccl(logs).splitlines()
    quoted = doc_block("Without `--json`", "```\n").splitlines()
    at = 0
    for line in quoted:
        if line.strip() == "...":
            continue
        assert line in printed[at:], f"the doc quotes {line!r}; check-nccl printed:\n" + "\n".join(printed)
        at = printed.index(line, at) + 1


def test_the_quoted_json_is_what_check_nccl_writes(logs: Path) -> None:
    [real] = json.loads(check_nccl(logs, "--json"))
    quoted = json.loads(doc_block("With `--json`", "```json\n"))[0]
    for key in ("file", "op", "status", "reason", "avg_busbw_gbps", "busbw_applicable"):
        assert real[key] == quoted[key], (key, real[key], quoted[key])
    assert real["devices"][0] == quoted["devices"][0]  # the doc shows the first of 16
    row = next(r for r in real["rows"] if r["size_bytes"] == quoted["rows"][0]["size_bytes"])
    assert row == quoted["rows"][0]
    assert set(quoted) == set(real), set(quoted) ^ set(real)  # every key the record has, and no other


def test_the_quoted_unreadable_log_is_what_check_nccl_writes() -> None:
    assert not (ROOT / "logs" / "missing.log").exists()
    run = run_cli_here("check-nccl", "logs/missing.log", "--json")
    assert run.rc == 2, run.stderr
    quoted = json.loads(doc_block("With `--json`", "```json\n"))[1]
    assert json.loads(run.stdout) == [quoted]
