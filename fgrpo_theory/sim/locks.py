"""Locks of a sweep's result folder: which process computes a config, and when a lock is stale.

While a config runs, ``.<config_hash>.lock`` holds a record naming its holder (PID, host, the
process's start time, a random token), created with ``O_CREAT | O_EXCL`` and never read through
a symlink. Another sweep waits for it, and takes it over when it is stale: not refreshed for
:data:`LOCK_TTL` seconds (the holder touches its locks every :data:`LOCK_HEARTBEAT` seconds),
holding no record of this tool for more than :data:`LOCK_GRACE` seconds, or naming a process on
this host that is gone (or whose PID now belongs to another process, or this very process
without being one of its locks). A lock that is not a regular file (a FIFO, socket, folder or
symlink planted under its name) is no lock of this tool: it is never opened in a way that could
block, and it is moved aside at once; if it cannot be (another user's, in a sticky folder), its
config is computed without a lock, with one line on stderr. Used by
:func:`fgrpo_theory.sim.sweep.run_configs`; split from :mod:`fgrpo_theory.sim.sweep` (file
safety and resume stay there).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import stat
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .._trust import READ_FLAGS, pid_alive
from .grid import config_hash

#: A lock whose file has not been refreshed for this many seconds is stale, whoever holds it.
LOCK_TTL = 600.0
#: Seconds between refreshes (mtime) of the locks a sweep holds.
LOCK_HEARTBEAT = 20.0
#: Seconds an empty or unreadable lock is given for its writer to fill it in.
LOCK_GRACE = 10.0
_HOST = socket.gethostname()
#: Tokens of the locks this process holds (a lock naming our PID with another token is a
#: leftover of an earlier process that had our PID, e.g. PID 1 in a container).
_MY_TOKENS: set[str] = set()


def _start_time(pid: int) -> str | None:
    """The start time of process ``pid`` (clock ticks since boot, ``/proc``), None if unknown."""
    try:
        with open(f"/proc/{int(pid)}/stat", "rb") as fh:
            text = fh.read(4096).decode("ascii", "replace")
        return text.rpartition(")")[2].split()[19]
    except (OSError, IndexError, ValueError):
        return None


#: Who holds a lock that is not a regular file (this tool only ever creates regular files).
NOT_A_LOCK = "nobody: it is not a regular file, so not a lock of this tool"


def _read_lock(lock: Path) -> tuple[bytes, dict[str, Any] | None]:
    """The raw bytes (at most 4 KiB, never through a symlink, never from anything but a regular
    file, never blocking) and the record of a lock, or ``(raw, None)`` if it holds no record of
    this tool."""
    try:
        fd = os.open(lock, READ_FLAGS)
    except OSError:
        return b"", None
    try:
        raw = os.read(fd, 4097) if stat.S_ISREG(os.fstat(fd).st_mode) else b""
    except OSError:
        raw = b""
    finally:
        os.close(fd)
    try:
        rec = json.loads(raw.decode("utf-8")) if len(raw) <= 4096 else None
    except (UnicodeDecodeError, ValueError):
        rec = None
    if not isinstance(rec, dict) or rec.get("tool") != "fgrpo-theory":
        return raw, None
    if not isinstance(rec.get("pid"), int) or not isinstance(rec.get("token"), str):
        return raw, None
    return raw, rec


def _lock_pid(lock: Path) -> int | None:
    """The PID in ``lock``'s record; None if it holds none (empty, garbled, foreign)."""
    rec = _read_lock(lock)[1]
    return None if rec is None else int(rec["pid"])


def _holder(rec: dict[str, Any] | None) -> str:
    if rec is None:
        return "an unknown process (the lock holds no record of this tool)"
    return f"PID {rec['pid']} on host {rec.get('host')!s}"


