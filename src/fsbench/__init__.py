"""fsbench: compare file systems, drivers and mount options, and explain why."""

__version__ = "0.1.0"
