"""The trace probes' catalogue: one record per probe (`record.Probe`), each in its own module.
Adding a probe is adding a module with its `PROBE` and naming it in both tuples here.
`probes/trace.py` reads these tuples and `report/explain.py` reads them when called, never a
probe by name."""

from fsbench.probedefs import block, fuse, libfuse, readahead, sched, writeback
from fsbench.probedefs.record import Probe

# Traced, parsed and read in this order (results.json's `probes` status keeps it).
PROBES: tuple[Probe, ...] = (
    fuse.PROBE,
    readahead.PROBE,
    block.PROBE,
    writeback.PROBE,
    sched.PROBE,
    libfuse.PROBE,
)
# Each probe of PROBES once, in the order the explanation lists their factors before ranking
# them: factors of equal weight keep it.
EXPLAINED: tuple[Probe, ...] = (
    fuse.PROBE,
    libfuse.PROBE,
    sched.PROBE,
    writeback.PROBE,
    block.PROBE,
    readahead.PROBE,
)
