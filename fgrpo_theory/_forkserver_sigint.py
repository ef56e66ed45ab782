"""Imported only by Python's multiprocessing fork server that :mod:`fgrpo_theory.distributed`
starts for a local Dask cluster (as one of its preloaded modules): the server then ignores
SIGINT, and the fork server hands that disposition to every worker it forks, so the workers
never see the terminal's Ctrl-C (the process that started the cluster gets it and closes them).

The fork server imports its preloaded modules before it saves the signal handlers its children
get, which is what makes this work; importing this module anywhere else would make that process
ignore Ctrl-C, so nothing else imports it.
"""

from __future__ import annotations

import signal

signal.signal(signal.SIGINT, signal.SIG_IGN)
