"""Every key under the prefixes the tool owns, pav_ and k8s_, that an env's settings file or -e may hold:
one place, so that a misspelt key stops the run, naming the nearest known one, instead of being ignored.

The families:

- the driver's settings: the fields of `pav.driver_settings.Settings`, each read as `pav_<field>`;
- the Ansible side's `pav_*` keys: those only playbooks read, which an env or -e sets (`ANSIBLE_KEYS`); those
  the driver passes to the playbooks itself on each run (`RUN_VARS`); the host variables of the inventories
  it writes for hosts it created (`HOST_VARS`);
- the Kubernetes job settings: the `k8s_*` keys of templates/k8s/defaults.yml (`pav.k8s_settings`).

Other keys (ansible_*, role variables such as nccl_env_fabric or torch_payload_python) are Ansible's and the
roles' own: each role checks its variables against its meta/argument_specs.yml.
tests/driver/test_setting_keys.py fails when roles/, playbooks/ or templates/ use a pav_* key not listed here.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Any

from pav import paths
from pav.driver_settings import PREFIX as DRIVER_PREFIX
from pav.driver_settings import key_fields
from pav.errors import PavError
from pav.k8s_settings import K8S_DEFAULTS, defaults_file
from pav.k8s_settings import PREFIX as K8S_PREFIX

PREFIXES = (DRIVER_PREFIX, K8S_PREFIX)

# pav_* keys only the playbooks read: an env's group_vars or -e sets them (docs/configuration.md).
ANSIBLE_KEYS = {
    "pav_become": "playbooks/configure.yml: become root for configure's plays (default true)",
    "pav_install_mpi": "playbooks/configure.yml: false leaves the mpi role out (default true)",
    "pav_slurm_setup": "playbooks/configure.yml: with --launcher slurm, bring Slurm up with the slurm role "
    "(default false)",
}

# pav_* keys the driver passes to the playbooks itself on each run (pav.context.RunContext.extravars, the
# configure and validate stages); what -e may not set of them is pav.extravars.DRIVER_OWNED. The driver's
# settings it passes too (pav_remote_dir, pav_apply_tuning, pav_launcher) are Settings fields.
RUN_VARS = {
    "pav_run_id": "the run's id: names its folder on the hosts",
    "pav_run_dir": "the run's folder on the controller",
    "pav_install_dir": "where the payload, MPI program and nccl-tests go on the hosts",
    "pav_payload_src": "the checkout's payload/",
    "pav_allow_missing": "--allow-missing: hosts preflight may lose before it stops every host",
    "pav_state_dir": "the state dir that outlives runs (mpirun's cluster key, Slurm's munge key)",
    "pav_controller_python": "the driver's Python: hosts sharing this machine's filesystem run the payload",
    "pav_mpi_needed": "configure: whether the mpi role runs (a planned test starts an MPI program)",
    "pav_nccl_tests_needed": "configure: whether the nccl_tests role runs (a planned test runs nccl-tests)",
    "pav_launches": "validate: the launches the driver planned (roles/run_tests)",
    "pav_counter_hosts": "validate: hosts that read their error counters again after the tests",
    "pav_validate_collects": "validate: its playbook also collects the results",
    "pav_validate_tears_down": "validate: its playbook also removes the run's folder on the hosts",
    "pav_slurm_drains": "--on-fail drain: host -> the drain reason (playbooks/slurm_drain.yml)",
    "pav_slurm_state": "--on-fail drain, --recheck: DRAIN or RESUME (playbooks/slurm_drain.yml)",
}

# Host variables of the inventory the driver writes for the hosts it created (pav.provisioning.hosts);
# pav_private_ip also in an own inventory: the address the hosts reach each other on.
HOST_VARS = {
    "pav_private_ip": "the address the hosts reach each other on",
    "pav_gpus": "the GPUs the host was created with",
    "pav_fabric": "the fabric the host was created on",
}
# Host variables an own inventory may set for the driver (docs/isolation.md).
OWN_HOST_VARS = {
    "pav_rack": "the host's rack or leaf switch: isolation crosses its uplink with one pair a round",
}


def driver_keys() -> frozenset[str]:
    return frozenset(f"{DRIVER_PREFIX}{f.name}" for f in key_fields())


def k8s_keys() -> frozenset[str]:
    return frozenset(defaults_file())


def known_keys() -> frozenset[str]:
    """Every pav_* and k8s_* key an env's settings file or -e may hold."""
    return (
        driver_keys()
        | ANSIBLE_KEYS.keys()
        | RUN_VARS.keys()
        | HOST_VARS.keys()
        | OWN_HOST_VARS.keys()
        | k8s_keys()
    )


def reader(key: str) -> str:
    """Who reads a key: "pav" (the driver's settings), "k8s" (the job settings) or "roles" (Ansible: role
    variables, ansible_*, the playbooks' pav_* keys). The key's file in group_vars/all/ is READER.yml."""
    if key in driver_keys():
        return "pav"
    return "k8s" if key in k8s_keys() else "roles"


def nearest(key: str, known: Iterable[str]) -> str | None:
    """The known key closest to a misspelt one, compared without the prefix they share (pav_, k8s_)."""
    prefix = next((p for p in PREFIXES if key.startswith(p)), "")
    same = {k.removeprefix(prefix): k for k in known if k.startswith(prefix)}
    found = difflib.get_close_matches(key.removeprefix(prefix), list(same), n=1, cutoff=0.6)
    return same[found[0]] if found else None


def unknown_key(source: str, key: str, known: Iterable[str]) -> PavError:
    """`SOURCE: unknown setting KEY; did you mean NEAREST?`, or where the keys of its family are listed."""
    guess = nearest(key, known)
    if guess:
        return PavError(f"{source}: unknown setting {key}; did you mean {guess}?")
    listed = K8S_DEFAULTS.relative_to(paths.ROOT) if key.startswith(K8S_PREFIX) else "docs/configuration.md"
    return PavError(f"{source}: unknown setting {key}; the {key[:4]}* keys are listed in {listed}")


def refuse_unknown(data: Mapping[str, Any], source: str) -> None:
    """Stop at the first pav_* or k8s_* key of `data` that no family knows (in the file's order)."""
    known = known_keys()
    for key in data:
        if isinstance(key, str) and key.startswith(PREFIXES) and key not in known:
            raise unknown_key(source, key, known)


def refuse_outside_all(data: Mapping[str, Any], source: str, homes: Mapping[str, str]) -> None:
    """Another group's or a host's variables: an unknown key, as anywhere, and a driver setting or k8s job
    setting, which is the whole run's (one launcher, one set of tests, one job namespace) and read for the
    group all only: said where it belongs (homes: reader -> where), not dropped."""
    refuse_unknown(data, source)
    for key in data:
        who = reader(key) if isinstance(key, str) else "roles"
        if who != "roles":
            raise PavError(
                f"{source}: {key} is a setting of the whole run, read for the group all only; move it to "
                f"{homes[who]}"
            )
