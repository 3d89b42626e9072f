"""How a reader records a fact it cannot read: None, and a line in ``missing`` naming the fact and why."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class Missing:
    """Reads one fact at a time; a read that fails leaves None and a line saying which fact and why."""

    def __init__(self) -> None:
        self.items: list[str] = []

    def read(self, name: str, call: Callable[[], T]) -> T | None:
        try:
            return call()
        except Exception as exc:  # NVMLError_*, or a function this binding lacks: unknown, not fatal
            self.items.append(f"{name}: {describe_error(exc)}")
            return None


def describe_error(exc: BaseException) -> str:
    text = str(exc).strip()
    return text or type(exc).__name__
