"""Text from the hosts as text: a process name (/proc/PID/comm), a reason a host gave, a pod's log line
reach the terminal, summary.txt and junit.xml; a control character in them would be a command to the
terminal (an escape sequence that retitles it, clears it, or rewrites a line above) or would make the XML
invalid (issue 62). Each is shown as \\xNN instead."""

from __future__ import annotations

import re

# C0 and C1 controls, DEL, and what XML 1.0 cannot hold (lone surrogates, U+FFFE, U+FFFF).
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")


def printable(text: str, keep: str = "") -> str:
    """text with every control character but those in keep (e.g. "\\n" for a multi-line text) escaped."""
    return _CONTROL.sub(lambda m: m.group() if m.group() in keep else f"\\x{ord(m.group()):02x}", text)
