"""The schedule's dimensions beside workload variants: CPU placement (`--placement`) and
client hosts (`--clients`); each wraps or composes a workload so one result is one point."""