def _lock_state(lock: Path) -> tuple[bool, str, bytes]:
    """``(stale, holder, raw)``: whether ``lock`` may be taken over, who it names, its bytes.

    Stale: not refreshed for :data:`LOCK_TTL` seconds (its holder refreshes it every
    :data:`LOCK_HEARTBEAT`); or empty or garbled for :data:`LOCK_GRACE` seconds; or naming a
    process of this host that is gone, whose PID was reused since (another start time), or that
    is this very process without being one of its locks.
    """
    if not _regular_or_missing(lock):
        return True, NOT_A_LOCK, b""
    raw, rec = _read_lock(lock)
    age = time.time() - _mtime(lock)
    if age > LOCK_TTL:
        return True, _holder(rec), raw
    if rec is None:
        return age > LOCK_GRACE, _holder(rec), raw
    if rec.get("host") == _HOST:
        pid = rec["pid"]
        if pid == os.getpid():
            return rec["token"] not in _MY_TOKENS, _holder(rec), raw
        if not pid_alive(pid):
            return True, _holder(rec), raw
        started = _start_time(pid)
        if started is not None and rec.get("start") not in (None, started):
            return True, _holder(rec), raw
    return False, _holder(rec), raw


def _try_lock(lock: Path) -> bool:
    """Take ``lock`` (``O_CREAT | O_EXCL``, a record naming this process inside); take over a
    stale lock (:func:`_lock_state`). Returns False while another process holds it."""
    for _ in range(3):
        token = secrets.token_hex(8)
        try:
            fd = os.open(
                lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0), 0o644
            )
        except FileExistsError:
            seen = _identity(lock)  # the file judged: one that replaced it is never taken over
            stale, holder, raw = _lock_state(lock)
            if not stale:
                return False
            foreign = holder == NOT_A_LOCK
            moved = lock.with_name(f"{lock.name}.stale-{os.getpid()}-{secrets.token_hex(4)}")
            try:
                os.replace(lock, moved)
            except FileNotFoundError:
                continue  # someone else took it over first: try again
            except OSError as e:
                if _regular_or_missing(lock):
                    return False
                # a FIFO, socket, device, folder or symlink of another user in a sticky folder:
                # no process holds it and it cannot be moved; waiting for it would never end
                _not_a_lock(lock, e)
                return True
            if (
                _regular_or_missing(moved)
                if foreign
                else _identity(moved) != seen or _read_lock(moved)[0] != raw
            ):
                # raced: we moved a fresh lock, put it back (compared by file, not only by
                # bytes: two empty locks have the same bytes, and a process that had taken over
                # a stale empty lock, its own still empty, lost it to a second one)
                with contextlib.suppress(OSError):
                    os.replace(moved, lock)
                return False
            with contextlib.suppress(OSError):
                moved.unlink()
            continue
        except OSError:
            return False
        record = {
            "tool": "fgrpo-theory",
            "pid": os.getpid(),
            "host": _HOST,
            "start": _start_time(os.getpid()),
            "token": token,
            "since": round(time.time(), 3),
        }
        _MY_TOKENS.add(token)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
        return True
    return False


def _identity(p: Path) -> tuple[int, int, int] | None:
    """``(device, inode, mtime in ns)`` of the file named ``p`` (not followed); None if there is
    none. The time tells a new file from the one it replaced when the file system gives it the
    freed inode again (it did here), and a lock refreshed by its holder from the stale one."""
    try:
        st = os.lstat(p)
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_mtime_ns


def _regular_or_missing(p: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(p).st_mode)
    except OSError:
        return True


#: Locks already reported by :func:`_not_a_lock` (one line each per process).
_REPORTED: set[str] = set()


def _not_a_lock(lock: Path, e: OSError) -> None:
    if str(lock) not in _REPORTED:
        _REPORTED.add(str(lock))
        print(
            f"fgrpo-theory: {lock} is not a lock of this tool (not a regular file) and cannot "
            f"be moved aside ({e.strerror or e}); computing its config without a lock",
            file=sys.stderr,
        )


def _mtime(p: Path) -> float:
    try:
        return os.lstat(p).st_mtime
    except OSError:
        return time.time()


class _Heartbeat:
    """Refresh (touch) the locks of ``held`` every :data:`LOCK_HEARTBEAT` seconds, in a daemon
    thread, so that other sweeps see them alive; a lock not refreshed for :data:`LOCK_TTL` s
    (its process hung, or on another host and gone) is taken over."""

    def __init__(self, paths: Callable[[], list[Path]]) -> None:
        import threading

        self._paths = paths
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fgrpo-lock-heartbeat", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(LOCK_HEARTBEAT):
            for p in self._paths():
                with contextlib.suppress(OSError):
                    os.utime(p, follow_symlinks=False)

    def stop(self) -> None:
        self._stop.set()


def _lock_path(out: Path, cfg: Any, key: Callable[[Any], str] = config_hash) -> Path:
    return out / f".{key(cfg)}.lock"
