"""Format commands that keep background work out of the samples."""

from __future__ import annotations

from dataclasses import replace

import pytest

from fsbench.lab.formats import FORMATS
from fsbench.records.choices import by_name


def test_ext4_writes_its_inode_tables_and_journal_at_mkfs() -> None:
    # Lazily, ext4lazyinit writes ~32 MB for ~2 s after every mount of every copy: inside the
    # first samples of whichever subject was mounted last.
    argv = FORMATS["ext4"].command("/dev/loop9")
    assert argv[0] == "mkfs.ext4" and argv[-1] == "/dev/loop9"
    opts = argv[argv.index("-E") + 1].split(",")
    assert {"lazy_itable_init=0", "lazy_journal_init=0"} <= set(opts)


def test_a_table_of_records_keeps_their_order_and_refuses_a_name_twice() -> None:
    ext4, xfs = FORMATS["ext4"], FORMATS["xfs"]
    assert list(by_name(xfs, ext4)) == ["xfs", "ext4"]
    with pytest.raises(ValueError, match="'xfs'"):
        by_name(xfs, ext4, replace(ext4, name="xfs"))
