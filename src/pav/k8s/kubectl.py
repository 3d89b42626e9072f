"""kubectl through subprocess: the one way the driver talks to a cluster (no Python client to install)."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pav.errors import PavError
from pav.tools import require_tool


@dataclass(frozen=True)
class Kubectl:
    kubeconfig: Path | None = None
    namespace: str = "default"
    binary: str = "kubectl"

    def argv(self, *args: str) -> list[str]:
        base = [self.binary, "--namespace", self.namespace]
        if self.kubeconfig is not None:
            base += ["--kubeconfig", str(self.kubeconfig)]
        return [*base, *args]

    def run(self, *args: str, stdin: str | None = None, check: bool = True, timeout_s: float = 120) -> str:
        require_tool(self.binary, "install kubectl (kubernetes.io/docs/tasks/tools) for --platform k8s")
        try:
            proc = subprocess.run(
                self.argv(*args), input=stdin, capture_output=True, text=True, timeout=timeout_s, check=False
            )
        except subprocess.TimeoutExpired:
            why = f"kubectl {args[0]} did not answer within {timeout_s:.0f}s; is the API reachable?"
            raise PavError(why) from None
        if check and proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise PavError(f"kubectl {' '.join(args[:2])} failed (exit {proc.returncode}): {last}")
        return proc.stdout

    def json(self, *args: str) -> dict[str, Any]:
        return json.loads(self.run(*args, "-o", "json"))
