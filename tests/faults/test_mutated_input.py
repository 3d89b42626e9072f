"""Mutated input files (an inventory, an env's group_vars, a Nebius values file) given to the CLI with
--dry-run, 200 of each kind: every one ends in exit 0 (the mutation left a valid file), or exit 2 with one
`error:` line naming the file, and the key a wrong value was set under. Never a traceback.

In-process (pav.cli.main) for speed; each example writes its files into a fresh folder, and the signal
handlers main installs are put back after the test."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pav import cli, paths
from tests.conftest import ROOT
from tests.driver.signals import handlers_given_back

pytestmark = pytest.mark.slow  # hundreds of generated inputs through the real CLI

BASES = {
    "inventory": "all:\n  hosts:\n    localhost:\n      ansible_connection: local\n",
    "group_vars": (ROOT / "inventories" / "sim" / "group_vars" / "all" / "pav.yml").read_text(),
    "tfvars": (ROOT / "inventories" / "nebius-eu" / "terraform.yml.example").read_text(),
}
SETTINGS = [
    "pav_tests", "pav_threshold_profile", "pav_apply_tuning", "pav_test_timeout_s", "pav_cpu_procs_per_host",
    "pav_remote_dir", "pav_rdzv_port", "pav_hosts", "pav_ssh_timeout_s",
]  # fmt: skip
TFVARS = [
    "parent_id",
    "infiniband_fabric",
    "preset",
    "public_ip",
    "boot_disk_size_gib",
    "labels",
    "node_count",
]
INVENTORY_KEYS = ["all", "hosts", "children", "vars"]
BREAKERS = [
    "[", "{", "]", "}", ": :", '"', "'", "\t", "- - [", "*nope", "&a [", "%YAML 9\n", "@", "`", "? ",
    "\x00", "\x07", "key: [unclosed\n", ":\n  - a\n b", "!!python/object:os.system\n",
]  # fmt: skip
GOOD_GROUP_VARS = "pav_tests: [torch_gloo_allreduce]\npav_threshold_profile: cpu\n"

values = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**40), 2**40), st.floats(allow_nan=True),
    st.text(max_size=12), st.lists(st.one_of(st.integers(), st.text(max_size=8)), max_size=3),
    st.dictionaries(st.text(max_size=6), st.integers(), max_size=2),
)  # fmt: skip


@dataclass(frozen=True)
class Mutation:
    kind: str
    key: str = ""


@st.composite
def mutated(draw: st.DrawFn, target: str) -> tuple[str, Mutation, bytes]:
    text = BASES[target]
    kind = draw(st.sampled_from(["break", "truncate", "top_level", "set_key", "bad_bytes", "names"]))
    if kind == "break":
        at = draw(st.integers(0, len(text)))
        return target, Mutation(kind), (text[:at] + draw(st.sampled_from(BREAKERS)) + text[at:]).encode()
    if kind == "truncate":
        return target, Mutation(kind), text[: draw(st.integers(0, len(text)))].encode()
    if kind == "top_level":
        top = draw(st.one_of(st.lists(st.integers(), max_size=3), st.integers(), st.text(max_size=10)))
        return target, Mutation(kind), yaml.safe_dump(top).encode()
    if kind == "bad_bytes":
        at = draw(st.integers(0, len(text)))
        return target, Mutation(kind), text[:at].encode() + b"\xff\xfe" + text[at:].encode()
    data = yaml.safe_load(text)
    if kind == "names":  # unknown test and profile names
        key = draw(st.sampled_from(["pav_tests", "pav_threshold_profile"]))
        name = draw(st.text(alphabet="abcxyz_-./ ", min_size=1, max_size=12))
        data = {**(data or {}), key: [name] if key == "pav_tests" else name}
        return target, Mutation(kind, key), yaml.safe_dump(data).encode()
    keys = {"group_vars": SETTINGS, "tfvars": TFVARS, "inventory": ["all", "hosts", "children", "vars"]}[
        target
    ]
    key = draw(st.sampled_from(keys))
    if target == "inventory" and key != "all":
        data["all"][key] = draw(values)
    else:
        data[key] = draw(values)
    return target, Mutation("set_key", key), yaml.safe_dump(data).encode()


@pytest.fixture
def restored_signals() -> Iterator[None]:
    with handlers_given_back():
        yield


def place(base: Path, target: str, content: bytes) -> tuple[list[str], Path, dict[str, str]]:
    """The CLI arguments, the file that holds the mutation, and the environment of one example."""
    env = {"PAV_STATE_DIR": str(base / "state"), "NEBIUS_IAM_TOKEN": "fuzz-token"}
    if target == "tfvars":
        path = base / "terraform.yml"
        path.write_bytes(content)
        return ["--env", "nebius-eu"], path, env | {"PAV_TFVARS": str(path)}
    if target == "group_vars":  # the sim env, with the driver's file of its group_vars replaced
        sim = base / "inventories" / "sim"
        shutil.copytree(ROOT / "inventories" / "sim", sim)
        path = sim / "group_vars" / "all" / "pav.yml"
        path.write_bytes(content)
        return ["--env", "sim"], path, env
    path = base / "hosts.yml"
    path.write_bytes(content)
    (base / "group_vars").mkdir()
    (base / "group_vars" / "all.yml").write_text(
        "pav_tests: [torch_gloo_allreduce]\npav_threshold_profile: cpu\n"
    )
    return ["--inventory", str(path)], path, env


@pytest.mark.parametrize("target", ["inventory", "group_vars", "tfvars"])
@settings(
    max_examples=200,  # per kind of file
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_mutated_files_end_in_a_plan_or_one_error_line(
    target: str, data: st.DataObject, capsys: pytest.CaptureFixture[str], restored_signals: None
) -> None:
    case = data.draw(mutated(target))
    target, mutation, content = case
    capsys.readouterr()  # nothing of an earlier example
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        args, path, env = place(base, target, content)
        inventories = base / "inventories" if target == "group_vars" else paths.INVENTORIES
        with mock.patch.dict(os.environ, env), mock.patch.object(paths, "INVENTORIES", inventories):
            rc = cli.main([*args, "--dry-run", "--run-dir", str(base / "run")])
        out, err = capsys.readouterr()
        assert not (base / "run").exists() and not (base / "state").exists()  # a dry run changes nothing
    assert "Traceback" not in out + err
    if rc == 0:
        assert err == "", err
        for line in out.splitlines():  # a values file the plan could not use is named in the plan
            if "cannot be set yet" in line and target == "tfvars" and str(path) not in line:
                assert "credentials" in line, line
        return
    assert rc == 2, (rc, err)
    assert err.count("\n") == 1 and err.startswith("error: "), err
    assert str(path) in err, err
    if mutation.kind == "set_key" and "YAML" not in err:
        assert mutation.key in err, err


def test_unknown_names_are_listed(capsys: pytest.CaptureFixture[str], restored_signals: None) -> None:
    """The unknown test and profile examples above end in errors that list what is known."""
    assert cli.main(["--tests", "gloo_allreducee", "--dry-run"]) == 2
    assert "unknown test(s) gloo_allreducee" in capsys.readouterr().err
