"""Handing a deferred Ctrl-C on to the SIGINT handler the library's own replaced.

Two places install a SIGINT handler of their own for a while, to act on Ctrl-C at a safe point
rather than where it lands: a sequence run (:func:`fgrpo_theory.sequence.run.
interrupt_between_steps`, after the running step) and a local Dask cluster's start
(:func:`fgrpo_theory._local_cluster.start_local_cluster`, when the cluster is whole). When they
act on it (and on a second Ctrl-C, which acts at once), they call :func:`deliver` with the
handler they replaced, so that whatever that handler does besides raising KeyboardInterrupt
still happens: the console script's handler arms its watchdog there, which bounds the cleanup
that follows. The library knows nothing of who installed that handler.
"""

from __future__ import annotations

import signal
from typing import Any


def deliver(previous: Any, frame: Any = None) -> None:
    """Call ``previous`` (a handler returned by :func:`signal.signal`) as a SIGINT would have,
    if it is a Python callable; the ``KeyboardInterrupt`` it raises is dropped (the caller
    raises its own, with its message). ``SIG_DFL``, ``SIG_IGN`` and ``None`` are skipped."""
    if not callable(previous):
        return
    try:
        previous(signal.SIGINT, frame)
    except KeyboardInterrupt:
        pass
