#!/usr/bin/python
"""Wait on the host for the payload's facts read that start_job (roles/torch_payload/files/pav-start-job.sh)
started, and set its facts: one module run per host, where Ansible's async was a module run per poll, one to
remove its job file, a `fail` and a `set_fact`, each a task run per host (issue 65, docs/benchmarks.md)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: pav_facts_wait
short_description: Wait for the payload's background facts read and set its two facts
description:
  - Blocks on the host until the read's exit code (C(job).rc) is there, polling every 0.2 s.
  - Fails the host, with what to do, when the read ran past its limit (C(timeout) killed it), when the
    payload could not run with C(python), when the read's shell is gone without an exit code, or when it
    printed no JSON.
options:
  job:
    description: The read's files' common path (start_job's JOB).
    type: path
    required: true
  timeout_s:
    description: The read's limit (start_job's LIMIT_S).
    type: int
    required: true
  python:
    description: The Python the read ran with, named in the failure when it could not run.
    type: str
    required: true
  cleanup:
    description: Remove the read's files once read.
    type: bool
    default: true
author: provision-and-validate
"""

RETURN = r"""
ansible_facts:
  description: torch_payload_info (torch, CUDA, NCCL, python), torch_payload_gpu_facts (per GPU, Xid lines).
  returned: success
  type: dict
"""

import contextlib
import json
import os
import time
from typing import Any

from ansible.module_utils.basic import AnsibleModule

POLL_S = 0.2
# `timeout -k 5` has ended the read 5 s past its limit; the rest is the shell writing JOB.rc.
GRACE_S = 30
# A loaded suite run once saw a read's shell gone with no exit code (two inventory hosts on one machine,
# tests/driver/test_split_machine.py) where nothing shows a kill: the shell is held dead only when no exit
# code follows within this.
GONE_GRACE_S = 3.0
TIMED_OUT = (124, 137)  # timeout's own exit codes: SIGTERM ended it, or SIGKILL after the 5 s


def alive(pid_file: str) -> bool:
    """Whether the read's background shell still runs (a zombie counts as gone: no one may reap it)."""
    try:
        with open(pid_file, encoding="ascii") as f:
            pid = int(f.read().strip())
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, ValueError, IndexError):
        return False


def rc_within(rc_file: str, seconds: float) -> bool:
    """Whether the exit code shows up within seconds: a shell seen gone may have written it as it ended."""
    deadline = time.monotonic() + seconds
    while not os.path.exists(rc_file):
        if time.monotonic() > deadline:
            return False
        time.sleep(POLL_S)
    return True


def wait(module: AnsibleModule, job: str, limit_s: int) -> int:
    deadline = time.monotonic() + limit_s + GRACE_S
    while not os.path.exists(f"{job}.rc"):
        if not alive(f"{job}.pid") and not rc_within(f"{job}.rc", GONE_GRACE_S):
            module.fail_json(
                msg=f"pav: the facts read ended without its exit code ({job}.rc): something outside the run "
                "killed it; run the configure stage again"
            )
        if time.monotonic() > deadline:
            module.fail_json(
                msg=f"pav: the facts read wrote no exit code ({job}.rc) within {limit_s + GRACE_S} s, past "
                "its limit and `timeout`'s kill: check the host (a process stuck in the kernel), then "
                "configure again"
            )
        time.sleep(POLL_S)
    with open(f"{job}.rc", encoding="ascii") as f:
        return int(f.read().strip() or -1)


def read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return ""


def facts(module: AnsibleModule, rc: int, out: str, err: str) -> dict[str, Any]:
    p = module.params
    if rc in TIMED_OUT:
        module.fail_json(
            msg=f"the facts read (torch, NVML or nvidia-smi, the kernel log) ran past its {p['timeout_s']} s "
            "on this host and was killed, as NVML hangs on a GPU that fell off the bus: check the host's "
            "GPUs (nvidia-smi, the kernel log's Xid lines), or raise torch_payload_gpu_facts_timeout_s"
        )
    if rc != 0:
        why = (err.strip().splitlines() or [f"exit code {rc}"])[-1]
        module.fail_json(
            msg=f"the payload did not run with {p['python']} ({why}); set torch_payload_python (e.g. "
            "-e torch_payload_python=/path/to/venv/bin/python) to a Python that has torch"
        )
    try:
        found = json.loads(out)
        return {
            "torch_payload_info": {**found["torch"], "python": p["python"]},
            "torch_payload_gpu_facts": found["gpus"],
        }
    except (ValueError, KeyError, TypeError) as exc:
        module.fail_json(msg=f"the payload's facts read printed no facts ({exc}): {(err or out)[-500:]}")
        raise


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "job": {"type": "path", "required": True},
            "timeout_s": {"type": "int", "required": True},
            "python": {"type": "str", "required": True},
            "cleanup": {"type": "bool", "default": True},
        },
        supports_check_mode=True,
    )
    job = module.params["job"]
    rc = wait(module, job, module.params["timeout_s"])
    out, err = read(f"{job}.out"), read(f"{job}.err")
    if module.params["cleanup"]:
        for suffix in (".rc", ".out", ".err", ".pid"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(job + suffix)
    module.exit_json(changed=False, ansible_facts=facts(module, rc, out, err))


if __name__ == "__main__":
    main()
