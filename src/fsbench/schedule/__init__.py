"""The schedule of a run, from options to samples.

plan.py: what the checked options resolve to, before anything exists; dryrun.py shows it.
targets.py: the run's targets, one per mounted lab subject (or one directory).
runner.py: subjects x workloads x rounds, interleaved, adaptive, within the budget.
mounted.py: what the runner may ask of the lab (Mounted: ensure, release, health, discard,
make_cold, evict).
sampler.py: one sample (cache state, placement, probes around the timed run); merge.py makes
the sample record of its iterations. phases.py: where the measuring time went.
dimensions/: the axes the schedule adds beside a workload's variants (placement, clients).
"""
