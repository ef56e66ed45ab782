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

Importing this module imports no other module (``_signal`` is built into CPython; ``threading``
and ``time`` come with the first Ctrl-C), nor do :mod:`fgrpo_theory` and :mod:`fgrpo_theory.cli`:
the handler is installed well within a millisecond of the project's first line
(``docs/reliability.md``, Known gaps, says what remains before it).
"""

import sys

try:  # the C module behind :mod:`signal`, which would import enum (milliseconds) before main()
    import _signal as signal
except ImportError:  # pragma: no cover - not CPython
    import signal  # type: ignore[no-redef]

#: Seconds after a Ctrl-C by which the process has ended, one way or the other (a local Dask
#: cluster closing on a loaded machine was measured at up to 7.6 s).
GRACE_SECONDS = 10.0
#: The line a Ctrl-C ends with (``cli._main`` adds what was done, when it knows).
INTERRUPTED = "fgrpo-theory: interrupted"

#: per run of :func:`main`: whether the one line was printed, whether a Ctrl-C armed the
#: watchdog; the armed watchdog's cancel event and the monotonic time at which it ends the
#: process (``None``: none armed); the deadline the last run ended with, for :func:`script`
_state: dict[str, object] = {
    "reported": False, "armed": False, "cancel": None, "deadline": None, "last": None
}  # fmt: skip


def reported() -> None:
    """Note that the one ``interrupted`` line has been printed (the watchdog then prints none)."""
    _state["reported"] = True


def _watchdog(deadline: float, cancel) -> None:  # cancel: a threading.Event
    import os
    import time

    if cancel.wait(max(deadline - time.monotonic(), 0.0)):
        return  # main() returned or raised, its caller carries on
    try:
        if not _state["reported"]:
            sys.stderr.write(INTERRUPTED + "\n")
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except Exception:  # noqa: S110 - a closed stream: the exit code still says it
        pass
    os._exit(130)


def _arm(deadline: float) -> None:
    """Start a watchdog that ends the process at ``deadline`` unless :func:`_disarm` comes first."""
    import threading

    cancel = threading.Event()
    _state["cancel"], _state["deadline"] = cancel, deadline
    threading.Thread(
        target=_watchdog, args=(deadline, cancel), name="fgrpo-ctrl-c", daemon=True
    ).start()


def _disarm() -> float | None:
    """Cancel the armed watchdog, if any; return the deadline it had."""
    cancel, deadline = _state["cancel"], _state["deadline"]
    _state["cancel"] = _state["deadline"] = None
    if cancel is not None:
        cancel.set()  # type: ignore[attr-defined] - a threading.Event
    return deadline if isinstance(deadline, float) else None


def _on_sigint(signum: int, frame: object) -> None:
    """Raise KeyboardInterrupt (as Python's handler does) and arm the watchdog once per run.

    The library's own SIGINT handlers (a sequence run's steps, a local cluster's start) defer a
    Ctrl-C and hand it on to the handler they replaced (:func:`fgrpo_theory._sigint.deliver`)
    when they act on it: the watchdog is then armed from that moment."""
    if not _state["armed"]:
        import time

        _state["armed"] = True
        _arm(time.monotonic() + GRACE_SECONDS)
    raise KeyboardInterrupt


def main() -> None:
    """Run the CLI on ``sys.argv``; Ctrl-C ends it with one line and ``SystemExit(130)``.

    Ctrl-C arms the watchdog (the process ends within :data:`GRACE_SECONDS` even if the run's
    cleanup hangs), which is cancelled when this returns or raises: a caller that runs it in its
    own process and catches the ``SystemExit`` carries on. The console script is :func:`script`,
    whose watchdog also bounds the interpreter's exit."""
    # per run (a caller may run main() more than once in one process)
    _state.update(reported=False, armed=False, last=None)
    previous = None
    try:
        try:
            previous = signal.signal(signal.SIGINT, _on_sigint)
        except ValueError:  # not the main thread: no handler there (nor a Ctrl-C)
            pass
        from . import main as cli_main

        cli_main()
    except KeyboardInterrupt:
        if not _state["reported"]:
            print(INTERRUPTED, file=sys.stderr)
            _state["reported"] = True
        sys.exit(130)
    finally:
        # the handler is the caller's again and the watchdog is cancelled, for a caller that
        # runs main() in its own process; script() re-arms it for the interpreter's exit
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
        _state["last"] = _disarm()


def script() -> None:
    """Entry point of the ``fgrpo-theory`` console script: :func:`main`, then the process ends
    through :func:`_end` (its exit handlers run, its streams are flushed, and the interpreter's
    teardown is skipped). After a Ctrl-C the watchdog also bounds what follows :func:`main` (Dask's
    exit handler closing a cluster, threads to join) to the same deadline."""
    try:
        main()
        status: object = 0
    except SystemExit as e:
        status = e.code
    finally:  # (an error other than SystemExit goes on to Python's own exit: its traceback)
        deadline = _state["last"]
        if isinstance(deadline, float):
            _arm(deadline)
    _end(status)


def _end(status: object) -> None:
    """End the process as ``sys.exit(status)`` would, without the interpreter's teardown.

    Python's exit joins the threads that are not daemons, runs the :mod:`atexit` handlers,
    flushes the standard streams, and then frees every module and object one by one: after a
    ``simulate`` that last part alone took 0.3 s warm and 0.6 s on a cold start (Numba's and
    pandas' objects; 2-core machine, Nov 2026), longer than the run. Here the handlers run and
    the open streams are flushed as Python would (a flush that fails gives status 120, as there,
    with one line naming the stream), then :func:`os._exit` ends the process. What the teardown
    would still do is call finalizers of objects nobody closed; this package writes every file
    inside a ``with`` block, and a ``TemporaryDirectory`` or a ``weakref.finalize`` clean-up runs
    as an exit handler (an open ``NamedTemporaryFile`` would not be removed: none is left open).
    Python's own exit is kept where something may need the teardown: a thread that is not a
    daemon is alive, a tracer or profiler is set (coverage, cProfile write their data after the
    program), Python's development mode (its warnings at teardown), or no
    ``atexit._run_exitfuncs``."""
    import atexit
    import os
    import threading

    run_handlers = getattr(atexit, "_run_exitfuncs", None)
    waiting = [
        t for t in threading.enumerate()
        if t.is_alive() and not t.daemon and t is not threading.main_thread()
    ]  # fmt: skip
    if waiting or run_handlers is None or sys.gettrace() or sys.getprofile() or sys.flags.dev_mode:
        sys.exit(status)
    if status is None:
        code = 0
    elif isinstance(status, int):
        # as CPython: a status that is no C long exits -1 (255)
        code = status if -(2**63) <= status < 2**63 else -1
    else:  # as Python prints a SystemExit's message
        try:
            print(status, file=sys.stderr)
        except Exception:  # noqa: S110 - a closed stream: the status still says it
            pass
        code = 1
    run_handlers()
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is None or getattr(stream, "closed", False):  # Python skips it too
            continue
        try:
            stream.flush()
        except Exception as e:  # a closed pipe, a full disk
            code = 120
            try:
                os.write(2, f"fgrpo-theory: {name}: {e}\n".encode(errors="replace"))
            except OSError:
                pass
    os._exit(code & 0xFF)  # the status the OS keeps of sys.exit(code)
