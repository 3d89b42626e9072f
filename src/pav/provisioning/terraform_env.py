"""Provision and destroy an env through its Terraform root; outputs become the run's inventory."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pav import interrupts
from pav.envs import EnvSpec
from pav.errors import PavError
from pav.provisioning import nebius, sim
from pav.provisioning.hosts import ProvisionedHost, host_vars, parse_hosts
from pav.provisioning.ssh import wait_and_pin
from pav.terraform import Terraform


@dataclass
class TerraformEnv:
    env: EnvSpec
    state: Path
    max_hours: int | None = None  # --max-hours: the pav-expires-at label's lifetime, over the values file's

    @classmethod
    def for_env(cls, env: EnvSpec, max_hours: int | None = None) -> TerraformEnv:
        made = cls(env, env.state_dir, max_hours)
        if max_hours is not None and not made.nebius:
            raise PavError(
                f"--max-hours labels cloud resources; env {env.name} makes none (use a nebius-* env)"
            )
        return made

    @property
    def name(self) -> str:
        return self.env.name

    @property
    def root(self) -> Path:
        assert self.env.terraform_dir is not None
        return self.env.terraform_dir

    @property
    def terraform(self) -> Terraform:
        return Terraform(self.root, self.state)

    @property
    def known_hosts(self) -> Path:
        return self.state / "known_hosts"

    @property
    def nebius(self) -> bool:
        return self.root.name.startswith("nebius-")

    def variables(self, hosts: int) -> dict[str, Any]:
        if self.root.name == "sim":
            return sim.variables(self.state, hosts)
        if self.nebius:
            return nebius.variables(self.state, self.env, hosts, max_hours=self.max_hours)
        raise PavError(f"env {self.name}: no Terraform variables are defined for it in pav.provisioning")

    def preview_variables(self, hosts: int) -> dict[str, Any]:
        """What apply would pass, made without side effects (no key generated); secrets are never in it."""
        if self.root.name == "sim":
            return sim.preview_variables(self.state, hosts)
        if self.nebius:
            return nebius.preview(self.env, hosts, self.max_hours)
        return self.variables(hosts)

    def private_key(self) -> Path:
        return sim.private_key(self.state)

    def apply(
        self, hosts: int, ssh_timeout_s: float, allow_missing: int = 0
    ) -> tuple[list[ProvisionedHost], dict[str, str]]:
        """Create the hosts and wait for them; up to allow_missing may never answer (returned, name -> why:
        the run goes on without them, configure finds them unreachable)."""
        variables = self.variables(hosts)  # first: missing credentials or values stop the run before init
        tf = self.terraform
        tf.init()
        interrupts.raise_if_requested()  # before apply: an interrupted run creates nothing more
        tf.apply(variables)
        provisioned = parse_hosts(tf.outputs())
        key = self.private_key()
        silent = wait_and_pin(provisioned, key, self.known_hosts, ssh_timeout_s, allow_missing)
        if self.nebius:
            answered = [h for h in provisioned if h.name not in silent]
            nebius.wait_cloud_init(answered, key, self.known_hosts, ssh_timeout_s)
        return provisioned, silent

    def current_hosts(self) -> list[ProvisionedHost]:
        outputs = self.terraform.outputs()
        return parse_hosts(outputs) if outputs else []

    def inventory_hosts(self, provisioned: list[ProvisionedHost]) -> dict[str, dict[str, Any]]:
        return {h.name: host_vars(h, self.private_key(), self.known_hosts) for h in provisioned}

    def destroy(self) -> list[str]:
        if self.nebius and self.terraform.state_file.exists():
            # Fails naming a missing credential before Terraform would, and keeps nebius_auth current.
            nebius.refresh_auth(self.terraform.var_file, os.environ)
        destroyed = self.terraform.destroy()
        self.known_hosts.unlink(missing_ok=True)
        if self.root.name == "sim":
            sim.subnet_file(self.state).unlink(missing_ok=True)  # free: the next cluster probes again
        return destroyed
