"""pav.role_args: the roles' argument specs checked before anything runs (the dry run), with Ansible's own
validator: a value a role would refuse when it starts is one line naming where it was set, the key, the
role and the fix; a templated value is Ansible's to render first."""

from __future__ import annotations

import pytest

from pav import role_args
from pav.errors import PavError


def test_every_role_variable_with_a_spec_is_known_with_its_role() -> None:
    role, spec = role_args.options()["nccl_env_fabric"]
    assert role == "nccl_env" and "socket" in spec["choices"]


def test_a_value_outside_the_choices_names_key_role_and_fix() -> None:
    with pytest.raises(PavError) as exc:
        role_args.check({"nccl_env_fabric": "ethernet"}, {"nccl_env_fabric": "-e"})
    said = str(exc.value)
    assert said.startswith("-e: nccl_env_fabric='ethernet': role nccl_env's argument spec refuses it (")
    assert "set nccl_env_fabric to one of infiniband, roce, socket" in said
    assert said.endswith("(roles/nccl_env/meta/argument_specs.yml)")


def test_good_templated_and_unknown_values_pass() -> None:
    role_args.check(
        {"nccl_env_fabric": "socket", "nccl_env_debug": "{{ lookup('env', 'X') }}", "not_a_role_var": 1}, {}
    )
