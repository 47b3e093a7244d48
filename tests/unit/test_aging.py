"""Aged images without root: the workload's determinism on a plain directory, the cache key,
the cache's digest check and atomic store, and the probes' parsers on canned input."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from fsbench.aging import imagecache, measure
from fsbench.aging.formats import AGED_FORMATS
from fsbench.aging.recipe import PROFILES, Ager, Profile, parse_ages, sample_size
from fsbench.errors import UsageError
from fsbench.lab import state
from fsbench.lab.state import StateRecord
from fsbench.lab.subject import parse_subjects, with_ages

TINY = Profile("tiny", 0.5, 1.0, "test scale")


def _tree(root: Path) -> dict[str, int]:
    return {
        str(p.relative_to(root)): p.stat().st_size for p in sorted(root.rglob("*")) if p.is_file()
    }


def test_parse_ages() -> None:
    assert parse_ages("none,light") == ["none", "light"]
    assert parse_ages("HEAVY") == ["heavy"]
    for bad in ("old", "none,none", "", "light,"):
        with pytest.raises(UsageError):
            parse_ages(bad)


def test_with_ages_makes_one_subject_per_profile() -> None:
    specs = with_ages(parse_subjects(["ext4", "ntfs-3g:big_writes"]), ["none", "light"])
    assert [s.id for s in specs] == [
        "ext4",
        "ext4 (aged:light)",
        "ntfs-3g:big_writes",
        "ntfs-3g:big_writes (aged:light)",
    ]
    assert [s.age for s in specs] == ["none", "light", "none", "light"]
    assert len({s.slug for s in specs}) == 4


def test_same_seed_same_tree_other_seed_other_tree(tmp_path: Path) -> None:
    capacity = 64 * 1024 * 1024
    trees, stats = [], []
    for name, seed in (("a", 7), ("b", 7), ("c", 8)):
        st = Ager(str(tmp_path / name), TINY, seed, capacity).run()
        trees.append(_tree(tmp_path / name))
        stats.append(st)
    assert trees[0] == trees[1] and stats[0].ops == stats[1].ops
    assert trees[0] != trees[2]
    st = stats[0]
    # It filled to the target and churned a volume's worth, with every kind of operation.
    # Within the band give or take one write from its edge (a file up to 8 MiB, an append).
    assert abs(st.live_bytes - capacity * 0.5) < capacity * 0.5 * 0.02 + 9 * 1024 * 1024
    assert st.bytes_written >= capacity * 1.5
    assert all(st.ops[k] > 0 for k in ("create", "delete", "append", "overwrite", "rename"))
    assert sum(trees[0].values()) == st.live_bytes


def test_sizes_follow_the_profile_buckets() -> None:
    import random

    rnd = random.Random(1)
    sizes = np.array([sample_size(rnd) for _ in range(20000)])
    assert sizes.min() >= 1 and sizes.max() <= 8 * 1024 * 1024
    # The agrawal profile's heaviest buckets are 512 B-8 KiB (136 of 230 weights).
    share = ((sizes > 128) & (sizes <= 8192)).mean()
    assert 0.55 < share < 0.64


def _recipe(**kw: object) -> imagecache.Recipe:
    base = imagecache.Recipe(
        "ext4",
        "light",
        1,
        1 << 30,
        "ext4",
        "Linux 6.18",
        "nodelalloc",
        AGED_FORMATS["ext4"].mkfs,
        (("mkfs.ext4", "mke2fs 1.47.0"),),
    )
    return replace(base, **kw)  # type: ignore[arg-type]


def test_cache_key_covers_the_recipe() -> None:
    key = _recipe().key
    assert key == _recipe().key and key.startswith("ext4-light-")
    changed = [
        _recipe(mkfs=(*AGED_FORMATS["ext4"].mkfs, "-b", "1024")),  # a mkfs option
        _recipe(seed=2),
        _recipe(size=1 << 29),
        _recipe(profile="heavy"),
        _recipe(driver_version="Linux 6.19"),
        _recipe(tools=(("mkfs.ext4", "mke2fs 1.47.1"),)),
        _recipe(mount_options=""),
    ]
    assert len({r.key for r in changed} | {key}) == len(changed) + 1


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> StateRecord:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(state, "STATE_DIR", tmp_path / "state")
    return StateRecord("t-run", os.getpid(), str(tmp_path / "img"), str(tmp_path / "mnt"))


def _image(path: Path) -> Path:
    data = bytearray(os.urandom(1 << 20)) + bytes(24 << 20)  # data, then holes
    path.write_bytes(data)
    return path


def test_store_then_restore_checks_the_digest(cache: StateRecord, tmp_path: Path) -> None:
    img = _image(tmp_path / "aged.img")
    digest = imagecache.store("k1", img, {"profile": "light"}, cache)
    assert json.loads((imagecache.cache_root() / "k1.json").read_text())["image_digest"] == digest
    assert cache.temp_paths == [] and not list(imagecache.cache_root().glob("fsbench-*"))
    out = tmp_path / "copy.img"
    assert imagecache.restore("k1", digest, out, sparse=False)
    assert out.read_bytes() == img.read_bytes()
    # The cached copy is sparse on disk: its zero chunks are holes.
    assert os.stat(imagecache.cache_root() / "k1.img").st_blocks * 512 < 12 << 20


def test_corrupt_cached_image_is_never_used(cache: StateRecord, tmp_path: Path) -> None:
    img = _image(tmp_path / "aged.img")
    digest = imagecache.store("k2", img, {}, cache)
    cached = imagecache.cache_root() / "k2.img"
    with open(cached, "r+b") as f:  # one flipped byte
        f.seek(100)
        b = f.read(1)
        f.seek(100)
        f.write(bytes([b[0] ^ 0xFF]))
    out = tmp_path / "copy.img"
    assert not imagecache.restore("k2", digest, out, sparse=False)
    assert not out.exists()  # nothing of it reaches the run
    assert imagecache.lookup("k2") is None and not cached.exists()  # forgotten: aged again


def test_interrupted_store_leaves_no_image(
    cache: StateRecord, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    img = _image(tmp_path / "aged.img")

    def interrupted(src: Path, dst: Path, sparse: bool) -> str:
        dst.write_bytes(src.read_bytes()[:1000])  # half written
        raise KeyboardInterrupt

    monkeypatch.setattr(imagecache, "copy_hashing", interrupted)
    with pytest.raises(KeyboardInterrupt):
        imagecache.store("k3", img, {}, cache)
    root = imagecache.cache_root()
    assert sorted(p.name for p in root.iterdir()) == []
    assert imagecache.lookup("k3") is None


def test_temp_dir_is_recorded_before_it_exists(cache: StateRecord, tmp_path: Path) -> None:
    """A SIGKILL in the middle leaves the temporary directory named in the record, so
    `release` (normal teardown and `fsbench cleanup`) removes it."""
    seen: list[list[str]] = []
    orig = imagecache.copy_hashing

    def spy(src: Path, dst: Path, sparse: bool) -> str:
        seen.append(list(json.loads(Path(cache.path).read_text())["temp_paths"]))
        return orig(src, dst, sparse)

    imagecache.copy_hashing = spy  # type: ignore[assignment]
    try:
        imagecache.store("k4", _image(tmp_path / "a.img"), {}, cache)
    finally:
        imagecache.copy_hashing = orig  # type: ignore[assignment]
    assert seen and seen[0] and Path(seen[0][0]).name.startswith("fsbench-aging-")
    tmp = imagecache.cache_root() / "fsbench-aging-leftover"
    tmp.mkdir()
    (tmp / "image").write_bytes(b"half")
    rec = StateRecord("t-run2", 1, "", "", temp_paths=[str(tmp)])
    state.release(rec)
    assert not tmp.exists()


E2FREEFRAG = """Device: /dev/loop3
Blocksize: 4096 bytes
Total blocks: 262144
Free blocks: 118879 (45.3%)

