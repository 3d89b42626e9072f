"""Every setting the tool reads is checked wherever it is written (issue 64): for each driver setting
(Settings' fields) and each k8s job setting (templates/k8s/defaults.yml), in each place a user writes one,
a bad value and a misspelt key are refused in one line naming the place and the key, and a valid value
takes effect; a place the driver does not read a setting from refuses it, naming where it belongs.

The cases are generated from the settings' own registry (pav.setting_keys): a new setting is tested in every
place without a line here, and one the samples below cannot give a valid value fails the test. The run's
own path, in process: cli.make_context, which loads the settings and resolves the run's inputs (an unknown
test in pav_tests, a threshold profile) as the dry run and a real run do before anything else."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pav import cli
from pav.driver_settings import GPU_LEFTOVERS, LAUNCHERS, PLATFORMS, Settings, driver_defaults
from pav.errors import PavError
from pav.k8s_settings import CLEAN_POD_POLICIES, JOB_APIS, defaults_file
from pav.setting_keys import PREFIXES, driver_keys, k8s_keys, reader
from tests.docs_quotes import assert_documented

HOST = "box1"
CHOICES: dict[str, tuple[str, ...]] = {
    "pav_launcher": LAUNCHERS, "pav_platform": PLATFORMS, "pav_gpu_leftovers": GPU_LEFTOVERS,
    "k8s_job_api": JOB_APIS, "k8s_clean_pod_policy": CLEAN_POD_POLICIES,
}  # fmt: skip
# A valid value other than the default, where the default's type gives none (a name, a mapping's keys).
VALID: dict[str, Any] = {
    "pav_threshold_profile": "cpu",
    "pav_tests": ["gpu_probe"],
    "pav_apply_tuning": True,  # an own inventory's default is false (its hosts are someone's)
    "pav_test_timeouts_s": {"gpu_probe": 60},
    "pav_gpu_state": {"mig_mode": "any"},
    "pav_expected_versions": {"driver": "580.95.05"},
    "pav_declared_hardware": {"pcie_gen": 5},
    "k8s_node_preset": "8gpu-160vcpu-1600gb",
    "k8s_memory_request_fraction": 0.5,
    "k8s_node_selector": {"pool": "gpu"},
}
# Values of the right type that the tool refuses all the same (beside each setting's value of a wrong type).
REFUSED: dict[str, Any] = {
    "pav_threshold_profile": "no_such_profile",
    "pav_tests": ["no_such_test"],
    "pav_test_timeouts_s": {"no_such_test": 60},
    "pav_test_timeout_s": 0,
    "pav_cpu_procs_per_host": 0,
    "pav_hosts": 0,
    "pav_burn_in_s": -1,
    "pav_gpu_state": {"mig_mode": "sometimes"},
    "pav_expected_versions": {"cuda": "12.8"},
    "pav_declared_hardware": {"pcie_generation": 5},
    "k8s_node_preset": "big",
    "k8s_memory_request_fraction": 1.5,
    "k8s_cpu_reserved": 1000,
}
# The flags a valid value needs beside it: the k8s platform runs GPU tests only.
FLAGS = {"pav_platform": ("--tests", "torch_nccl_allreduce")}


def defaults() -> dict[str, Any]:
    return driver_defaults() | defaults_file()


def registry() -> list[str]:
    return sorted(driver_keys() | k8s_keys())


def valid(key: str) -> Any:
    default = defaults()[key]
    if key in VALID:
        return VALID[key]
    if key in CHOICES:
        return next(c for c in CHOICES[key] if c != default)
    if isinstance(default, bool):
        return not default
    if isinstance(default, int | float):
        return default + 1
    if isinstance(default, str):
        return f"{default}-x" if default else "x"
    raise AssertionError(f"{key}: add a valid value other than its default {default!r} to VALID")


def wrong_type(key: str) -> Any:
    """A value of another type than the setting's, however the place writes it (INI, -e key=value)."""
    default = defaults()[key]
    if isinstance(default, bool):
        return "maybe"
    if isinstance(default, int | float):
        return "many"
    return 5 if isinstance(default, str) else ["x"] if isinstance(default, dict) else "x"


def bad_values(key: str) -> list[Any]:
    return [
        wrong_type(key),
        *([REFUSED[key]] if key in REFUSED else []),
        *(["no_such"] if key in CHOICES else []),
    ]


def misspelt(key: str) -> str:
    """The key with a letter of its name doubled, as pav_threshhold_profile."""
    prefix = next(p for p in PREFIXES if key.startswith(p))
    name = key.removeprefix(prefix)
    at = len(name) // 2
    return f"{prefix}{name[:at]}{name[at]}{name[at:]}"


# --- the places -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Written:
    hosts: Path  # the inventory file
    source: str  # what a refusal names first
    extra: tuple[str, ...] = ()  # -e


def _yaml(tmp: Path, all_vars: dict[str, Any], host_vars: dict[str, Any] | None = None) -> Path:
    host = {"ansible_connection": "local", **(host_vars or {})}
    (tmp / "hosts.yml").write_text(json.dumps({"all": {"vars": all_vars, "hosts": {HOST: host}}}))
    return tmp / "hosts.yml"


def _ini_line(key: str, value: Any) -> str:
    return f"{key}={value!r}"  # Python's literal, as Ansible's INI plugin reads it


def inventory_yaml(tmp: Path, key: str, value: Any) -> Written:
    hosts = _yaml(tmp, {key: value})
    return Written(hosts, f"{hosts} (all.vars)")


