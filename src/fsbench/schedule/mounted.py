"""What the runner may ask of the lab: `Mounted`, a subject as the runner sees it (mount it
and get its target, give it back after a turn, is it broken, tear it down). The lab's side is
schedule/targets.py's `LabMounted`; a directory that is always there is `AlwaysMounted`; a
test's fake lab implements it too (tests/unit/test_runner.py's FakeLab)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from fsbench.records.schema import Subject
from fsbench.workloads.base import Target


class Mounted(Protocol):
    """A subject as the runner sees it: what it may ask of the lab that holds it. The lab's
    side is schedule/targets.py's LabMounted; `AlwaysMounted` a directory that is simply there;
    a test's fake lab implements it too. Nothing else of the lab reaches the runner."""

    subject: Subject

    def ensure(self) -> Target:
        """Mounted and sound (mounted again after a release or a cold remount): where to run."""
        ...

    def release(self) -> None:
        """Done with it for this turn (one device shared by subjects: unmounted)."""
        ...

    def health(self) -> str | None:
        """Is the subject itself broken (its FUSE daemon gone)? Why, or None."""
        ...

    def discard(self) -> None:
        """Tear a broken subject down at once (lazy unmount) so nothing hangs on it."""
        ...

    def make_cold(self) -> str | None:
        """Empty every cache between the workload and the device (sync, drop_caches, a FUSE
        remount). None when done, else why it cannot be (nothing was done)."""
        ...

    def evict(self) -> str | None:
        """The cheap cold cache: only the workload's files and the device's buffers evicted.
        None when done, else why not (make_cold then); the device's read counter checks it
        either way."""
        ...


@dataclass
class AlwaysMounted:
    """A subject on a target that is always there (`run --target DIR`, tests): nothing to
    mount, release or discard, and nothing that breaks under it. A cold cache is `cold` where
    the directory's file system allows one (drop_caches), else `cold_impossible` says why."""

    subject: Subject
    target: Target
    cold: Callable[[], None] | None = None
    cold_impossible: str = "not a lab mount"
    evicting: Callable[[], str | None] | None = None

    def ensure(self) -> Target:
        return self.target

    def release(self) -> None:
        pass

    def health(self) -> str | None:
        return None

    def discard(self) -> None:
        pass

    def make_cold(self) -> str | None:
        if self.cold is None:
            return self.cold_impossible
        self.cold()
        return None

    def evict(self) -> str | None:
        return self.evicting() if self.evicting else "no eviction for this target"
