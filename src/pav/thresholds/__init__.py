"""Everything that decides PASS or FAIL from measured figures, in one place.

- gate: the one Gate type (a metric held to a min and/or max; nccl-tests gates are busbw gates)
- profiles: thresholds/NAME.yml (hand-written gates, `extends`, the nccl_tests sections), `auto` choice
- hardware: what a host's facts say its GPUs, links and ports are
- derive: absolute gates from those facts (a fraction of a limit the facts give)
- relative: each GPU against its host's best, each pair against the median pair on the same links
- health: a bad GPU or link named from the facts alone (gpu_health)
- apply: judging results by the derived gates, under the profile's overrides
- scaling: metrics that need two tests (DDP scaling efficiency)

Grading an nccl-tests log against gates is pav.nccl_tests.grade.
"""
