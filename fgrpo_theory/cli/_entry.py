"""The console script ``fgrpo-theory``: the CLI, with Ctrl-C during start-up (while Typer,
NumPy and pandas are imported) ending in one line and exit code 130, not a traceback.

It lives in the CLI layer (the library never imports the CLI) and imports nothing heavy itself:
:mod:`fgrpo_theory` and :mod:`fgrpo_theory.cli` load their contents on first use, so the
``try`` below covers the imports of the commands too.
"""

from __future__ import annotations

import sys


def main() -> None:
    """Entry point of the ``fgrpo-theory`` console script."""
    try:
        from . import main as cli_main

        cli_main()
    except KeyboardInterrupt:
        print("fgrpo-theory: interrupted", file=sys.stderr)
        sys.exit(130)
