"""Secrets planted in the environment (a Nebius IAM token, a service-account private key) and in the
group_vars of a custom inventory reach no file of the run dir, no artifact Ansible keeps there, and no
line the driver prints.

First this machine over Ansible's local connection: there the facts Ansible gathers hold the driver's own
environment, the worst case for a leak. Then two sim hosts over SSH, with a test spanning both.

The runs' tests are plain Python ranks (pav_payload.plain, no torch): launched, logged, reported and
collected as torch's are, which is the path a secret could take; what torch computes is not."""

from __future__ import annotations

import json
import secrets
import shutil
import textwrap
from pathlib import Path

import pytest

from pav.stages.scrub import scrub_text
from tests.faults.conftest import Configured, Sandbox


def fake_pem() -> str:
    body = [secrets.token_urlsafe(48)[:64] for _ in range(4)]
    return "-----BEGIN PRIVATE KEY-----\n" + "\n".join(body) + "\n-----END PRIVATE KEY-----\n"


def planted_inventory(base: Path, token: str, pem: str) -> Path:
    base.mkdir()
    (base / "hosts.yml").write_text(
        "all:\n  hosts:\n    localhost:\n      ansible_connection: local\n"
        '      ansible_python_interpreter: "{{ ansible_playbook_python }}"\n'
    )
    (base / "group_vars").mkdir()
    (base / "group_vars" / "all.yml").write_text(
        textwrap.dedent("""\
            pav_tests: [fault_plain]
            pav_threshold_profile: cpu
            pav_apply_tuning: false
            pav_become: false
            pav_install_mpi: false
            torch_payload_python: "{{ ansible_playbook_python }}"
            nccl_env_fabric: socket
            """)
        + f"nebius_iam_token: {token}\n"
        + "nebius_sa_private_key: |\n"
        + textwrap.indent(pem, "  ")
    )
    return base / "hosts.yml"


def leaks(text: str, planted: list[str]) -> list[str]:
    found = []
    for secret in planted:
        # A key's lines one by one: a key cut at a line break, or JSON-escaped, is still a leak.
        for piece in [secret, *secret.splitlines()]:
            if len(piece) >= 16 and not piece.startswith("-----") and piece in text:
                found.append(piece[:12] + "...")
    return found


@pytest.mark.slow
def test_no_secret_in_run_dir_or_output(sandbox: Sandbox) -> None:
    env_token, gv_token = f"envtok-{secrets.token_hex(16)}", f"gvtok-{secrets.token_hex(16)}"
    env_pem, gv_pem = fake_pem(), fake_pem()
    inventory = planted_inventory(sandbox.base / "inv", gv_token, gv_pem)
    run = sandbox.cli("--inventory", str(inventory),
                      env={"NEBIUS_IAM_TOKEN": env_token, "NEBIUS_SA_PRIVATE_KEY": env_pem})  # fmt: skip
    assert run.rc == 0, run.stdout + run.stderr
    planted = [env_token, gv_token, env_pem, gv_pem]
    assert leaks(run.stdout + run.stderr, planted) == []
    run_dir = sandbox.run_dir("run")
    files = [p for p in run_dir.rglob("*") if p.is_file()]
    # What the scrub had to cover: Ansible's record of its environment, gathered facts, the inventory copy.
    assert any(p.name == "command" for p in files) and any("job_events" in p.parts for p in files)
    assert (run_dir / "inventory" / "group_vars" / "all.yml").is_file()
    found = {
        str(p.relative_to(run_dir)): bad
        for p in files
        if (bad := leaks(p.read_bytes().decode(errors="replace"), planted))
    }
    assert found == {}
    # Redacted, not dropped: the record still shows that the variables were there.
    command = json.loads(next(p for p in files if p.name == "command").read_text())
    assert command["env"]["NEBIUS_IAM_TOKEN"] == "<redacted>"
    assert "nebius_iam_token: <redacted>" in (run_dir / "inventory" / "group_vars" / "all.yml").read_text()
    assert sandbox.left(("run",)) == []


def test_scrub_catches_escaped_values_and_keeps_words() -> None:
    """The scrub's text rules, without a run: a secret as JSON escapes it is still found; a short value of a
    secret-named variable (ANSIBLE_HOST_KEY_CHECKING=False) is a word, left alone."""
    token = 'multi\nline"token-0123'
    text = json.dumps({"env": {"T": token, "other": "False"}}) + "\n" + fake_pem()
    clean = scrub_text(text, {token})
    assert token not in clean and json.dumps(token)[1:-1] not in clean
    assert "PRIVATE KEY" not in clean and '"other": "False"' in clean
    assert clean.count("<redacted>") == 2


@pytest.mark.slow
def test_no_secret_leaks_from_a_run_on_sim_hosts(configured: Configured, sandbox: Sandbox) -> None:
    """The same over SSH on two sim hosts, with a test spanning both (ranks on both hosts meeting in one
    collective): what comes back from the hosts (logs, rank reports, collected archives) holds no planted
    secret either."""
    env_token, gv_token = f"envtok-{secrets.token_hex(16)}", f"gvtok-{secrets.token_hex(16)}"
    env_pem, gv_pem = fake_pem(), fake_pem()
    inventory = sandbox.base / "inv-secrets"
    shutil.copytree(configured.inventory(0, 1).parent, inventory)
    group_vars = inventory / "group_vars" / "all" / "roles.yml"  # Ansible's variables (the sim env's split)
    group_vars.write_text(
        group_vars.read_text()
        + f"\nnebius_iam_token: {gv_token}\nnebius_sa_private_key: |\n"
        + textwrap.indent(gv_pem, "  ")
    )
    run = sandbox.cli(
        "--inventory", str(inventory / "hosts.yml"), "--stages", "validate,collect,report,teardown",
        "--tests", "fault_plain,fault_plain_multi",
        env={"NEBIUS_IAM_TOKEN": env_token, "NEBIUS_SA_PRIVATE_KEY": env_pem},
    )  # fmt: skip
    assert run.rc == 0, run.stdout + run.stderr
    planted = [env_token, gv_token, env_pem, gv_pem]
    assert leaks(run.stdout + run.stderr, planted) == []
    run_dir = sandbox.run_dir("run")
    files = [p for p in run_dir.rglob("*") if p.is_file()]
    assert any("hosts" in p.parts and p.name.endswith(".rank0.json") for p in files)  # came back over SSH
    found = {
        str(p.relative_to(run_dir)): bad
        for p in files
        if (bad := leaks(p.read_bytes().decode(errors="replace"), planted))
    }
    assert found == {}
    assert sandbox.left(("run",)) == []
