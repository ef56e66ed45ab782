"""The console script's Ctrl-C watchdog (fgrpo_theory.cli._entry): it bounds the run's cleanup
and the interpreter's exit, never outlives main() in a caller's own process, and is armed where
the library defers a Ctrl-C with its own SIGINT handler (fgrpo_theory._sigint.deliver).

Hand cases: a real SIGINT sent by the process to itself; a short grace period set in the child.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[1]
INTERRUPTED_LINE = "fgrpo-theory: interrupted\n"

_CHILD = """
import atexit, os, signal, sys, time
import fgrpo_theory.cli as cli
import fgrpo_theory.cli._entry as entry

entry.GRACE_SECONDS = 0.3

def command():  # the CLI's run: a real Ctrl-C arrives while it runs
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(5)

cli.main = command
"""


def _child(code: str) -> tuple[subprocess.CompletedProcess, float]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    t0 = time.monotonic()
    r = subprocess.run(
        [sys.executable, "-c", _CHILD + code], capture_output=True, text=True, env=env, timeout=60
    )
    return r, time.monotonic() - t0


def test_an_in_process_caller_outlives_the_grace_period():
    """Before: the watchdog armed by the Ctrl-C stayed armed after main() raised SystemExit(130),
    and ended the caller's process 0.3 s later (exit 130, 'alive' never printed)."""
    r, _ = _child(
        "try:\n    entry.main()\nexcept SystemExit as e:\n    print('exit', e.code, flush=True)\n"
        "time.sleep(1.5)\nprint('alive', flush=True)\n"
    )
    assert (r.returncode, r.stdout, r.stderr) == (0, "exit 130\nalive\n", INTERRUPTED_LINE)


def test_the_console_script_bounds_the_interpreter_exit():
    """script() (the console script) re-arms the watchdog for the interpreter's exit: an exit
    handler that hangs (as a cluster that does not close would) ends at the deadline, exit 130,
    one line. main() alone leaves the exit unbounded (checked with a 2 s hang)."""
    hang = "atexit.register(time.sleep, {})\n"
    r, waited = _child(hang.format(600) + "entry.script()\n")
    assert (r.returncode, r.stdout, r.stderr) == (130, "", INTERRUPTED_LINE)
    assert waited < 10.0, waited
    r, waited = _child(hang.format(2) + "entry.main()\n")
    assert (r.returncode, r.stderr) == (130, INTERRUPTED_LINE) and waited > 2.0


def _recording_handler(calls: list):
    def handler(signum, frame):
        calls.append(signum)
        raise KeyboardInterrupt

    return handler


@pytest.mark.parametrize("presses", [1, 2])
def test_a_sequence_run_hands_its_deferred_ctrl_c_on(presses):
    """interrupt_between_steps defers a Ctrl-C to the end of the step; the handler it replaced
    is called when it acts on it (the first press, at check()) or at once (a second press), not
    before. Before: the replaced handler was never called (the console script's watchdog never
    armed during a sequence run)."""
    from fgrpo_theory.sequence.run import interrupt_between_steps

    calls: list = []
    before = signal.signal(signal.SIGINT, _recording_handler(calls))
    try:
        with interrupt_between_steps() as check:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.01)
            assert calls == []
            if presses == 2:
                with pytest.raises(KeyboardInterrupt, match="^$"):
                    os.kill(os.getpid(), signal.SIGINT)
                    time.sleep(1)
            else:
                with pytest.raises(KeyboardInterrupt, match=r"^rl step 3/5$"):
                    check("rl", 3, 5)
        assert calls == [signal.SIGINT]
    finally:
        signal.signal(signal.SIGINT, before)


def test_the_watchdog_arms_when_the_library_acts_on_a_deferred_ctrl_c(monkeypatch):
    """The console script's own handler under a sequence run: armed at check(), not at the
    signal (the run finishes its step first), and cancelled here by hand."""
    from fgrpo_theory.cli import _entry
    from fgrpo_theory.sequence.run import interrupt_between_steps

    monkeypatch.setattr(_entry, "GRACE_SECONDS", 600.0)
    _entry._state["armed"] = False
    before = signal.signal(signal.SIGINT, _entry._on_sigint)
    try:
        with interrupt_between_steps() as check:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.01)
            assert _entry._state["cancel"] is None
            with pytest.raises(KeyboardInterrupt, match=r"^sft step 1/2$"):
                check("sft", 1, 2)
        cancel = _entry._state["cancel"]
        assert isinstance(cancel, threading.Event) and not cancel.is_set()
    finally:
        signal.signal(signal.SIGINT, before)
        assert _entry._disarm() is not None
        _entry._state["armed"] = False
    assert cancel.is_set()


def test_a_local_cluster_start_hands_its_deferred_ctrl_c_on(monkeypatch):
    """start_local_cluster defers a Ctrl-C that lands while the cluster starts until it is
    whole; it then calls the handler it replaced and raises. A fake Dask whose LocalCluster gets
    the Ctrl-C while it is built (no processes are started)."""
    pytest.importorskip("dask")
    from fgrpo_theory import _local_cluster

    monkeypatch.setattr(_local_cluster, "_start_fork_server", lambda d: None)
    calls: list = []

    def cluster(**kw):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.01)
        assert calls == []  # deferred
        return "cluster"

    fake = SimpleNamespace(LocalCluster=cluster, Client=lambda c: ("client", c))
    ex = SimpleNamespace(spec=SimpleNamespace(n_workers=1, text="local-cluster:1"), retries=0,
                         dashboard=False, cluster=None, client=None)  # fmt: skip
    before = signal.signal(signal.SIGINT, _recording_handler(calls))
    try:
        with pytest.raises(KeyboardInterrupt):
            _local_cluster.start_local_cluster(ex, fake)
        assert calls == [signal.SIGINT] and ex.client == ("client", "cluster")
    finally:
        signal.signal(signal.SIGINT, before)