Min. free extent: 4 KB
Max. free extent: 51768 KB
Avg. free extent: 96 KB
Num. free extent: 4813

HISTOGRAM OF FREE EXTENT SIZES:
Extent Size Range :  Free extents   Free Blocks  Percent
    4K...    8K-  :           736           736    0.62%
  512K... 1024K-  :            61         11092    9.33%
    1M...    2M-  :            27          9243    7.78%
   32M...   64M-  :             1         12942   10.89%
"""


def test_parse_e2freefrag() -> None:
    got = measure.parse_e2freefrag(E2FREEFRAG)
    assert got["free_extents"] == 4813
    assert got["free_bytes"] == 118879 * 4096
    assert got["free_extent_max_bytes"] == 51768 * 1024
    assert got["free_in_extents_ge_1mib"] == round((9243 + 12942) / 118879, 4)


def test_bitmap_free_runs_lsb_first() -> None:
    # clusters 0-1 used, 2-4 free, 5 used, 6-7 free; then 8-9 free (of 10 counted)
    bitmap = bytes([0b00100011, 0b11111100])
    assert measure.bitmap_free_runs(bitmap, 10).tolist() == [3, 4]


def test_decode_runlist_relative_lcns_and_sparse() -> None:
    # 0x21: 1 length byte, 2 offset bytes. Run 1: 16 clusters at LCN 0x100; run 2: sparse
    # (0x01: no offset) 4 clusters; run 3: 8 clusters at 0x100 - 0x10 = 0xF0.
    data = bytes([0x21, 16, 0x00, 0x01, 0x01, 4, 0x11, 8, 0xF0, 0x00])
    assert measure.decode_runlist(data, 0) == [(0x100, 16), (0xF0, 8)]


def test_layout_summary_and_digest() -> None:
    lay = measure.Layout({"a": (10, [(0, 4096)]), "b": (9000, [(8192, 4096), (0, 4096)])})
    lay.files["c"] = (0, [])
    s = lay.summary()
    assert s["files"] == 3 and s["files_without_extents"] == 1
    assert s["extents_per_file_mean"] == 1.5 and s["fragmented_share"] == 0.5
    other = measure.Layout(dict(lay.files))
    assert other.digest() == lay.digest()
    other.files["b"] = (9000, [(8192, 8192)])
    assert other.digest() != lay.digest()
    assert measure._merge([(0, 4096), (4096, 4096), (16384, 1)]) == [(0, 8192), (16384, 1)]


def test_profiles_are_documented() -> None:
    doc = (Path(__file__).parents[2] / "docs" / "aging.md").read_text()
    for name in PROFILES:
        assert f"`{name}`" in doc


def test_aged_budget_is_the_same_for_every_subject() -> None:
    from fsbench.lab.lab import LabSubject
    from fsbench.schedule.targets import FILE_FRACTION, MiB, aged_budget

    specs = with_ages(parse_subjects(["ext4"]), ["none", "light"])
    fresh, aged = (LabSubject(s, "/x") for s in specs)
    assert aged_budget([fresh], 400 * MiB) == 400 * MiB  # no aged image: as before
    aged.aging = {"free_space": {"free_bytes": 500 * MiB}}
    assert aged_budget([fresh, aged], 400 * MiB) == int(500 * FILE_FRACTION) * MiB


def test_report_says_ratio_and_ranking() -> None:
    from fsbench.records.schema import Aging, Result, Run, Subject
    from fsbench.report.model.aging import age_effects, aging_lines, effect_lines

    def subj(sid: str, driver: str, fs: str, age: str | None) -> Subject:
        aging = None
        if age:
            aging = Aging(profile=age, seed=1, key=f"{fs}-k", reference_driver="ext4")
        return Subject(id=sid, driver=driver, fs=fs, kind="kernel", aging=aging)

    def res(sid: str, values: list[float]) -> Result:
        med = sorted(values)[len(values) // 2]
        return Result(
            subject=sid, workload="seq-write", workload_id="seq-write/fsync",
            variant="fsync", params={}, metric="throughput", unit="MiB/s",
            samples=values, median=med,
        )  # fmt: skip

    run = Run(run_id="r", started="", command=[])
    run.subjects = [
        subj("a", "ext4", "ext4", None),
        subj("a (aged:light)", "ext4", "ext4", "light"),
        subj("b", "ntfs-3g", "ntfs", None),
        subj("b (aged:light)", "ntfs-3g", "ntfs", "light"),
    ]
    run.results = [
        res("a", [100, 101, 99, 100, 102]),
        res("a (aged:light)", [40, 41, 39, 40, 42]),
        res("b", [60, 61, 59, 60, 62]),
        res("b (aged:light)", [59, 60, 58, 61, 60]),
    ]
    (e,) = age_effects(run)
    p = e["profiles"]["light"]
    assert round(p["ratios"]["a"].ratio, 2) == 0.40 and p["ratios"]["a"].outcome == "worse"
    assert p["ranking_fresh"] == ["a", "b"] and p["ranking_aged"] == ["b", "a"]
    lines = effect_lines(run)
    assert "ranking (best first) changes with age: fresh a, b; aged b, a" in lines[1]
    assert lines[0].startswith("seq-write: aged:light/fresh a 0.40× ") and "▼" in lines[0]
    assert aging_lines(run)[0].startswith("aged ext4 image: profile light, seed 1")
