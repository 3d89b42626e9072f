"""Everything that decides PASS or FAIL from measured figures, in one place.

- gate: the one Gate type (a metric held to a min and/or max; nccl-tests gates are busbw gates)
- profiles: thresholds/NAME.yml (hand-written gates, `extends`, the nccl_tests sections), `auto` choice
- hardware: what a host's facts say its GPUs, links and ports are
- derive: gates derived from those facts (absolute: a fraction of a limit; relative: against the host's best)
- apply: judging results by the derived gates, under the profile's overrides
- scaling: metrics that need two tests (DDP scaling efficiency)

Grading an nccl-tests log against gates is pav.nccl_tests.grade.
"""
