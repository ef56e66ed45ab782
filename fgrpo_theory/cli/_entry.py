"""The console script ``fgrpo-theory``: the CLI, with Ctrl-C during start-up (while Typer,
NumPy and pandas are imported) ending in one line and exit code 130, not a traceback.

It lives in the CLI layer (the library never imports the CLI) and imports nothing heavy itself:
:mod:`fgrpo_theory` and :mod:`fgrpo_theory.cli` load their contents on first use, so the
``try`` below covers the imports of the commands too.

Ctrl-C is honoured within :data:`GRACE_SECONDS` whatever the process is doing when it arrives:
the handler raises KeyboardInterrupt as Python's own does (the run stops at its next return to
Python: kernels run in chunks of about half a second, and results are written atomically, so
none is half written), and also starts a watchdog thread. If the process is still alive when
the grace period ends (stuck in cleanup: a lock, a thread to join, a slow interpreter exit on a
loaded machine), the watchdog prints the one line (unless it was printed) and ends the process
with ``os._exit(130)``. A file being written at that moment is a temporary with this process's
id in its name (:func:`fgrpo_theory._io.create_temp`), never a half-written result.
"""

from __future__ import annotations

import sys
import threading

#: Seconds after a Ctrl-C by which the process has ended, one way or the other (a local Dask
#: cluster closing on a loaded machine was measured at up to 7.6 s).
GRACE_SECONDS = 10.0
#: The line a Ctrl-C ends with (``cli._main`` adds what was done, when it knows).
INTERRUPTED = "fgrpo-theory: interrupted"

_reported = threading.Event()
_armed = threading.Event()


def reported() -> None:
    """Note that the one ``interrupted`` line has been printed (the watchdog then prints none)."""
    _reported.set()


def _watchdog(grace: float) -> None:
    import os
    import time

    time.sleep(grace)
    try:
        if not _reported.is_set():
            sys.stderr.write(INTERRUPTED + "\n")
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except Exception:  # noqa: S110 - a closed stream: the exit code still says it
        pass
    os._exit(130)


def _on_sigint(signum: int, frame: object) -> None:
    """Raise KeyboardInterrupt (as Python's handler does) and arm the watchdog once."""
    if not _armed.is_set():
        _armed.set()
        threading.Thread(
            target=_watchdog, args=(GRACE_SECONDS,), name="fgrpo-ctrl-c", daemon=True
        ).start()
    raise KeyboardInterrupt


def main() -> None:
    """Entry point of the ``fgrpo-theory`` console script."""
    import signal

    _reported.clear()  # per run (a caller may run main() more than once in one process)
    previous = None
    try:
        if threading.current_thread() is threading.main_thread():
            previous = signal.signal(signal.SIGINT, _on_sigint)
        from . import main as cli_main

        cli_main()
    except KeyboardInterrupt:
        if not _reported.is_set():
            print(INTERRUPTED, file=sys.stderr)
            _reported.set()
        sys.exit(130)
    finally:
        # a watchdog already armed keeps running (it also bounds the interpreter's exit); the
        # handler is the caller's again, for a caller that runs main() in its own process
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
