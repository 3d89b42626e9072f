"""The roles' argument specs (roles/*/meta/argument_specs.yml) held against the values a run gives them, by
Ansible's own validator: a role checks its variables when it starts, so a real run refuses a wrong type or
choice only at configure (after provisioning, on a cloud env); --dry-run refuses it up front, in the same
words."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

from pav import paths
from pav.errors import PavError
from pav.yamlfile import load_mapping

WANTS = {
    "int": "a whole number",
    "float": "a number",
    "bool": "true or false",
    "list": "a list",
    "dict": "a mapping",
}


@cache
def options() -> dict[str, tuple[str, dict[str, Any]]]:
    """Every role variable an argument spec names: name -> (role, its spec), over the role's entry points."""
    found: dict[str, tuple[str, dict[str, Any]]] = {}
    for path in sorted(paths.ROLES.glob("*/meta/argument_specs.yml")):
        role = path.parent.parent.name
        for entry in (load_mapping(path).get("argument_specs") or {}).values():
            for name, spec in ((entry or {}).get("options") or {}).items():
                found.setdefault(name, (role, dict(spec or {})))
    return found


def check(values: Mapping[str, Any], origins: Mapping[str, str]) -> None:
    """Refuse the first value a role's argument spec refuses, naming its key, the role and the fix. origins:
    where each key was set ("-e", or the env's file)."""
    for key, value in values.items():
        known = options().get(key)
        if known is None or _templated(value):  # Ansible renders a template before the role sees it
            continue
        role, spec = known
        said = _refusal(key, value, spec)
        if said:
            where = origins.get(key, "group_vars")
            raise PavError(
                f"{where}: {key}={value!r}: role {role}'s argument spec refuses it ({said}), as a real run "
                f"does when the role starts; {_fix(key, spec)} (roles/{role}/meta/argument_specs.yml)"
            )


def _refusal(key: str, value: Any, spec: dict[str, Any]) -> str:
    from ansible.module_utils.common.arg_spec import ArgumentSpecValidator  # only where something is checked

    one = {k: v for k, v in spec.items() if k != "required"}  # the others are not given here
    result = ArgumentSpecValidator({key: one}).validate({key: value}, validate_role_argument_spec=True)
    return result.error_messages[0] if result.error_messages else ""


def _fix(key: str, spec: dict[str, Any]) -> str:
    if spec.get("choices"):
        return f"set {key} to one of {', '.join(map(str, spec['choices']))}"
    wants = WANTS.get(str(spec.get("type")), f"a {spec.get('type')}")
    given = spec.get("default")
    example = str(given).lower() if isinstance(given, bool) else repr(given)
    default = f", e.g. {example}" if given not in (None, "", [], {}) else ""
    return f"set {key} to {wants}{default}"


def _templated(value: Any) -> bool:
    return isinstance(value, str) and ("{{" in value or "{%" in value)
