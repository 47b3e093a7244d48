"""The probes' catalogues: one record per probe, each in its own module. A kernel trace probe
is a `record.Probe`, named in `PROBES` and `EXPLAINED`; a /proc probe is a
`counter.CounterProbe`, named in `COUNTERS`. `probes/trace.py` and `probes/sample.py` read these
tuples and `report/model/explain.py` reads them when called, never a probe by name."""

from fsbench.records.probes import (
    block,
    device,
    fuse,
    kthreads,
    libfuse,
    meminfo,
    processes,
    readahead,
    sched,
    system,
    writeback,
)
from fsbench.records.probes.counter import CounterProbe
from fsbench.records.probes.record import Probe

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
# The /proc probes, read and diffed around every sample in this order (their flags keep it);
# their factor functions follow the trace probes' in the explanation, each once, in this order.
COUNTERS: tuple[CounterProbe, ...] = (
    processes.APPS,
    processes.DAEMON,
    kthreads.PROBE,
    system.PROBE,
    device.PROBE,
    meminfo.PROBE,
)
