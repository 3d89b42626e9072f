"""What every start of the driver pays: a dry run, a refused input or --help loads no library it does not use.

paramiko (with invoke and cryptography) and ansible_runner were ~0.15 CPU-s of each start, paid by every
dry run a user waits for and every driver the test suite starts (docs/benchmarks.md, session 13)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT

NOT_AT_START = ("paramiko", "ansible_runner")
PROBE = """
import json, sys
from pav.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(json.dumps(sorted(m for m in {names} if m in sys.modules)))
"""


@pytest.mark.parametrize(
    "argv",
    [("--env", "sim", "--dry-run"), ("--env", "local", "--dry-run"), ("--env", "no-such-env"), ("--help",)],
)
def test_a_start_that_runs_no_playbook_loads_neither_ssh_nor_runner(argv: tuple[str, ...]) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE.format(names=NOT_AT_START), *argv],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    loaded = json.loads(proc.stdout.strip().splitlines()[-1])
    assert loaded == [], proc.stderr[-2000:]