def inventory_ini(tmp: Path, key: str, value: Any) -> Written:
    hosts = tmp / "hosts.ini"
    hosts.write_text(f"{HOST} ansible_connection=local\n[all:vars]\n{_ini_line(key, value)}\n")
    return Written(hosts, f"{hosts} ([all:vars])")


def group_vars(tmp: Path, key: str, value: Any) -> Written:
    """The shipped envs' form: group_vars/all/pav.yml, k8s.yml."""
    folder = tmp / "group_vars" / "all"
    folder.mkdir(parents=True)
    (folder / f"{reader(key)}.yml").write_text(json.dumps({key: value}))
    return Written(_yaml(tmp, {}), str(folder / f"{reader(key)}.yml"))


def extra_vars(tmp: Path, key: str, value: Any) -> Written:
    return Written(_yaml(tmp, {}), "-e", ("-e", json.dumps({key: value})))


def host_vars(tmp: Path, key: str, value: Any) -> Written:
    (tmp / "host_vars").mkdir()
    (tmp / "host_vars" / f"{HOST}.yml").write_text(json.dumps({key: value}))
    return Written(_yaml(tmp, {}), str(tmp / "host_vars" / f"{HOST}.yml"))


def inventory_host(tmp: Path, key: str, value: Any) -> Written:
    hosts = _yaml(tmp, {}, {key: value})
    return Written(hosts, f"{hosts} (all.hosts.{HOST})")


def inventory_ini_group(tmp: Path, key: str, value: Any) -> Written:
    hosts = tmp / "hosts.ini"
    hosts.write_text(f"[gpu]\n{HOST} ansible_connection=local\n[gpu:vars]\n{_ini_line(key, value)}\n")
    return Written(hosts, f"{hosts} ([gpu:vars])")


Place = Callable[[Path, str, Any], Written]
READ: tuple[Place, ...] = (inventory_yaml, inventory_ini, group_vars, extra_vars)  # the group all, and -e
NOT_READ: tuple[Place, ...] = (host_vars, inventory_host, inventory_ini_group)  # a host's, another group's
EVERY = READ + NOT_READ


def load(tmp: Path, place: Place, key: str, value: Any) -> tuple[Written, Settings | str]:
    """The settings as the run reads them, or its one-line refusal."""
    written = place(tmp, key, value)
    argv = ["--inventory", str(written.hosts), *written.extra, *FLAGS.get(key, ())]
    try:
        return written, cli.make_context(cli.build_parser().parse_args(argv)).settings
    except PavError as exc:
        assert "\n" not in str(exc)
        return written, str(exc)


def unset(tmp: Path) -> Settings:
    """An own inventory's settings where nothing sets one: what a valid value must change."""
    tmp.mkdir()
    return cli.make_context(cli.build_parser().parse_args(["--inventory", str(_yaml(tmp, {}))])).settings


def value_of(settings: Settings, key: str) -> Any:
    if reader(key) == "k8s":
        return getattr(settings.k8s, key.removeprefix("k8s_"))
    return getattr(settings, key.removeprefix("pav_"))


def where_it_belongs(written: Written, key: str) -> str:
    label = "[all:vars]" if written.hosts.suffix == ".ini" else "all.vars"
    home = written.hosts.parent / "group_vars" / "all.yml"
    return (
        f"{written.source}: {key} is a setting of the whole run, read for the group all only; move it to "
        f"{label} of {written.hosts}, or {home}"
    )


CASES = [pytest.param(key, place, id=f"{key}-{place.__name__}") for key in registry() for place in EVERY]


@pytest.fixture(autouse=True)
def _no_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAV_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("PAV_RESULTS_ROOT", str(tmp_path / "runs"))


@pytest.mark.parametrize(("key", "place"), CASES)
def test_a_valid_value_takes_effect_where_the_driver_reads_it(tmp_path: Path, key: str, place: Place) -> None:
    written, read = load(tmp_path, place, key, valid(key))
    if place in NOT_READ:
        assert read == where_it_belongs(written, key)
        in_the_file(written, read)
        return
    assert isinstance(read, Settings), read
    assert value_of(read, key) == valid(key) != value_of(unset(tmp_path / "unset"), key)
    assert read.origins[key] == written.source


@pytest.mark.parametrize(("key", "place"), CASES)
def test_a_bad_value_is_refused_naming_the_place_and_the_key(tmp_path: Path, key: str, place: Place) -> None:
    for n, bad in enumerate(bad_values(key)):
        (case := tmp_path / str(n)).mkdir()
        written, read = load(case, place, key, bad)
        assert isinstance(read, str), f"{key}={bad!r} in {written.source} was taken"
        assert read.startswith(f"{written.source}: ") or f" of {written.source}" in read, read
        assert key in read, read


@pytest.mark.parametrize(("key", "place"), CASES)
def test_a_misspelt_key_is_refused_naming_the_right_one(tmp_path: Path, key: str, place: Place) -> None:
    written, read = load(tmp_path, place, misspelt(key), valid(key))
    assert read == f"{written.source}: unknown setting {misspelt(key)}; did you mean {key}?"
    in_the_file(written, read)


def in_the_file(written: Written, said: str) -> None:
    """What docs/reliability.md quotes of a refusal in the inventory file (`FILE (all.vars): ...`)."""
    if written.source.endswith(")") and " host " not in written.source:
        assert_documented(f"error: {said}")


def test_the_registry_is_what_the_loader_reads() -> None:
    """Each driver setting is a field of Settings, each job setting a key of templates/k8s/defaults.yml."""
    assert {k for k in registry() if reader(k) == "pav"} == set(driver_defaults())
    assert {k for k in registry() if reader(k) == "k8s"} == set(defaults_file())
    assert len(registry()) > 30
