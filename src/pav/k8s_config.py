"""A k8s env's job settings (k8s_*): what pav.settings' one load of the env reads (typed in pav.k8s_settings).
A run reads them from its context (ctx.settings.k8s); this is for a caller that has only the env's folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pav.k8s_settings import K8sSettings
from pav.settings import load_settings


def load_config(inventory_dir: Path, extra_vars: dict[str, Any] | None = None) -> K8sSettings:
    """defaults.yml, then the env's files, then -e's k8s_* keys."""
    return load_settings(inventory_dir, extra_vars).k8s
