"""Secrets planted in a -J report's env (as nccl-tests writes it) never survive redaction."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from pav.nccl_tests.parse import parse_json_text
from pav.secrets.redact import (
    REDACTED,
    is_secret_name,
    redact_file,
    redact_json_text,
    redact_report,
    redact_text,
    secret_values,
)

REPORT = Path(__file__).resolve().parent / "fixtures" / "synthetic_h100_2node_all_reduce_perf.json"
IAM_TOKEN = "ne1CqYBCmF0a2VuLWdvb2dsZS1jbG91ZC1zZXJ2aWNl.planted-iam-token-value"
# Split so that secret scanners do not flag this test file; the joined string is a PEM private key.
PEM = (
    "-----BEGIN "
    + "PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7planted\n-----END "
    + "PRIVATE KEY-----\n"
)
JWT = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJwbGFudGVkIn0.c2lnbmF0dXJlLXBsYW50ZWQ"
PLANTED = {
    "NEBIUS_IAM_TOKEN": IAM_TOKEN,
    "SSH_HOST_KEY_MATERIAL": PEM,
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYplantedKEY",
    "HF_TOKEN": "hf_plantedplantedplanted",
    "SERVICE_ID_DOC": JWT,
    "DATABASE_URL": "postgres://pav:hunter22@db.internal:5432/pav",
}
KEPT = ("NCCL_IB_HCA==mlx5_0,mlx5_1,mlx5_3,mlx5_4", "NCCL_IB_PKEY=0", "HOME=/root", "OMPI_COMM_WORLD_SIZE=16")


def planted_report() -> str:
    """The fixture with secrets added to its env list, escaped the way nccl-tests' writer escapes them."""
    entries = "".join(nccl_tests_string(f"{name}={value}") + "," for name, value in PLANTED.items())
    text = REPORT.read_text()
    return text.replace('"env":[', '"env":[' + entries, 1)


def nccl_tests_string(value: str) -> str:
    """A JSON string literal as src/util.cu writes it: quotes, backslashes, '/', tab, newline escaped."""
    return json.dumps(value).replace("/", "\\/")


def assert_clean(text: str) -> None:
    for value in PLANTED.values():
        for form in (value, json.dumps(value)[1:-1], nccl_tests_string(value)[1:-1]):
            assert form.strip() not in text
    assert "PRIVATE KEY" not in text and "hunter22" not in text


def test_redact_report_on_parsed_json() -> None:
    report = json.loads(planted_report())
    clean = redact_report(report)
    env = clean["env"]
    for name in PLANTED:
        assert f"{name}={REDACTED}" in env
    for entry in KEPT:
        assert entry in env
    assert_clean(json.dumps(clean))
    assert f"NEBIUS_IAM_TOKEN={IAM_TOKEN}" in report["env"]  # the input is left as it was
    assert clean["results"] == report["results"] and clean["args"] == report["args"]


def test_redact_file_in_place(tmp_path: Path) -> None:
    path = tmp_path / "all_reduce_perf.json"
    path.write_text(planted_report())
    path.chmod(0o640)
    assert redact_file(path) == len(PLANTED)
    text = path.read_text()
    assert_clean(text)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    # Still the same report, still nccl-tests' formatting for everything that was not a secret.
    assert parse_json_text(text).rows == parse_json_text(REPORT.read_text()).rows
    assert '"NCCL_IB_PKEY=0"' in text and '"HOME=\\/root"' in text
    assert redact_file(path) == 0  # nothing left to do; the file is not rewritten


def test_redact_cut_off_file(tmp_path: Path) -> None:
    """A crashed run leaves a -J file that does not parse; its env is complete and must still be scrubbed."""
    text = planted_report()
    cut = text[: text.index('"results"') + 40]
    path = tmp_path / "crashed.json"
    path.write_text(cut)
    assert redact_file(path) == len(PLANTED)
    assert_clean(path.read_text())


def test_secret_cut_inside_its_string_is_redacted() -> None:
    text = planted_report()
    cut = text[: text.index(IAM_TOKEN) + 10]
    clean, changed = redact_json_text(cut)
    assert changed == 1 and IAM_TOKEN[:10] not in clean and clean.endswith(f"NEBIUS_IAM_TOKEN={REDACTED}")


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("NEBIUS_IAM_TOKEN", True),
        ("NEBIUS_SERVICE_ACCOUNT_ID", True),
        ("HF_TOKEN", True),
        ("GITHUB_TOKEN", True),
        ("AWS_SECRET_ACCESS_KEY", True),
        ("AWS_ACCESS_KEY_ID", True),
        ("OPENAI_API_KEY", True),
        ("DB_PASSWORD", True),
        ("MYSQL_PASSWD", True),
        ("GOOGLE_APPLICATION_CREDENTIALS", True),
        ("BASIC_AUTH", True),
        ("NCCL_IB_HCA", False),
        ("NCCL_IB_PKEY", False),
        ("UCX_IB_PKEY", False),
        ("TOKENIZERS_PARALLELISM", False),
        ("KEYBOARD_LAYOUT", False),
        ("PATH", False),
        ("CUDA_VISIBLE_DEVICES", False),
    ],
)
def test_is_secret_name(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret


def test_redact_text_with_known_values() -> None:
    env = {"NEBIUS_IAM_TOKEN": IAM_TOKEN, "DB_PASSWORD": "abc", "PATH": "/usr/bin"}
    secrets = secret_values(env)
    assert secrets == {IAM_TOKEN}  # too short to replace safely: abc; not secret: PATH
    log = f"curl -H 'Authorization: Bearer {IAM_TOKEN}' ...\nkey:\n{PEM}jwt={JWT} done\nabc stays\n"
    clean = redact_text(log, secrets | {"abc"})
    assert IAM_TOKEN not in clean and "PRIVATE KEY" not in clean and JWT not in clean
    assert clean.count(REDACTED) == 3 and "abc stays" in clean and "done" in clean
