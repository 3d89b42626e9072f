"""How a reader records a fact it cannot read: None, and a line in ``missing`` naming the fact and why."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeVar

T = TypeVar("T")


class Missing:
    """Reads one fact at a time; a read that fails leaves None and a line saying which fact and why."""

    def __init__(self) -> None:
        self.items: list[str] = []

    def read(self, name: str, call: Callable[[], T]) -> T | None:
        return self.read_or(name, call, {})

    def read_or(self, name: str, call: Callable[[], T], answers: Mapping[int, T | None]) -> T | None:
        """As ``read``, but an NVML error whose code is in ``answers`` is itself the fact (NotSupported on a
        GPU without MIG, a corrupted InfoROM): that answer, and no line."""
        try:
            return call()
        except Exception as exc:  # NVMLError_*, or a function this binding lacks: unknown, not fatal
            code = error_code(exc)
            if code is not None and code in answers:
                return answers[code]
            self.items.append(f"{name}: {describe_error(exc)}")
            return None


class LinkMissing:
    """Per-link failures: one missing line per (fact, reason), naming its links; 18 lines say no more."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.failed: dict[tuple[str, str], list[int]] = {}

    def add(self, fact: str, reason: str, link: int) -> None:
        self.failed.setdefault((fact, reason), []).append(link)

    def lines(self) -> list[str]:
        return [
            f"{self.prefix}.{fact}: {reason} (links {', '.join(map(str, links))})"
            for (fact, reason), links in self.failed.items()
        ]


def describe_error(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:  # the caller names the file; str() would name it again
        return exc.strerror
    text = str(exc).strip()
    return text or type(exc).__name__


def error_code(exc: BaseException) -> int | None:
    """pynvml's NVMLError keeps the nvmlReturn_t in ``value``; other exceptions have none."""
    value = getattr(exc, "value", None)
    return value if isinstance(value, int) else None
