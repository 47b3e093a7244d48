"""Format commands that keep background work out of the samples."""

from __future__ import annotations

from fsbench.lab.formats import FORMATS


def test_ext4_writes_its_inode_tables_and_journal_at_mkfs() -> None:
    # Lazily, ext4lazyinit writes ~32 MB for ~2 s after every mount of every copy: inside the
    # first samples of whichever subject was mounted last.
    argv = FORMATS["ext4"].command("/dev/loop9")
    assert argv[0] == "mkfs.ext4" and argv[-1] == "/dev/loop9"
    opts = argv[argv.index("-E") + 1].split(",")
    assert {"lazy_itable_init=0", "lazy_journal_init=0"} <= set(opts)
