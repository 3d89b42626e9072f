"""No secret stays in the run dir: once the run is over, every file of it is scrubbed (pav.secrets.files).

Ansible's artifacts under RUN/ansible/ hold what no role chose to log: the environment Ansible ran with
(`command`), gathered facts with the host's environment (`job_events/`, `fact_cache/`), and the inventory
copy holds the group_vars as written. So the known secret values (secret-named variables of the
environment, of the hosts and of the inventory) and anything shaped like a private key or a JWT become
<redacted>, and so does every value Ansible's records keep under a secret-looking name. A run whose driver
died is scrubbed so by its reaper (pav.reaper).
"""

from __future__ import annotations

import os

from pav.context import RunContext
from pav.secrets.files import known_secrets, scrub_dir, scrub_text, secret_vars

__all__ = ["run_secrets", "scrub_run", "scrub_text"]


def scrub_run(ctx: RunContext) -> None:
    secrets = run_secrets(ctx)
    scrub_dir(ctx.run_dir, secrets)
    ctx.results.error = scrub_text(ctx.results.error, secrets)


def run_secrets(ctx: RunContext) -> set[str]:
    hosts = (value for host in ctx.hosts for value in secret_vars(host.vars))
    auth = ctx.options.pushgateway_auth
    # Taken out of the environment at the start (pav.reporting.pushgateway.credentials): known here alone.
    pushed = [auth.password] if auth is not None else []
    return known_secrets(os.environ, ctx.run_dir, [*hosts, *pushed])
