"""YAML reading that turns a syntax error into one line naming the file, the line and the fix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from pav.errors import PavError


class _LocalTagsLoader(yaml.SafeLoader):
    """Safe YAML that reads a value under a local tag (Ansible's !vault, !unsafe) as None."""


# libyaml's parser where PyYAML was built with it: the same constructors, so the same values, ~7x faster
# (the threshold profiles are read on every judging). A document it refuses is read again by the pure
# parser, whose error names the line as it always has, or whose value stands where libyaml is stricter.
_FastSafeLoader: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _FastLocalTagsLoader(_FastSafeLoader):  # type: ignore[misc, valid-type]
    """_LocalTagsLoader on libyaml's parser."""


for _loader in (_LocalTagsLoader, _FastLocalTagsLoader):
    _loader.add_multi_constructor("!", lambda loader, suffix, node: None)


def load_yaml(path: Path, *, local_tags: bool = False) -> Any:
    try:
        text = path.read_text()
    except OSError as exc:
        raise PavError(f"cannot read {path}: {exc.strerror}; check the path and its permissions") from None
    except UnicodeDecodeError as exc:
        raise PavError(f"{path}: not UTF-8 text (byte {exc.start}); save the file as UTF-8") from None
    try:
        return yaml.load(text, Loader=_FastLocalTagsLoader if local_tags else _FastSafeLoader)
    except yaml.YAMLError:
        pass
    try:
        return yaml.load(text, Loader=_LocalTagsLoader if local_tags else yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        problem = exc.problem or exc.context or "invalid syntax"
        raise PavError(f"{where}: malformed YAML ({problem}); fix the syntax at that line") from None
    except yaml.YAMLError as exc:
        raise PavError(f"{path}: malformed YAML ({' '.join(str(exc).split())}); fix the file") from None


def load_mapping(path: Path) -> dict[str, Any]:
    """A YAML file whose top level must be a mapping (group_vars, host_vars, tfvars-like files)."""
    data = load_yaml(path)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise PavError(f"{path}: top level must be a mapping of key: value, not {type(data).__name__}")
    return data
