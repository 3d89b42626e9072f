"""What --on-fail marks, on any scheduler: one mark per host a bad part of a FAIL names
(pav.reporting.bad_parts: isolation's suspects, the failing tests' hosts), with the reason and the tests a
recheck runs again; and when a rechecked host passed.

Slurm drains the marks' nodes, Kubernetes taints them (pav.marking.slurm, pav.marking.k8s): both act on
exactly these hosts, from the one decision here. Only a FAIL marks: an interrupted or broken run (ERROR)
names hosts for what happened to the run, not for what is wrong with them. A host is marked only where a
part names it: its own test failed, isolation named it for a test across hosts, or a crash across hosts
began there (its launcher's record of the rank that failed first). A test across hosts that named none of
its hosts (2 hosts cannot be told apart; no pair re-runs) marks none of them: they are the run's `Unnamed`,
one line saying why. Nor does a link isolation found between two sets of hosts (reporting/links.py): each
side passes alone, so marking either would take healthy hosts out, and both the whole set; one line each
(`LinkLeft`) names it and the fix. The reason starts with PREFIX so a later run knows its own marks from
an operator's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pav import catalog
from pav.hostlist import compress
from pav.isolation import MIN_HOSTS
from pav.reporting import bad_parts
from pav.results import Action
from pav.thresholds import counters, health, leftovers, versions

PREFIX = "pav "
REASON_CHARS = 120  # scontrol shows reasons in sinfo -R columns; long ones are unreadable there


@dataclass(frozen=True)
class Mark:
    host: str  # the run's host: an inventory host (Slurm), a node (k8s)
    reason: str  # "pav RUN_ID: <part> <figure> < <gate> [tests]"
    tests: tuple[str, ...]  # the tests that failed on it, worst part's first: the ones a recheck runs


# How a host of a test across hosts is named, whatever the run's platform (docs/isolation.md).
NAMING = (
    "a host is named by a test of its own, or by isolation's re-runs on pairs (3 or more hosts, --platform "
    "hosts, --launcher direct, pav_isolate: true; docs/isolation.md)"
)


@dataclass(frozen=True)
class Unmarked:
    """Hosts a failed test ran on that no mark takes, and the one line that says why."""

    hosts: tuple[str, ...]
    tests: tuple[str, ...]

    def line(self, verb: str) -> str:
        raise NotImplementedError

    def entry(self, action: str, verb: str) -> Action:
        """The run's `actions` entry: one for all of them (`hosts`), no change made (`ok` null)."""
        return Action(action, "", tests=self.tests, detail=self.line(verb), hosts=self.hosts)


@dataclass(frozen=True)
class Unnamed(Unmarked):
    """The hosts of tests across hosts that failed naming none of them, and no part of their own: a mark on
    each would take the healthy ones with the bad."""

    why: str  # isolation's note, or why no re-run named one

    def line(self, verb: str) -> str:
        """ "not draining a, b: TEST failed across them, which does not say which host is bad (WHY); HOW"
        (verb: draining, tainting)."""
        return (
            f"not {verb} {compress(self.hosts)}: {', '.join(self.tests)} failed across them, which does not "
            f"say which host is bad ({self.why}); {NAMING}"
        )


@dataclass(frozen=True)
class LinkLeft(Unmarked):
    """A link between two sets of hosts that each pass alone (reporting/links.py): the fabric's to fix."""

    sides: tuple[str, ...]  # each side as a host range
    between: str  # both sides, with their racks where the inventory names them

    def line(self, verb: str) -> str:
        """ "not draining a, b: a link between them failed TEST (each side passes it alone); fix ..." """
        return (
            f"not {verb} {', '.join(self.sides)}: a link between them failed {', '.join(self.tests)} "
            f"(each side passes it alone); fix the fabric between {self.between}: a rack's uplink, a switch "
            "port or a cable"
        )


@dataclass(frozen=True)
class Decision:
    marks: list[Mark]
    unnamed: Unnamed | None  # hosts left unmarked though a failed test ran on them, and why
    links: list[LinkLeft] = field(default_factory=list)  # links isolation found: no host marked for them

    @property
    def unmarked(self) -> list[Unmarked]:
        return [*([self.unnamed] if self.unnamed else []), *self.links]


def decide(results: dict[str, Any]) -> Decision:
    """One mark per host a bad part names, its reason from the worst part (the most specific first); the
    hosts of a test across hosts that named none of them are not marked (Unnamed). Nothing unless the
    verdict is FAIL."""
    if results.get("verdict") != "FAIL":
        return Decision([], None)
    run_id = str(results.get("run_id") or "")
    by_host: dict[str, list[bad_parts.BadPart]] = {}
    unnamed: list[bad_parts.BadPart] = []
    left = []
    for part in bad_parts.find(results):
        if part.link is not None:
            sides = tuple(compress(side) for side in part.link.sides)
            left.append(LinkLeft(part.hosts, part.tests, sides, part.link.between))
            continue
        if not part.named:
            unnamed.append(part)
            continue
        for host in part.hosts:
            by_host.setdefault(host, []).append(part)
    out = []
    for host, parts in by_host.items():
        tests = tuple(dict.fromkeys(t for p in parts for t in p.tests))
        out.append(Mark(host, reason(run_id, parts[0], tests, len(parts) - 1), tests))
    return Decision(out, _unnamed(results, unnamed, set(by_host)), left)


