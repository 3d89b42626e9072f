"""-e/--extra-vars as ansible-playbook takes them: key=value pairs, @file.yml, or a YAML/JSON mapping.

They reach every playbook (roles check them against their argument_specs) and, for pav_* keys, override the
env's driver settings. key=value values stay strings, as in Ansible; settings convert them like YAML."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import yaml

from pav.errors import PavError
from pav.yamlfile import load_mapping

# Set by the driver for each run (an override would point the run at another run's files), and where to
# set each instead.
DRIVER_OWNED = {
    "pav_run_id": "each run names itself",
    "pav_run_dir": "use --run-dir",
    "pav_payload_src": "the payload is the checkout's payload/",
    "torch_payload_installer": "the driver packs the checkout's payload/ for each run",
    "slurm_jobs_installer": "the driver packs the run's rendered job scripts for each validate",
    "torch_payload_async_dir": "the driver keeps the facts read's files in the run's folder on the host",
    "torch_payload_async_cleanup": "the driver skips it where the run's folder goes at teardown",
    "pav_mpi_needed": "MPI is set up where a planned test starts an MPI program; see pav_install_mpi",
    "pav_nccl_tests_needed": "nccl-tests is set up where a planned test runs it",
    "pav_state_dir": "set PAV_STATE_DIR",
    "pav_controller_python": "it is the Python running provision-and-validate",
    "pav_allow_missing": "use --allow-missing",
    "pav_install_dir": "it is pav_remote_dir, or the run's own folder when tuning runs in check mode",
}
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_FORMS = "key=value, @file.yml or a YAML mapping"


def parse_extra_vars(values: list[str]) -> dict[str, Any]:
    """Later values win, as with ansible-playbook's repeated -e."""
    merged: dict[str, Any] = {}
    for value in values:
        merged.update(_one(value.strip()))
    for key in merged:
        if not _NAME.match(str(key)):
            raise PavError(f"-e {key!r}: not a variable name; use letters, digits and _ ({_FORMS})")
        if key in DRIVER_OWNED:
            raise PavError(f"-e {key}: the driver sets it for each run; {DRIVER_OWNED[key]}")
    return merged


def _one(value: str) -> dict[str, Any]:
    if value.startswith("@"):
        return load_mapping(Path(value[1:]).expanduser())
    if value.startswith("{"):
        try:
            data = yaml.safe_load(value)
        except yaml.YAMLError:
            data = None
        if not isinstance(data, dict):
            raise PavError(f'-e {value!r}: not a valid mapping; write it as {{"key": value}} ({_FORMS})')
        return data
    pairs: dict[str, Any] = {}
    try:
        tokens = shlex.split(value)
    except ValueError as exc:  # an unclosed quote
        raise PavError(f"-e {value!r}: {exc}; close the quote ({_FORMS})") from None
    for token in tokens:
        key, sep, val = token.partition("=")
        if not sep or not key:
            raise PavError(f"-e {token!r}: expected {_FORMS}")
        pairs[key] = val
    if not pairs:
        raise PavError(f"-e needs a value: {_FORMS}")
    return pairs
