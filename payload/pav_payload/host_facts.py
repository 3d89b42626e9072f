"""The ``host-facts`` subcommand: the host's torch and its GPUs' facts in one JSON object, so configure
pays one Python start and one torch import per host for both (the torch_payload role reads it)."""

from __future__ import annotations

import argparse
import json
from typing import Any

import torch

from pav_payload.gpu_facts import facts_json


def torch_info() -> dict[str, Any]:
    cuda = torch.cuda.is_available()
    return {
        "version": torch.__version__,
        "cuda": torch.version.cuda,
        "cuda_available": cuda,
        "devices": torch.cuda.device_count() if cuda else 0,
        "nccl": ".".join(map(str, torch.cuda.nccl.version())) if cuda else None,
    }


def print_host_facts(args: argparse.Namespace) -> int:
    gpus = json.loads(facts_json(args.pci_sysfs, args.infiniband_sysfs))
    print(json.dumps({"torch": torch_info(), "gpus": gpus}), flush=True)
    return 0
