"""Imported only by Python's multiprocessing fork server that :mod:`fgrpo_theory._local_cluster`
starts for a local Dask cluster (as one of its preloaded modules): the server then ignores
SIGINT, and the fork server hands that disposition to every worker it forks, so the workers
never see the terminal's Ctrl-C (the process that started the cluster gets it and closes them).

The fork server imports its preloaded modules before it saves the signal handlers its children
get, which is what makes this work; importing this module anywhere else would make that process
ignore Ctrl-C, so nothing else imports it.

The process that starts the fork server blocks SIGINT while it does (the fork server inherits
that mask through fork and exec), so a Ctrl-C during the server's own start-up (the interpreter
importing ``site``, then the preloaded Dask modules) stays pending instead of killing it half
way ("Fatal Python error: init_import_site", or a KeyboardInterrupt traceback from the
preload). Here, once SIGINT is ignored, it is unblocked again: a Ctrl-C still pending is then
discarded (POSIX drops a pending signal whose action is to ignore it).
"""

from __future__ import annotations

import signal

signal.signal(signal.SIGINT, signal.SIG_IGN)
if hasattr(signal, "pthread_sigmask"):  # not on Windows (which has no fork server either)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
