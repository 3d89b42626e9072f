"""YAML files the driver reads (pav.yamlfile): a broken file is one line naming the file, the line and the
fix; Ansible's local tags read as None where asked for; a file whose top level must be a mapping says so."""

from __future__ import annotations

from pathlib import Path

import pytest

from pav.errors import PavError
from pav.yamlfile import load_mapping, load_yaml


def write(tmp_path: Path, text: str | bytes, name: str = "all.yml") -> Path:
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


def test_a_mapping_reads_as_a_dict(tmp_path: Path) -> None:
    assert load_mapping(write(tmp_path, "pav_tests: [a, b]\npav_isolate: false\n")) == {
        "pav_tests": ["a", "b"], "pav_isolate": False,
    }  # fmt: skip
    assert load_mapping(write(tmp_path, "# only a comment\n")) == {}


def test_a_syntax_error_names_the_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, "pav_tests:\n  - a\n pav_isolate: [\n")
    with pytest.raises(PavError) as exc:
        load_yaml(path)
    message = str(exc.value)
    assert message.startswith(f"{path}:3: malformed YAML (")
    assert message.endswith("; fix the syntax at that line") and "\n" not in message


def test_a_missing_file_says_to_check_the_path(tmp_path: Path) -> None:
    path = tmp_path / "nope.yml"
    with pytest.raises(PavError, match=f"cannot read {path}: No such file or directory; check the path"):
        load_yaml(path)


def test_a_path_that_cannot_be_read_names_the_reason(tmp_path: Path) -> None:
    """A folder where a file should be (root, as CI runs, reads any file: a mode-0 file would not fail)."""
    with pytest.raises(PavError, match=f"cannot read {tmp_path}: Is a directory; check the path"):
        load_yaml(tmp_path)


def test_a_file_not_in_utf8_says_so(tmp_path: Path) -> None:
    path = write(tmp_path, b"name: caf\xe9\n")
    with pytest.raises(PavError, match=rf"{path}: not UTF-8 text \(byte 9\); save the file as UTF-8"):
        load_yaml(path)


def test_a_local_tag_is_refused_unless_asked_for(tmp_path: Path) -> None:
    path = write(tmp_path, "secret: !vault |\n  $ANSIBLE_VAULT;1.1;AES256\n  6162\nplain: 1\n")
    assert load_yaml(path, local_tags=True) == {"secret": None, "plain": 1}
    with pytest.raises(PavError, match=rf"{path}:1: malformed YAML \(could not determine a constructor"):
        load_yaml(path)


def test_a_mapping_file_holding_a_list_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "- a\n- b\n")
    with pytest.raises(PavError, match=f"{path}: top level must be a mapping of key: value, not list"):
        load_mapping(path)
