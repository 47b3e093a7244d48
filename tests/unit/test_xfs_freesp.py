"""xfs_db `freesp -s` parsing, on output captured once from a fresh 320 MiB mkfs.xfs image."""

from pathlib import Path

from fsbench.aging.measure import parse_xfs_freesp

FIXTURE = Path(__file__).parent / "fixtures" / "xfs_db_freesp.txt"


def test_freesp_gives_the_common_free_space_keys() -> None:
    out = parse_xfs_freesp(FIXTURE.read_text(), block=4096)
    assert out["free_extents"] == 21
    assert out["free_bytes"] == 65504 * 4096
    assert out["free_extent_mean_bytes"] == 65504 * 4096 // 21
    assert out["free_extent_max_bytes"] == 20480 * 4096
    # rows from 2048 blocks (8 MiB) up hold 4086 + 61396 of the 65504 free blocks
    assert out["free_in_extents_ge_1mib"] == round((4086 + 61396) / 65504, 4)


def test_freesp_keys_match_e2freefrag_record() -> None:
    import numpy as np

    from fsbench.aging.measure import free_summary

    common = set(free_summary(np.array([4096, 2 << 20]), 4096 + (2 << 20)))
    assert set(parse_xfs_freesp(FIXTURE.read_text())) == common


def test_freesp_reads_the_block_size_xfs_db_prints_first() -> None:
    text = "blocksize = 1024\n" + FIXTURE.read_text()
    assert parse_xfs_freesp(text)["free_bytes"] == 65504 * 1024
