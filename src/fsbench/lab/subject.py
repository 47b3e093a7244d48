"""A subject is `driver[:mount-options]`: one thing being compared."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from fsbench.errors import UsageError
from fsbench.fuse.transports import DEFAULT as DEFAULT_TRANSPORT
from fsbench.fuse.transports import TRANSPORTS
from fsbench.lab.drivers import DRIVERS, Driver
from fsbench.lab.loops import Knob

# A subject's age is a profile of aging/recipe.py; the lab knows only these: the fresh image's
# name, an aged subject's id, where the aged tree lies on its volume (the integrity check
# re-reads it), and whom to ask for an aged image (AgedImages).
NONE = "none"
AGED_DIR = "aged"


def aged_id(base_id: str, profile: str) -> str:
    # Parentheses, not brackets: rich reads "[...]" in a table cell as markup.
    return base_id if profile == NONE else f"{base_id} (aged:{profile})"


class AgedImages(Protocol):
    """Where the lab's aged images come from: aging/prepare.py, handed to `Lab(aged_images=)`
    by whoever makes the lab. aging/ is built on the lab (loops, mounts, the state record), so
    the lab asks through this and imports nothing of it."""

    def aged_check(self, specs: list[SubjectSpec], backing: str) -> None: ...

    def aged_image(
        self, lab: Any, fs: str, age: str, pristine: Path
    ) -> tuple[list[str], dict[str, Any]]: ...


# Mount options reach a command line: allow what real options use and nothing a shell or
# mount(8) could read as something else (no spaces, quotes, leading dashes).
_OPTION_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+@/-]*(=[A-Za-z0-9_.,+@/:-]*)?$")
# Options that change what is measured or defeat the lab's own control of the mount.
_FORBIDDEN = {"ro", "rw", "remount", "loop", "bind", "move", "defaults"}


@dataclass(frozen=True)
class SubjectSpec:
    id: str
    driver: Driver
    options: str
    # The FUSE transport (fuse/transports.py): named among the options (`passthrough_hp:uring`)
    # by a driver that offers several; "dev-fuse" for every other FUSE driver, "" in the kernel.
    transport: str = ""
    age: str = NONE  # the aging profile of its image (aging/recipe.py); NONE: fresh
    # Made for this subject only (`fsbench tune`'s mkfs and block-device remedies): mkfs
    # options of its own image, and settings of its loop device or FUSE mount (lab/loops.py).
    mkfs: tuple[str, ...] = ()
    knobs: tuple[Knob, ...] = ()

    @property
    def slug(self) -> str:
        """A file name for the id; a short hash keeps ids apart that clean up alike."""
        clean = re.sub(r"[^A-Za-z0-9_.-]+", "_", self.id)
        if clean == self.id:
            return clean
        return f"{clean}-{hashlib.sha1(self.id.encode()).hexdigest()[:6]}"


def parse_subject(text: str) -> SubjectSpec:
    name, _, options = text.strip().partition(":")
    if not name:
        raise UsageError(f"empty subject {text!r}; write driver[:mount-options], e.g. ext4:noatime")
    driver = DRIVERS.get(name)
    if driver is None:
        known = ", ".join(sorted(DRIVERS))
        raise UsageError(f"unknown driver {name!r}; known drivers: {known}")
    opts = [o for o in options.split(",")] if options else []
    for opt in opts:
        if not opt or not _OPTION_RE.fullmatch(opt):
            raise UsageError(f"bad mount option {opt!r} in subject {text!r}")
        if opt.split("=", 1)[0] in _FORBIDDEN:
            raise UsageError(
                f"mount option {opt!r} in {text!r} is managed by fsbench itself; leave it out"
            )
    transport, opts = _transport(driver, opts, text)
    joined = ",".join(opts)
    shown = ",".join(o for o in (transport if transport != DEFAULT_TRANSPORT else "", joined) if o)
    # One spelling per subject: "ext4:" is "ext4", "passthrough_hp:dev-fuse" "passthrough_hp".
    return SubjectSpec(
        id=f"{name}:{shown}" if shown else name, driver=driver, options=joined, transport=transport
    )


def _transport(driver: Driver, opts: list[str], text: str) -> tuple[str, list[str]]:
    """The transport named among the options (at most one), and the mount options left."""
    if driver.kind != "fuse":
        return "", opts
    named = [o for o in opts if o in TRANSPORTS]
    offered = [t for t, _ in driver.transports] or [DEFAULT_TRANSPORT]
    if len(named) > 1:
        raise UsageError(f"subject {text!r} names {len(named)} transports; name one")
    if named and named[0] not in offered:
        raise UsageError(
            f"{driver.name} cannot use the {named[0]} transport: its daemon offers only "
            f"{', '.join(offered)}"
        )
    return (named[0] if named else DEFAULT_TRANSPORT), [o for o in opts if o not in named]


def with_lab_changes(
    spec: SubjectSpec, mkfs: tuple[str, ...] = (), knobs: tuple[Knob, ...] = ()
) -> SubjectSpec:
    """The subject on an image formatted with more mkfs options and/or with block-device
    settings of its own; its id says so ("exfat-fuse (mkfs -c 1M)"), in parentheses like an
    aged subject's (rich reads brackets as markup)."""
    from dataclasses import replace

    mkfs, knobs = (*spec.mkfs, *mkfs), (*spec.knobs, *knobs)
    said = [f"mkfs {' '.join(mkfs)}"] if mkfs else []
    said += [k.text for k in knobs]
    base = spec.id.rsplit(" (", 1)[0] if spec.mkfs or spec.knobs else spec.id
    return replace(spec, id=f"{base} ({', '.join(said)})" if said else base, mkfs=mkfs,
                   knobs=knobs)  # fmt: skip


def parse_subjects(texts: list[str]) -> list[SubjectSpec]:
    specs = [parse_subject(t) for t in texts]
    seen: set[str] = set()
    for s in specs:
        if s.id in seen:
            raise UsageError(f"subject {s.id!r} given twice")
        seen.add(s.id)
    return specs


def with_ages(specs: list[SubjectSpec], ages: list[str]) -> list[SubjectSpec]:
    """Each subject once per aging profile (`--age none,light`), a driver's ages side by side:
    an aged image is another image, so the age is a dimension of the subjects."""
    from dataclasses import replace

    return [replace(s, id=aged_id(s.id, a), age=a) for s in specs for a in ages]
