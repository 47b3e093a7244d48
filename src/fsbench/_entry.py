"""The `fsbench` command's entry point: imports the command line behind a guard, since a
Ctrl-C during the second of imports must end quietly (exit 130), not with a traceback."""

from __future__ import annotations

import sys


def main() -> None:
    try:
        from fsbench.cli.app import main as cli_main
    except KeyboardInterrupt:
        sys.stderr.write("fsbench: interrupted\n")
        sys.exit(130)
    cli_main()
