"""The names the tool's mark of a Kubernetes node carries (pav.marking.k8s sets and reads them), and the
taints the run's jobs tolerate: the cordon's, a GPU node's own, and, in a recheck, the tool's mark.

A node's mark: cordoned, tainted KEY=<test>:NoSchedule, annotated with the run that marked it (RUN), the
reason ("pav RUN_ID: <part> <figure> < <gate> [tests]"), the tests a recheck runs, and CORDONED where the
tool cordoned it (a recheck uncordons only those).
"""

from __future__ import annotations

KEY = "pav.io/unhealthy"
RUN = "pav.io/unhealthy-run"  # the run that tainted it: the tool's mark, with the taint
REASON = "pav.io/unhealthy-reason"  # "pav RUN_ID: <part> <figure> < <gate> [tests]"
TESTS = "pav.io/unhealthy-tests"  # the tests it failed, comma-separated: what a recheck runs
CORDONED = "pav.io/cordoned-by"  # set only where the tool cordoned it: a recheck uncordons only those
ANNOTATIONS = (RUN, REASON, TESTS, CORDONED)
UNSCHEDULABLE = "node.kubernetes.io/unschedulable"  # the control plane's taint of a cordoned node
# Taints the run's jobs tolerate anyway (templates/k8s/_pod.j2): a GPU node's own, not anyone's mark.
TOLERATED = ("nvidia.com/gpu", UNSCHEDULABLE)
# What a recheck's jobs tolerate to run on the nodes they recheck (tainted and cordoned by the tool).
RECHECK_TOLERATIONS = (
    {"key": KEY, "operator": "Exists", "effect": "NoSchedule"},
    {"key": UNSCHEDULABLE, "operator": "Exists", "effect": "NoSchedule"},
)
