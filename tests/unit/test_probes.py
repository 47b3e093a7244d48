"""Probes: parsers on canned text, ProcFS and diff on canned trees, one live /proc check.

The canned trees under fixtures/proc/{before,after} hold one sample's worth of change;
the expected numbers in the comments are worked out from those files at CLK_TCK 100.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import replace
from pathlib import Path

import pytest

from fsbench.probes import (
    BlockStat,
    ProbeDelta,
    ProbeSpec,
    ProcFS,
    ProcParseError,
    diff,
    kthread_group,
    kthread_patterns_for,
    parse_block_stat,
    parse_meminfo,
    parse_pid_stat,
    parse_proc_stat,
    parse_status_ctxt,
    take_snapshot,
)
from fsbench.records.schema import CPU, Device

FIXTURES = Path(__file__).parent / "fixtures" / "proc"
BEFORE = FIXTURES / "before"
AFTER = FIXTURES / "after"
TCK = 100  # fixed so the tests do not depend on the host's USER_HZ

SPEC = ProbeSpec(
    app_pids=[456, 789],
    daemon_pid=123,
    block_device="loop3",
    kthread_patterns=kthread_patterns_for("loop3", "ext4"),
)


def approx(x: float) -> object:
    return pytest.approx(x, abs=1e-9)


# --------------------------------------------------------------------------- parsers


def test_parse_pid_stat_comm_with_spaces_and_parens() -> None:
    text = (
        "4242 (a) b (c) d) R 17 4242 4242 0 -1 4194304 10 20 30 40 250 125 999 888 20 0 "
        "3 0 31337 1 2 3 0 0 0\n"
    )
    st = parse_pid_stat(text)
    assert st.pid == 4242
    assert st.comm == "a) b (c) d"
    assert st.state == "R"
    assert st.ppid == 17
    assert (st.utime, st.stime) == (250, 125)
    assert st.num_threads == 3
    assert st.starttime == 31337


def test_parse_pid_stat_rejects_garbage() -> None:
    with pytest.raises(ProcParseError):
        parse_pid_stat("no parentheses here")
    with pytest.raises(ProcParseError):
        parse_pid_stat("12 (short) S 1 2")


def test_parse_proc_stat() -> None:
    st = parse_proc_stat((BEFORE / "proc/stat").read_text())
    assert (st.user, st.nice, st.system, st.idle, st.iowait) == (1000, 50, 400, 9000, 120)
    assert (st.irq, st.softirq, st.steal) == (10, 20, 5)
    assert st.busy_ticks == 1000 + 50 + 400 + 10 + 20 + 5
    assert st.ctxt == 500000


def test_parse_proc_stat_short_cpu_line_and_missing_ctxt() -> None:
    st = parse_proc_stat("cpu  1 2 3 4\nctxt 9\n")
    assert (st.busy_ticks, st.idle, st.iowait, st.steal) == (6, 4, 0, 0)
    with pytest.raises(ProcParseError):
        parse_proc_stat("cpu  1 2 3 4 5 6 7 8\n")


def test_parse_status_ctxt() -> None:
    text = "Name:\tx\nvoluntary_ctxt_switches:\t17\nnonvoluntary_ctxt_switches:\t4\n"
    assert parse_status_ctxt(text) == 21
    with pytest.raises(ProcParseError):
        parse_status_ctxt("Name:\tx\n")


def test_parse_block_stat_sectors_are_512_bytes() -> None:
    st = parse_block_stat((AFTER / "sys/block/loop3/stat").read_text())
    assert (st.read_ios, st.read_sectors, st.write_ios, st.write_sectors) == (150, 4096, 260, 16384)
    assert st.read_bytes == 4096 * 512
    assert st.write_bytes == 16384 * 512
    assert st.io_ticks == 90


def test_parse_block_stat_old_kernel_eleven_fields() -> None:
    st = parse_block_stat("1 2 3 4 5 6 7 8 9 10 11\n")
    assert st == BlockStat(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11)
    assert st.discard_ios == 0
    with pytest.raises(ProcParseError):
        parse_block_stat("1 2 3\n")


def test_parse_meminfo_kb_to_bytes() -> None:
    info = parse_meminfo((BEFORE / "proc/meminfo").read_text())
    assert info["MemFree"] == 1000000 * 1024
    assert info["Dirty"] == 12 * 1024
    assert info["HugePages_Total"] == 0  # no unit: a count, not multiplied
    assert info["Hugepagesize"] == 2048 * 1024


@pytest.mark.parametrize(
    ("comm", "group"),
    [
        ("kworker/u8:2-loop3", "kworker"),
        ("kworker/R-xfs-buf/loop3", "kworker"),
        ("jbd2/loop3-8", "jbd2"),
        ("loop3", "loop"),
        ("loop12", "loop"),
        ("xfsaild/loop3", "xfsaild"),
        ("ext4lazyinit", "ext4lazyinit"),
        ("btrfs-transacti", "btrfs-transacti"),
    ],
)
def test_kthread_group(comm: str, group: str) -> None:
    assert kthread_group(comm) == group


def test_kthread_patterns_for() -> None:
    assert kthread_patterns_for("/dev/loop3", "ext4") == [
        "kworker/*",
        "loop3",
        "jbd2/loop3-*",
        "ext4*",
    ]
    patterns = kthread_patterns_for(None)
    assert "xfs*" in patterns and "btrfs*" in patterns and "ext4*" in patterns


# --------------------------------------------------------------------------- ProcFS


def test_system_cpu_seconds() -> None:
    cpu = ProcFS(str(BEFORE), clk_tck=TCK).system_cpu()
    assert cpu.busy_s == approx(14.85)  # 1485 ticks
    assert cpu.iowait_s == approx(1.20)
    assert cpu.idle_s == approx(90.0)
    assert cpu.ctxt == 500000


def test_clk_tck_defaults_to_host() -> None:
    assert ProcFS(str(BEFORE)).clk_tck == os.sysconf("SC_CLK_TCK")


def test_meminfo_selected_keys_in_bytes() -> None:
    assert ProcFS(str(AFTER), clk_tck=TCK).meminfo() == {
        "MemFree": 900000 * 1024,
        "MemAvailable": 8000000 * 1024,
        "Cached": 2100000 * 1024,
        "Dirty": 4096 * 1024,
        "Writeback": 256 * 1024,
    }


def test_process_cpu_whole_group_and_threads() -> None:
    proc = ProcFS(str(BEFORE), clk_tck=TCK).process_cpu(123)
    assert proc is not None
    # user/sys from proc/123/stat: 250 and 100 ticks.
    assert proc.user_s == approx(2.5)
    assert proc.sys_s == approx(1.0)
    assert proc.start_ticks == 5000
    assert sorted(proc.threads) == [123, 124]
    t = proc.threads[124]
    assert t.comm == "fuse ) (worker"
    assert (t.user_s, t.sys_s) == (approx(1.0), approx(0.4))
    assert t.ctx == 23
    # ctx is summed over tasks: 10+2 and 20+3.
    assert proc.ctx == 35
    # The per-thread sum equals the group total while no thread has exited.
    assert sum(t.user_s for t in proc.threads.values()) == approx(proc.user_s)


def test_process_cpu_comm_with_parens() -> None:
    proc = ProcFS(str(AFTER), clk_tck=TCK).process_cpu(789)
    assert proc is not None
    assert proc.comm == "fio (job) x)"
    assert (proc.user_s, proc.sys_s, proc.ctx) == (approx(12.5), approx(2.3), 149)


def test_process_cpu_missing_pid_is_none() -> None:
    assert ProcFS(str(AFTER), clk_tck=TCK).process_cpu(456) is None


def test_process_cpu_thread_vanishing_mid_read(tmp_path: Path) -> None:
    # A task directory without its files: the thread exited between listdir and open.
    shutil.copytree(BEFORE, tmp_path, dirs_exist_ok=True)
    (tmp_path / "proc/123/task/124/status").unlink()
    proc = ProcFS(str(tmp_path), clk_tck=TCK).process_cpu(123)
    assert proc is not None
    assert sorted(proc.threads) == [123]


def test_kernel_threads_filters_on_kthreadd_and_patterns() -> None:
    fs = ProcFS(str(BEFORE), clk_tck=TCK)
    kt = fs.kernel_threads(kthread_patterns_for("loop3", "ext4"))
    # 35 loop4, 36 jbd2/loop30-8 do not match; 37 "loop3" is a user process; 2 is kthreadd.
    assert sorted(kt) == [30, 31, 32, 33, 38]
    assert kt[30].comm == "loop3"
    assert (kt[30].user_s, kt[30].sys_s) == (approx(0.0), approx(5.0))
    assert kt[31].comm == "jbd2/loop3-8"
    assert kt[32].comm == "kworker/u8:2-loop3"
    # "*" still leaves out kthreadd itself and user processes.
    assert sorted(fs.kernel_threads(["*"])) == [30, 31, 32, 33, 35, 36, 38]
    assert fs.kernel_threads([]) == {}


def test_block_stat_disk_partition_and_dev_path() -> None:
    fs = ProcFS(str(BEFORE), clk_tck=TCK)
    assert fs.block_stat("loop3").write_bytes == 8192 * 512
    assert fs.block_stat("/dev/loop3").read_bytes == 2048 * 512
    part = fs.block_stat("sda1")  # only under sys/class/block
    assert (part.read_ios, part.read_bytes, part.write_bytes) == (600, 6000 * 512, 5000 * 512)
    assert fs.block_stat("sda").read_sectors == 900000
    with pytest.raises(FileNotFoundError):
        fs.block_stat("nvme9n1")


# --------------------------------------------------------------------------- diff


def _delta() -> ProbeDelta:
    before = take_snapshot(ProcFS(str(BEFORE), clk_tck=TCK), SPEC)
    after = take_snapshot(ProcFS(str(AFTER), clk_tck=TCK), SPEC)
    # The wall time is the snapshots' own clock readings, fixed here so the test can check it.
    return diff(replace(before, taken=100.0), replace(after, taken=102.5))


def test_diff_system() -> None:
    d = _delta()
    # busy 1995 - 1485 ticks; guest (30) is inside user already and not added.
    assert d.system_busy_s == approx(5.10)
    assert d.system_iowait_s == approx(0.50)
    assert d.system_ctx == 12345
    assert d.seconds == approx(2.5)


def test_diff_daemon_counts_exited_threads_cpu() -> None:
    d = _delta()
    # Group totals 250 -> 400 and 100 -> 180 ticks, including exited thread 124's time.
    assert d.daemon_user_s == approx(1.5)
    assert d.daemon_sys_s == approx(0.8)
    assert d.daemon_s == approx(2.3)
    # Thread 123: 12 -> 35 (+23); new thread 125: 8; exited thread 124: dropped.
    assert d.daemon_ctx == 31
    assert "daemon-threads-exited:1" in d.flags


def test_diff_apps_vanished_pid_and_survivor() -> None:
    d = _delta()
    # 456 exited: counted as nothing; 789: utime 1000 -> 1250, stime 200 -> 230.
    assert d.app_user_s == approx(2.5)
    assert d.app_sys_s == approx(0.3)
    assert d.app_ctx == (140 + 9) - (100 + 5)
    assert "app-exited:456" in d.flags


def test_diff_kernel_threads() -> None:
    d = _delta()
    # loop3 500->650; jbd2 100->130; kworker 32: 200->260 (renamed), new 34: 40,
    # recycled tid 38: new thread with 10. Vanished: 33 and the old 38.
    assert d.kthreads_by_name == {
        "loop": approx(1.5),
        "jbd2": approx(0.3),
        "kworker": approx(0.6 + 0.4 + 0.1),
    }
    assert d.kthreads_s == approx(2.9)
    assert d.kworker_s == approx(1.1)
    assert d.kthreads_dedicated_s == approx(1.8)
    assert "kthread-vanished:2" in d.flags


def test_diff_device_and_meminfo() -> None:
    d = _delta()
    assert d.device == Device(
        read_bytes=(4096 - 2048) * 512,
        write_bytes=(16384 - 8192) * 512,
        read_ios=50,
        write_ios=60,
    )
    assert d.device_busy_ms == 30
    assert d.meminfo_before["Dirty"] == 12 * 1024
    assert d.meminfo_after["Dirty"] == 4096 * 1024


def test_diff_flags_are_exactly_these() -> None:
    assert sorted(_delta().flags) == sorted(
        ["app-exited:456", "daemon-threads-exited:1", "kthread-vanished:2"]
    )


def test_diff_to_cpu() -> None:
    d = _delta()
    cpu = d.to_cpu(app_user_s=7.0, app_sys_s=1.25)
    assert isinstance(cpu, CPU)
    assert (cpu.app_user_s, cpu.app_sys_s) == (7.0, 1.25)
    assert cpu.driver_s == approx(2.3)
    assert cpu.kernel_threads_s == approx(2.9)
    assert cpu.system_busy_s == approx(5.10)
    assert cpu.system_iowait_s == approx(0.50)
    assert d.to_cpu().app_user_s == approx(2.5)  # falls back to app_pids


def test_diff_daemon_exited_started_restarted(tmp_path: Path) -> None:
    spec = ProbeSpec(daemon_pid=123)
    gone = tmp_path / "gone"
    shutil.copytree(AFTER, gone)
    shutil.rmtree(gone / "proc/123")
    fs_before = ProcFS(str(BEFORE), clk_tck=TCK)
    fs_after = ProcFS(str(AFTER), clk_tck=TCK)
    fs_gone = ProcFS(str(gone), clk_tck=TCK)

    d = diff(take_snapshot(fs_before, spec), take_snapshot(fs_gone, spec))
    assert (d.daemon_user_s, d.daemon_sys_s, d.daemon_ctx) == (0.0, 0.0, 0)
    assert d.flags == ["daemon-exited"]

    # Started during the sample: everything it has is in the interval.
    d = diff(take_snapshot(fs_gone, spec), take_snapshot(fs_after, spec))
    assert (d.daemon_user_s, d.daemon_sys_s) == (approx(4.0), approx(1.8))
    assert d.daemon_ctx == 35 + 8
    assert d.flags == ["daemon-started"]

    d = diff(take_snapshot(fs_gone, spec), take_snapshot(fs_gone, spec))
    assert d.flags == ["daemon-missing"]

    # Same pid, later start time: a different process.
    reused = tmp_path / "reused"
    shutil.copytree(AFTER, reused)
    stat = reused / "proc/123/stat"
    stat.write_text(stat.read_text().replace(" 5000 ", " 9999 "))
    d = diff(take_snapshot(fs_before, spec), take_snapshot(ProcFS(str(reused), TCK), spec))
    assert d.daemon_user_s == approx(4.0)
    assert d.flags == ["daemon-restarted"]


def test_diff_device_missing_and_reset(tmp_path: Path) -> None:
    spec = ProbeSpec(block_device="loop3")
    detached = tmp_path / "detached"
    shutil.copytree(AFTER, detached)
    shutil.rmtree(detached / "sys/block/loop3")
    before = take_snapshot(ProcFS(str(BEFORE), clk_tck=TCK), spec)

    d = diff(before, take_snapshot(ProcFS(str(detached), clk_tck=TCK), spec))
    assert d.device == Device()
    assert d.flags == ["device-missing:loop3"]

    # Counters smaller than before: the loop device was re-attached.
    d = diff(take_snapshot(ProcFS(str(AFTER), clk_tck=TCK), spec), before)
    assert d.device == Device()
    assert d.flags == ["device-counters-reset:loop3"]


def test_diff_without_spec_parts_has_no_flags() -> None:
    spec = ProbeSpec()
    fs = ProcFS(str(BEFORE), clk_tck=TCK)
    d = diff(take_snapshot(fs, spec), take_snapshot(ProcFS(str(AFTER), clk_tck=TCK), spec))
    assert d.flags == []
    assert d.kthreads_by_name == {}
    assert d.device == Device()
    assert d.system_ctx == 12345


# --------------------------------------------------------------------------- live /proc


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="needs Linux /proc")
def test_live_proc_busy_loop_shows_user_cpu() -> None:
    fs = ProcFS()
    devices = sorted(os.listdir("/sys/block")) if os.path.isdir("/sys/block") else []
    spec = ProbeSpec(
        app_pids=[os.getpid()],
        block_device=devices[0] if devices else None,
        kthread_patterns=kthread_patterns_for("loop0"),
    )
    before = take_snapshot(fs, spec)
    deadline = time.monotonic() + 0.3
    n = 0
    while time.monotonic() < deadline:
        n += 1
    after = take_snapshot(fs, spec)
    d = diff(before, after)
    assert d.seconds >= 0.3  # the snapshots surround the 0.3 s loop
    assert d.app_user_s > 0.0
    assert d.system_busy_s > 0.0
    assert d.system_ctx > 0  # the whole machine switched tasks at least once in 0.3 s
    assert set(d.meminfo_after) >= {"MemFree", "Cached", "Dirty", "Writeback"}
    assert not any(f.startswith("app-") for f in d.flags)
