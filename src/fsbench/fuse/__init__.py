"""FUSE transports (/dev/fuse, io_uring, passthrough), the stacked mount of a daemon serving a
directory, and the FUSE daemons fsbench builds from source (docs/fuse-transports.md)."""
