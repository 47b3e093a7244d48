"""USDT probes in FUSE daemons: which daemon binaries carry one (their ELF notes) and the
attach points of a probe record that uses them (`Probe.usdt`; the record is
records/probes/libfuse.py: a FUSE request's time split into waiting for the daemon and the daemon's
work, for daemons built with libfuse's probes: fsbench's passthrough_hp and fuse2fs-3.18).

libfuse 3.18 (built with -Denable-usdt) has three static probes, provider `libfuse`:
`request_receive(err)` after the daemon's read of /dev/fuse returns, `request_process(opcode,
unique)` as it starts to handle a request (`unique` truncated to 32 bits), `request_reply(unique,
len, error, reply_err)` after a reply was written. With the kernel's `fuse_request_send` (the
request queued) and `fuse_request_end` (its reply arrived) they split a request's latency:

    send ── waiting for the daemon ──> request_process ── the daemon's work and its reply ──> end

The reply's own time is not split off: `request_reply` fires after the reply's write (when the
kernel has already ended the request), and not at all for replies spliced from a pipe (READ
with splice), so it marks no start of the reply.

Checked on this machine (Linux 6.18, bpftrace 0.17, libfuse 3.18.3): bpftrace attaches
`usdt:PATH:libfuse:request_process` to the statically linked daemons; over /dev/fuse every
request fires it (including those of the passthrough transport that still reach the daemon);
over io_uring none does: libfuse 3.18.3's io_uring path (`fuse_session_process_uring_cqe`)
has no probe, so the split is not measured there and the explanation says why.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from pathlib import Path

from fsbench.records.probes.libfuse import NO_DAEMON


def stapsdt_notes(path: str | Path) -> list[tuple[str, str]]:
    """(provider, name) of every SystemTap/USDT note in an ELF file's `.note.stapsdt` section;
    [] for a file that is no 64-bit little-endian ELF or has no such section. OSError when it
    cannot be read."""
    data = Path(path).read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return []
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    if not shoff or shstrndx >= shnum:
        return []

    def section(i: int) -> tuple[int, int, int]:  # name offset, file offset, size
        base = shoff + i * shentsize
        (name,) = struct.unpack_from("<I", data, base)
        offset, size = struct.unpack_from("<QQ", data, base + 0x18)
        return name, offset, size

    _, stroff, _ = section(shstrndx)
    for i in range(shnum):
        name, offset, size = section(i)
        end = data.index(b"\0", stroff + name)
        if data[stroff + name : end] == b".note.stapsdt":
            return _parse_notes(data[offset : offset + size])
    return []


def _parse_notes(notes: bytes) -> list[tuple[str, str]]:
    out, at = [], 0
    while at + 12 <= len(notes):
        namesz, descsz, kind = struct.unpack_from("<III", notes, at)
        name_at = at + 12
        desc_at = name_at + (namesz + 3) // 4 * 4
        owner = notes[name_at : name_at + namesz].rstrip(b"\0")
        if owner == b"stapsdt" and kind == 3:
            # desc: probe pc, base, semaphore (3 x 8 bytes), then provider, name, arguments.
            strings = notes[desc_at + 24 : desc_at + descsz].split(b"\0")
            if len(strings) >= 2:
                out.append(
                    (strings[0].decode(errors="replace"), strings[1].decode("ascii", "replace"))
                )
        at = desc_at + (descsz + 3) // 4 * 4
    return out


def usable(binaries: Iterable[str], probe: tuple[str, str]) -> tuple[list[str], str]:
    """The daemons that carry the USDT probe (provider, name), and (when none does) why a
    probe record on it is unavailable."""
    provider, name = probe
    good, why = [], []
    for b in dict.fromkeys(binaries):
        try:
            notes = stapsdt_notes(b)
        except OSError as e:
            why.append(f"{b}: unreadable ({e.strerror or e})")
            continue
        if probe in notes:
            good.append(b)
        else:
            why.append(f"{b} has no USDT probe {provider}:{name} (built without USDT)")
    if good:
        return good, ""
    if not why:
        return [], f"{NO_DAEMON} (passthrough_hp, fuse2fs-3.18)"
    return [], "; ".join(why)


def fill(script: str, binaries: Iterable[str], probe: tuple[str, str]) -> str:
    """A USDT probe record's script with `{usdt}` replaced by its attach points, one per
    binary (bpftrace attaches a uprobe to the file: daemons started later are covered)."""
    provider, name = probe
    return script.replace("{usdt}", ",\n".join(f"usdt:{b}:{provider}:{name}" for b in binaries))
