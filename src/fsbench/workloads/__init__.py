"""Workloads: fio jobs declared as data, and fsbench's own macro workloads."""
