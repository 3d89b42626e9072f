"""--on-fail and --recheck: one feature on every scheduler (issue 51).

A FAIL marks the nodes its bad parts name (decide: which hosts, the reason, the tests a recheck runs); a
recheck finds the tool's marks, narrows the run to those nodes and tests, and returns each node that passed.
flow owns that sequence, and the guard that keeps a bug in it from costing the teardown, for both schedulers;
each scheduler is an adapter with the same four calls (scheduler.Scheduler: find, narrow, mark, unmark):
slurm (a drain and RESUME through playbooks, scontrol on the controller) and k8s (a cordon, a taint and
annotations through kubectl). Every outcome is a results.Action.
"""
