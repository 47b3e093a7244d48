"""The statistics: from samples to a result, and from two results to a verdict.

describe.py: one subject's samples -> centre, interval, spread, outliers (no comparison).
aggregate.py: a Result from its samples (describe's figures, CPU, device, flags).
latency.py: fio's latency percentiles and IOPS as results of their own.
baseline.py: which result a workload's others are compared with.
verdict.py: one comparison (ratio, interval, mark), the only place a mark is decided.
decide.py: what one interim look at a table decides (stop or sample on) from the verdicts.
"""
