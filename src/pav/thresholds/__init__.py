"""Everything that decides PASS or FAIL from measured figures, in one place.

- profiles: thresholds/NAME.yml (hand-written gates, `extends`), the Gate type, `auto` profile choice
- hardware: what a host's facts say its GPUs, links and ports are
- derive: gates derived from those facts (absolute: a fraction of a limit; relative: against the host's best)
- apply: judging results by the derived gates, under the profile's overrides
- scaling: metrics that need two tests (DDP scaling efficiency)
"""

from pav.thresholds.profiles import (
    AUTO,
    Gate,
    auto_profile,
    known_profiles,
    load_gates,
    load_profile,
    lookup,
    profile_path,
)

__all__ = [
    "AUTO",
    "Gate",
    "auto_profile",
    "known_profiles",
    "load_gates",
    "load_profile",
    "lookup",
    "profile_path",
]
