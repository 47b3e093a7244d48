"""Errors that end a command with a one-line message and a documented exit code.

Exit codes (the command-line contract; docs/commands.md's table):
0 every subject measured and every volume sound, 1 some subject or workload failed, 2 bad usage
or input, 3 this machine lacks something needed (not root, a driver or tool missing), 4 some
volume failed its integrity check after the workloads (results still stored and printed),
130 interrupted.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_ENVIRONMENT = 3
EXIT_INTEGRITY = 4
EXIT_INTERRUPTED = 130


class FsbenchError(Exception):
    """Base: carries the exit code; the message is one line a person can act on."""

    exit_code = EXIT_FAILED


class UsageError(FsbenchError):
    """The user asked for something that cannot be: unknown driver, bad size, bad option."""

    exit_code = EXIT_USAGE


class EnvironmentProblem(FsbenchError):
    """The machine lacks something: root, a driver, a tool, /dev/fuse."""

    exit_code = EXIT_ENVIRONMENT


class LabError(FsbenchError):
    """Something failed while building or tearing down a lab (mkfs, mount, losetup)."""

    exit_code = EXIT_FAILED


class WorkloadFailed(FsbenchError):
    """The workload could not run on this subject (ENOSPC, EIO, a tool failed, a service it
    drives did not answer): the result fails, the run goes on."""


class Unsupported(FsbenchError):
    """The file system cannot do what the workload needs (chmod on vfat): not a failure."""
