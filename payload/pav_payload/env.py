"""This process's place in the job, as torchrun describes it through the environment."""

import os
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class RankInfo:
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    node_rank: int
    # False when started by plain ``python -m``: there is no rendezvous to join.
    launched: bool

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> "RankInfo":
        def number(name: str, default: int) -> int:
            return int(env.get(name, default))

        return cls(
            rank=number("RANK", 0),
            world_size=number("WORLD_SIZE", 1),
            local_rank=number("LOCAL_RANK", 0),
            local_world_size=number("LOCAL_WORLD_SIZE", 1),
            node_rank=number("GROUP_RANK", number("NODE_RANK", 0)),
            launched="WORLD_SIZE" in env and "MASTER_ADDR" in env,
        )
