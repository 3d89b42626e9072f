"""Provisioning helpers for envs with a Terraform root: state dirs, per-env variables, hosts, SSH."""
