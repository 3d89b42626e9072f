"""Running the tools the facts come from (nvidia-smi, dmesg, journalctl): exit code and output, never an
exception."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pav_payload.gpu_facts.decode import strip_ansi


@dataclass(frozen=True)
class CommandResult:
    rc: int
    stdout: str
    stderr: str

    def why(self) -> str:
        """The tool's own words for a failure, first line only."""
        text = (self.stderr.strip() or self.stdout.strip() or f"exit code {self.rc}").splitlines()[0]
        return f"{text} (exit code {self.rc})" if self.rc not in (0, 127) else text


Run = Callable[[Sequence[str], float], CommandResult]


def run_command(argv: Sequence[str], timeout_s: float) -> CommandResult:
    try:
        proc = subprocess.run(
            list(argv), capture_output=True, text=True, errors="replace", timeout=timeout_s, check=False
        )
    except FileNotFoundError:
        return CommandResult(127, "", f"{argv[0]} not found on PATH")
    except PermissionError as exc:
        return CommandResult(126, "", f"{argv[0]}: {exc}")
    except subprocess.TimeoutExpired:
        return CommandResult(124, "", f"{argv[0]} did not answer within {timeout_s:g} s")
    return CommandResult(proc.returncode, strip_ansi(proc.stdout), strip_ansi(proc.stderr))
