"""Outside programs a workload drives (servers, clients): started, bounded and always stopped."""