def _unnamed(results: dict[str, Any], parts: list[bad_parts.BadPart], marked: set[str]) -> Unnamed | None:
    hosts = tuple(dict.fromkeys(h for p in parts for h in p.hosts if h not in marked))
    if not hosts:
        return None
    tests = tuple(dict.fromkeys(t for p in parts for t in p.tests))
    # Isolation's note names why it re-ran nothing: per test ("TEST: 2 hosts are too few ...") or for the run.
    note = str((results.get("isolation") or {}).get("note") or "")
    ran = {str(t.get("name")) for t in results.get("tests") or []}
    why = []
    for said in (s for s in note.split("; ") if s):
        test, _, rest = said.partition(": ")
        if test in tests:
            why.append(rest)
        elif test not in ran:
            why.append(said)
    if not why:
        most = max(len(p.hosts) for p in parts)
        few = f"{most} hosts are too few to tell apart by pairs"
        why = [few if most < MIN_HOSTS else "no re-run on pairs"]
    return Unnamed(hosts, tests, "; ".join(dict.fromkeys(why)))


LOOKED_SHOWN = 12  # nodes a refused --recheck names; the rest counted


def nothing_to_recheck(mark: str, looked: list[str], flag: str) -> str:
    """--recheck's refusal where no node carries the tool's mark: which nodes it looked at, and the fix. The
    run stops there, before its hosts are configured or tested."""
    shown = ", ".join(looked[:LOOKED_SHOWN]) or "none"
    if len(looked) > LOOKED_SHOWN:
        shown += f" and {len(looked) - LOOKED_SHOWN} more"
    return (
        f"--recheck: no node carries this tool's {mark}; looked at {len(looked)} node(s): {shown}; nothing "
        f"was configured or tested: run with --on-fail {flag} first (it marks the nodes a FAIL names), then "
        "--recheck re-tests them"
    )


def reason(run_id: str, part: bad_parts.BadPart, tests: tuple[str, ...], more: int = 0) -> str:
    """ "pav RUN_ID: <part> <figure> < <gate> [tests]" ("pav RUN_ID: user problem: <part> ..." for a part
    another process holds), cut to REASON_CHARS in the figure, never in the run id or the tests (a recheck
    reads both)."""
    head, tail = f"{PREFIX}{run_id}: ", f" [{','.join(tests)}]"
    where = part.part or ("fabric" if len(part.hosts) > 1 else "host")
    # A part another process holds: the operator reads whose problem it is before the figure (issue 50).
    words = bad_parts.CATEGORY_WORDS.get(part.category, "")
    whose = f"{words.removeprefix('a ')}: " if words else ""
    figure = f"{whose}{where} {part.worst.measured}{bound(part.worst.gate)}"
    figure += f" +{more} more" if more else ""
    room = max(REASON_CHARS - len(head) - len(tail), 8)
    if len(figure) > room:
        figure = figure[: room - 3] + "..."
    return plain(head + figure + tail)


# Results of the facts alone, judged again by whatever run reads them (a recheck's configure does): no test
# of the catalog, nothing to launch (issue 50: a node drained for a GPU another process held).
FROM_FACTS = (health.NAME, leftovers.NAME, versions.NAME)


def to_launch(tests: dict[str, tuple[str, ...]]) -> tuple[str, ...]:
    """The tests a recheck launches again: each the marks name, in order, but those the facts decide.
    error_counters is read before and after the tests: in its place, the tests that send traffic over the
    GPUs' links (catalog.link_traffic), so the recheck sees whether the counters still grow."""
    named = (t for mine in tests.values() for t in mine if t not in FROM_FACTS)
    return tuple(
        dict.fromkeys(x for t in named for x in (catalog.link_traffic() if t == counters.NAME else (t,)))
    )


def is_ours(reason_text: str) -> bool:
    return reason_text.startswith(PREFIX)


def bound(gate: str) -> str:
    """The gate the figure missed, as the bound it fell beyond: ">= 692.6 = 0.7 x 989.4" -> " < 692.6"."""
    limit = gate.split(" = ")[0]
    if " and " in limit or not limit:
        return f" (gate {limit})" if limit else ""
    if limit.startswith(">= "):
        return f" < {limit[3:]}"
    if limit.startswith("<= "):
        return f" > {limit[3:]}"
    return f" (gate {limit})"


def plain(text: str) -> str:
    """One line of ASCII without quotes: scontrol's reason goes through Slurm's own parsing and the shell;
    a Kubernetes annotation is shown by kubectl describe."""
    text = text.replace("…", "...").replace("->", "to")
    return "".join(c if c.isascii() and c.isprintable() and c not in "\"'" else " " for c in text)


def passed(host: str, tests: tuple[str, ...], results: dict[str, Any]) -> tuple[bool, str]:
    """(True, why) where every test the host failed passed on it now and no bad part names it: a recheck
    returns only such a host (a drained Slurm node, a tainted Kubernetes node). A recheck run that reached
    no verdict (ERROR, NONE) returns none."""
    if results.get("verdict") not in ("PASS", "FAIL"):
        return False, f"the recheck run ended {results.get('verdict')}"
    named = [p for p in bad_parts.find(results) if host in p.hosts]
    if named:
        return False, f"still failing: {named[0].line()}"
    status = {
        t.get("name"): t.get("status") for t in results.get("tests") or [] if host in (t.get("hosts") or [])
    }
    missing = [t for t in tests if status.get(t) != "pass"]
    if missing:
        return False, "not passed again: " + ", ".join(f"{t} {status.get(t, 'not run')}" for t in missing)
    return True, f"passed {', '.join(tests)}"
