"""A host SSH could not find (issue 48): an inventory host without ansible_host whose name does not resolve
passed --dry-run and failed at configure's first contact in a screenful of DNS error. The dry run and the
run (before any stage reaches a host) now name it in one line with the fix. Names here are under .invalid
(RFC 6761): they never resolve, and fail at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from pav import cli, inventory
from pav.inventory import Host
from tests.conftest import CliRun, assert_one_line_error, run_cli

NO_ADDRESS = "has no address: its name does not resolve here and the inventory sets no ansible_host for it; "
FIX = "set ansible_host: ITS_IP_OR_DNS_NAME"


def hosts_file(tmp_path: Path, hosts: str) -> Path:
    path = tmp_path / "hosts.yml"
    path.write_text(f"all:\n  hosts:\n{hosts}")
    return path


def dry_run(capsys: pytest.CaptureFixture[str], *args: str) -> CliRun:
    code = cli.main([*args, "--dry-run"])
    said = capsys.readouterr()
    return CliRun(code, said.out, said.err)


def test_a_host_without_an_address_stops_the_dry_run_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hosts = hosts_file(tmp_path, "    gpu-1.invalid: {}\n    localhost: {}\n")
    plan = dry_run(capsys, "--inventory", str(hosts))
    assert_one_line_error(plan, f"inventory {hosts}: host gpu-1.invalid {NO_ADDRESS}{FIX}", documented=True)
    assert plan.stdout == ""
    # An ansible_host that does not resolve is named as such; two hosts: the first, and the others counted.
    hosts = hosts_file(tmp_path, "    gpu-1: {ansible_host: gpu-1.invalid}\n    gpu-2.invalid: {}\n")
    plan = dry_run(capsys, "--inventory", str(hosts))
    assert_one_line_error(
        plan,
        "host gpu-1 cannot be found: its ansible_host gpu-1.invalid does not resolve here; fix ansible_host "
        "(and 1 more: gpu-2.invalid)",
        documented=True,
    )
    # --allow-missing: the run would go on without them, and the plan says so.
    plan = dry_run(capsys, "--inventory", str(hosts), "--allow-missing", "2")
    assert plan.rc == 0, plan.stderr
    assert f"  gpu-2.invalid (gpu-2.invalid): the run goes on without it: it {NO_ADDRESS}" in plan.stdout


def test_hosts_that_need_no_address_pass(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The local connection needs none, nor a name that resolves (localhost), nor an address that is one."""
    hosts = hosts_file(
        tmp_path,
        "    box.invalid: {ansible_connection: local}\n    localhost: {}\n"
        "    gpu-3.invalid: {ansible_host: 127.0.0.1}\n",
    )
    plan = dry_run(capsys, "--inventory", str(hosts))
    assert plan.rc == 0, plan.stderr
    assert (
        "  box.invalid (box.invalid)\n  localhost (localhost)\n  gpu-3.invalid (127.0.0.1)\n" in plan.stdout
    )
    assert dry_run(capsys, "--env", "local").rc == 0


def test_a_name_ssh_config_maps_or_proxies_is_left_to_ssh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`Host gpu-4.invalid` / `HostName 127.0.0.1` in ssh's config, or a jump host: ssh finds them."""
    fake = tmp_path / "bin" / "ssh"
    fake.parent.mkdir()
    fake.write_text(
        '#!/bin/sh\ncase "$2" in\n  gpu-4.invalid) echo "hostname 127.0.0.1";;\n'
        '  gpu-5.invalid) echo "hostname gpu-5.invalid"; echo "proxyjump bastion";;\n'
        '  *) echo "hostname $2";;\nesac\n'
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}:/usr/bin:/bin")
    hosts = [Host(n, n) for n in ("gpu-4.invalid", "gpu-5.invalid", "gpu-6.invalid")]
    hosts.append(Host("gpu-7.invalid", "gpu-7.invalid", {"ansible_ssh_common_args": "-o ProxyJump=bastion"}))
    assert list(inventory.unaddressed(hosts)) == ["gpu-6.invalid"]


@pytest.mark.slow
def test_a_run_stops_before_any_stage_reaches_the_host(tmp_path: Path) -> None:
    hosts = hosts_file(tmp_path, "    gpu-1.invalid: {}\n")
    run = run_cli("--inventory", str(hosts), "--stages", "configure", "--run-dir", str(tmp_path / "run"))
    assert_one_line_error(run, f"inventory {hosts}: host gpu-1.invalid {NO_ADDRESS}{FIX}")
    assert "Could not resolve" not in run.stdout + run.stderr
    assert not (tmp_path / "run").exists()  # stopped before its run dir, as the dry run stops
