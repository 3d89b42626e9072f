"""The collectives nccl-tests measures, one *_perf binary each: nccl_tests.parse names a log's op by them, and
a threshold profile's nccl_tests sections may gate only these (thresholds.profiles).

Its own module, below both: thresholds must not import the nccl_tests package, whose grader judges with
thresholds' Gate (imports flow one way: docs/architecture.md, Layers)."""

# The longest names come first so all_reduce wins over reduce.
KNOWN_OPS = (
    "reduce_scatter",
    "all_reduce",
    "all_gather",
    "alltoallv",
    "hypercube",
    "broadcast",
    "alltoall",
    "sendrecv",
    "scatter",
    "gather",
    "reduce",
)
