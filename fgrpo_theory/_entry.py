"""The console script ``fgrpo-theory``: the CLI, with Ctrl-C during start-up (while typer,
NumPy and pandas are imported) ending in one line and exit code 130, not a traceback."""

from __future__ import annotations

import sys


def main() -> None:
    """Entry point of the ``fgrpo-theory`` console script."""
    try:
        from .cli import main as cli_main

        cli_main()
    except KeyboardInterrupt:
        print("fgrpo-theory: interrupted", file=sys.stderr)
        sys.exit(130)
