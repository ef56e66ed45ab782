"""The console script ``fgrpo-theory`` (:func:`script`): the CLI, with Ctrl-C during start-up
(while Typer, NumPy and pandas are imported) ending in one line and exit code 130, not a
traceback.

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

:func:`main` cancels the watchdog when it returns or raises, so that a program that calls it in
its own process (and catches the ``SystemExit``) is never ended by it afterwards; the console
script, :func:`script`, arms it again to the same deadline for the interpreter's exit. Where
the library defers a Ctrl-C with its own handler (a sequence run finishing its step, a local
cluster finishing its start), it hands the Ctrl-C on to this handler when it acts on it
(:func:`fgrpo_theory._sigint.deliver`), so the grace period runs from then.
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
#: the armed watchdog's cancel event (``None`` when none is armed) and the monotonic time at
#: which it ends the process; :func:`main` cancels it when it returns or raises
_watch: dict[str, object] = {"cancel": None, "deadline": None}


def reported() -> None:
    """Note that the one ``interrupted`` line has been printed (the watchdog then prints none)."""
    _reported.set()


def _watchdog(deadline: float, cancel: threading.Event) -> None:
    import os
    import time

    if cancel.wait(max(deadline - time.monotonic(), 0.0)):
        return  # main() returned or raised, its caller carries on
    try:
        if not _reported.is_set():
            sys.stderr.write(INTERRUPTED + "\n")
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except Exception:  # noqa: S110 - a closed stream: the exit code still says it
        pass
    os._exit(130)


def _arm(deadline: float) -> None:
    """Start a watchdog that ends the process at ``deadline`` unless :func:`_disarm` comes first."""
    cancel = threading.Event()
    _watch["cancel"], _watch["deadline"] = cancel, deadline
    threading.Thread(
        target=_watchdog, args=(deadline, cancel), name="fgrpo-ctrl-c", daemon=True
    ).start()


def _disarm() -> float | None:
    """Cancel the armed watchdog, if any; return the deadline it had."""
    cancel, deadline = _watch["cancel"], _watch["deadline"]
    _watch["cancel"] = _watch["deadline"] = None
    if isinstance(cancel, threading.Event):
        cancel.set()
    return deadline if isinstance(deadline, float) else None


def _on_sigint(signum: int, frame: object) -> None:
    """Raise KeyboardInterrupt (as Python's handler does) and arm the watchdog once per run.

    The library's own SIGINT handlers (a sequence run's steps, a local cluster's start) defer a
    Ctrl-C and hand it on to the handler they replaced (:func:`fgrpo_theory._sigint.deliver`)
    when they act on it: the watchdog is then armed from that moment."""
    if not _armed.is_set():
        import time

        _armed.set()
        _arm(time.monotonic() + GRACE_SECONDS)
    raise KeyboardInterrupt


def main() -> None:
    """Run the CLI on ``sys.argv``; Ctrl-C ends it with one line and ``SystemExit(130)``.

    Ctrl-C arms the watchdog (the process ends within :data:`GRACE_SECONDS` even if the run's
    cleanup hangs), which is cancelled when this returns or raises: a caller that runs it in its
    own process and catches the ``SystemExit`` carries on. The console script is :func:`script`,
    whose watchdog also bounds the interpreter's exit."""
    import signal

    _reported.clear()  # per run (a caller may run main() more than once in one process)
    _armed.clear()
    _last["deadline"] = None
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
        # the handler is the caller's again and the watchdog is cancelled, for a caller that
        # runs main() in its own process; script() re-arms it for the interpreter's exit
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
        _last["deadline"] = _disarm()


#: the deadline of the last run's watchdog (``None``: no Ctrl-C), for :func:`script`
_last: dict[str, float | None] = {"deadline": None}


def script() -> None:
    """Entry point of the ``fgrpo-theory`` console script: :func:`main`, and after a Ctrl-C the
    watchdog also bounds what follows it, the interpreter's exit (Dask's exit handler closing a
    cluster, threads to join), to the same deadline."""
    try:
        main()
    finally:
        deadline = _last["deadline"]
        if deadline is not None:
            _arm(deadline)
