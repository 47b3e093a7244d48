"""A minimal 64-bit ELF file with a `.note.stapsdt` section, as a libfuse built with USDT has
(or without it): enough for probes/usdt.py's note reader, without compiling anything."""

from __future__ import annotations

import struct
from pathlib import Path


def _note(provider: str, name: str, args: str) -> bytes:
    owner = b"stapsdt\0"
    desc = struct.pack("<QQQ", 0x1000, 0x2000, 0) + f"{provider}\0{name}\0{args}\0".encode()
    pad = lambda b: b + b"\0" * (-len(b) % 4)  # noqa: E731
    return struct.pack("<III", len(owner), len(desc), 3) + pad(owner) + pad(desc)


def write_elf(path: Path, probes: list[tuple[str, str]]) -> Path:
    """An ELF file whose .note.stapsdt holds `probes` ((provider, name)); none: no section."""
    names = b"\0.shstrtab\0.note.stapsdt\0"
    notes = b"".join(_note(p, n, "4@%edx") for p, n in probes)
    body_at = 64
    strtab_at, notes_at = body_at, body_at + len(names)
    shoff = notes_at + len(notes)
    shoff += -shoff % 8

    def sh(name: int, kind: int, offset: int, size: int) -> bytes:
        return struct.pack("<IIQQQQIIQQ", name, kind, 0, 0, offset, size, 0, 0, 1, 0)

    sections = [sh(0, 0, 0, 0), sh(1, 3, strtab_at, len(names))]
    if probes:
        sections.append(sh(11, 7, notes_at, len(notes)))
    header = b"\x7fELF" + bytes([2, 1, 1]) + b"\0" * 9
    # ET_DYN, x86-64, version 1, no entry or program headers; section headers at shoff.
    fields = (3, 62, 1, 0, 0, shoff, 0, 64, 0, 0, 64, len(sections), 1)
    header += struct.pack("<HHIQQQIHHHHHH", *fields)
    body = header + names + notes
    body += b"\0" * (shoff - len(body))
    path.write_bytes(body + b"".join(sections))
    return path


def libfuse_daemon(path: Path) -> Path:
    """A daemon binary carrying libfuse 3.18's three USDT probes."""
    probes = [("libfuse", "request_reply"), ("libfuse", "request_process")]
    return write_elf(path, [*probes, ("libfuse", "request_receive")])
