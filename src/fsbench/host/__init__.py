"""What this host lacks, fetched: Debian packages under a private apt configuration, and the
build cache every source build shares (apt.py), for vm/, fuse/ and lab/ntfsck.py."""
