"""HTTP basic auth credentials (a pushgateway's), held so the password shows in no repr: not in a traceback,
a log line or a dump of the run's options."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field


@dataclass(frozen=True)
class BasicAuth:
    user: str
    password: str = field(repr=False)
    source: str  # where it was read: the variable's name or the file's path, never the value

    def header(self) -> str:
        """The Authorization header's value."""
        return "Basic " + base64.b64encode(f"{self.user}:{self.password}".encode()).decode()
