"""Output files written whole or not at all (private; every command and the simulator use it).

A result is written to a temporary file in the destination's folder and renamed over the
destination only once it is complete, so a failing write (disk full, a file-size limit, an
interrupt) leaves any previous file intact and no partial file. Temporary names are
``.<name>.tmp-<pid>-<random><tag><suffix>`` (the suffix is kept so that writers choosing a format
by extension, such as matplotlib, still work), with 64 random bits, created with ``O_CREAT |
O_EXCL | O_NOFOLLOW`` (a file or symlink planted under a guessed name is never opened, let alone
written through), and renamed over the destination with :func:`os.replace`, which replaces a
symlink at the destination rather than writing where it points. ``tag`` is a keyed digest of the
rest of the name when the caller passes a folder key (:mod:`fgrpo_theory._trust`):
:func:`remove_stale_temps` deletes only temporaries whose tag verifies under that key and whose
process is gone, never another file that merely looks like one. Errors are :class:`ValueError`
naming the option and the path.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from ._trust import pid_alive
from ._validate import fail

__all__ = [
    "check_output_path",
    "create_temp",
    "atomic_path",
    "atomic_open",
    "write_atomic",
    "remove_stale_temps",
]

_TMP_RE = re.compile(r"^\.(.+)\.tmp-(\d{1,10})-([0-9a-f]{16})([0-9a-f]{16})(\.[a-z0-9]{1,8})?$")
#: Paths under these folders are devices or kernel files: written in place, never renamed over.
_DEVICE_ROOTS = ("/dev/", "/proc/")


def _describe(e: OSError) -> str:
    return e.strerror or type(e).__name__


def check_output_path(path: str | os.PathLike[str] | None, name: str = "--output") -> Path | None:
    """Check that ``path`` can be written: its folder exists and it is not itself a folder."""
    if path is None:
        return None
    path = Path(path)
    if str(path) == "" or path.is_dir():
        fail(name, str(path), "a file path, not a folder")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        fail(name, str(path), f"a path in an existing folder (no folder '{parent}')")
    return path


def _is_special(path: Path) -> bool:
    """Whether ``path`` is written in place, not renamed over: a device (``/dev/null``; only root
    makes devices), a FIFO or socket the user owns (one the user made) or root owns under
    ``/dev`` or ``/proc``, or a link the system keeps there: a symlink under ``/dev`` or
    ``/proc`` that root or the user owns, in a folder root or the user owns (``/dev/stdout``,
    also when the shell redirected it to a regular file, ``/dev/fd/63`` of a shell's ``>(...)``,
    ``/proc/self/fd/1``; a rename would replace the link itself).

    Everything else is replaced by the result (a temporary renamed over it), never written
    through or into: a symlink outside ``/dev`` and ``/proc``, or another user's symlink anywhere
    (planted in a shared output folder or in the world-writable ``/dev/shm``), a regular file
    (also under ``/dev/shm``: the rename keeps it whole), and another user's FIFO or socket
    (planted at the output path: writing into it would wait for its reader, or hand it the
    result).
    """
    try:
        st = os.lstat(path)
    except OSError:
        return False
    me = os.getuid() if hasattr(os, "getuid") else None
    trusted = {0, me}
    where = os.path.abspath(path)
    system = where.startswith(_DEVICE_ROOTS)
    if stat.S_ISLNK(st.st_mode):
        if not system or (me is not None and st.st_uid not in trusted):
            return False
        try:
            if me is not None and os.lstat(os.path.dirname(where)).st_uid not in trusted:
                return False
            return not stat.S_ISDIR(os.stat(path).st_mode)
        except OSError:
            return False
    mode = st.st_mode
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return False
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return True
    return me is None or st.st_uid == me or (system and st.st_uid == 0)


def _open_fifo(target: Path, shown: Any, name: str) -> int:
    """A descriptor open for writing on ``target`` if it is a FIFO (-1 otherwise), opened
    without blocking: refused in one line when no process reads it (it would wait forever).
    It is the FIFO's only opening: the result goes through it (:func:`_pour`), never through
    a second open of the path, which would wait forever if the reader left in between."""
    try:
        if not stat.S_ISFIFO(os.stat(target).st_mode):
            return -1
        return os.open(target, os.O_WRONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        if e.errno == errno.ENXIO:
            fail(name, str(shown), "a FIFO that a process reads (none reads this one)")
        fail(name, str(shown), f"a writable path ({_describe(e)})")


@contextlib.contextmanager
def _private_file(name: str) -> Iterator[Path]:
    """A path named ``name`` in a fresh folder only this user can open (removed after)."""
    import shutil
    import tempfile

    folder = tempfile.mkdtemp(prefix="fgrpo-theory-")
    try:
        yield Path(folder) / name
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _pour(src: Path, fd: int) -> None:
    """Write the file ``src`` into the non-blocking descriptor ``fd`` of a FIFO, waiting while
    the reader has not taken what was written (interruptible by Ctrl-C). A reader that left
    makes the write fail with ``BrokenPipeError``."""
    import select

    poller = select.poll()  # (not select.select: no limit on the descriptor's number)
    poller.register(fd, select.POLLOUT)
    with open(src, "rb") as fh:
        while chunk := fh.read(1 << 16):
            view = memoryview(chunk)
            while view:
                try:
                    view = view[os.write(fd, view) :]
                except BlockingIOError:
                    poller.poll()


def _tag(key: bytes | None, text: str) -> str:
    """16 hex digits: a keyed digest of ``text`` (random without a key: never verifiable)."""
    import hashlib
    import hmac

    if key is None:
        return secrets.token_hex(8)
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()[:16]


def create_temp(
    folder: Path, stem: str, suffix: str = "", *, key: bytes | None = None, mode: int = 0o666
) -> tuple[int, Path]:
    """Create a fresh temporary file in ``folder``; return ``(fd, path)`` (open for writing).

    The name is ``.<stem>.tmp-<pid>-<random><tag><suffix>``, created with ``O_CREAT | O_EXCL |
    O_NOFOLLOW``: nothing that already exists there (a file, a symlink) is ever opened. Raises
    :class:`OSError` if the folder does not take new files.
    """
    pid = os.getpid()
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    flags |= getattr(os, "O_CLOEXEC", 0)
    for attempt in range(16):
        rand = secrets.token_hex(8)
        head = f".{stem}.tmp-{pid}-{rand}"
        path = Path(folder) / f"{head}{_tag(key, head)}{suffix}"
        try:
            return os.open(path, flags, mode), path
        except FileExistsError:
            if attempt == 15:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


@contextlib.contextmanager
def atomic_path(
    path: str | os.PathLike[str], *, name: str = "--output", key: bytes | None = None
) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; on success rename it to ``path``.

    For writers that take a path (``DataFrame.to_parquet``, ``Figure.savefig``). If the body
    raises, the temporary file is removed and ``path`` is untouched; an :class:`OSError` becomes a
    one-line :class:`ValueError` naming ``name`` and ``path``. Devices such as ``/dev/null`` are
    yielded as they are. ``key``: the folder's key (:mod:`fgrpo_theory._trust`), which lets
    :func:`remove_stale_temps` recognise the temporary as this tool's if the process is killed.
    """
    target = check_output_path(path, name)
    assert target is not None
    if _is_special(target):
        probe = _open_fifo(target, path, name)
        try:
            if probe < 0:  # a device: written in place
                yield target
                return
            # a FIFO: the writer writes a private file, poured into the FIFO once complete
            with _private_file(target.name) as tmp:
                yield tmp
                _pour(tmp, probe)
        except OSError as e:
            fail(name, str(path), f"a writable path ({_describe(e)})")
        finally:
            if probe >= 0:
                os.close(probe)
        return
    # the writer opens the path (and may replace the file, as save_figure does): only its kind
    # is checked before the rename, a regular file and never a symlink
    with _temp_for(target, path, name, key, same_inode=False) as (_fd, tmp):
        yield tmp


def _regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _same_file(fd: int, path: Path) -> bool:
    """Whether ``path`` (not followed) is still the file open as ``fd``."""
    try:
        a, b = os.fstat(fd), os.lstat(path)
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino) and stat.S_ISREG(b.st_mode)


@contextlib.contextmanager
def _temp_for(
    target: Path, shown: Any, name: str, key: bytes | None, same_inode: bool = True
) -> Iterator[tuple[int, Path]]:
    """Yield ``(fd, tmp)``, a fresh temporary next to ``target``; on success rename it over
    ``target`` (after checking ``tmp`` is still the file created); always remove it otherwise."""
    # The folder may be reached through symlinks the user chose; the file name itself is never
    # followed: a symlink there is replaced by the result (os.replace renames over the link).
    folder = target.parent if str(target.parent) else Path(".")
    suffix = target.suffix if re.fullmatch(r"\.[A-Za-z0-9]{1,8}", target.suffix) else ""
    tmp: Path | None = None
    fd = -1
    try:
        try:
            fd, tmp = create_temp(folder, target.stem[:80], suffix.lower(), key=key)
        except OSError as e:
            fail(
                name, str(shown), f"a path in a folder where files can be created ({_describe(e)})"
            )
        try:
            yield fd, tmp
            if not (_same_file(fd, tmp) if same_inode else _regular(tmp)):
                fail(name, str(shown), "a path whose temporary file nobody else replaces")
            os.replace(tmp, target)
            tmp = None
        except OSError as e:
            fail(name, str(shown), f"a writable path ({_describe(e)})")
    finally:
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)
        if tmp is not None:
            with contextlib.suppress(OSError):
                tmp.unlink()


@contextlib.contextmanager
def atomic_open(
    path: str | os.PathLike[str],
    mode: str = "w",
    *,
    name: str = "--output",
    key: bytes | None = None,
    **kwargs: Any,
) -> Iterator[IO[Any]]:
    """Open a temporary file next to ``path`` for writing; rename it to ``path`` when complete.

    ``mode`` is ``"w"`` (text, UTF-8 unless ``encoding`` is given) or ``"wb"``. See
    :func:`atomic_path` for what happens on failure.
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"mode must be 'w' or 'wb'; got {mode!r}")
    if "b" not in mode:
        kwargs.setdefault("encoding", "utf-8")
    target = check_output_path(path, name)
    assert target is not None
    if _is_special(target):
        with atomic_path(path, name=name) as dev:
            try:
                with open(dev, mode, **kwargs) as fh:
                    yield fh
            except OSError as e:
                fail(name, str(path), f"a writable path ({_describe(e)})")
        return
    with _temp_for(target, path, name, key) as (fd, _tmp):
        try:
            # written through the descriptor created with O_EXCL: the name is never reopened
            with open(os.dup(fd), mode, **kwargs) as fh:
                yield fh
                fh.flush()
                with contextlib.suppress(OSError, ValueError):
                    os.fsync(fh.fileno())
        except OSError as e:
            fail(name, str(path), f"a writable path ({_describe(e)})")


def write_atomic(
    path: str | os.PathLike[str],
    data: str | bytes,
    *,
    name: str = "--output",
    key: bytes | None = None,
) -> Path:
    """Write ``data`` (text as UTF-8, or bytes) to ``path`` whole or not at all; return the path."""
    with atomic_open(path, "wb" if isinstance(data, bytes) else "w", name=name, key=key) as fh:
        fh.write(data)
    return Path(path)


#: A temporary written to less than this many seconds ago is never removed as stale: its
#: name's process id is one of this host and PID namespace, and the folder may be shared with
#: another (NFS, a container) where that number names a live writer.
STALE_TEMP_SECONDS = 60.0


def remove_stale_temps(folder: str | os.PathLike[str], key: bytes) -> list[Path]:
    """Delete this tool's temporary files in ``folder`` whose process is gone.

    Only regular files whose name carries a tag that verifies under ``key`` (the folder's key,
    :mod:`fgrpo_theory._trust`) are candidates: a file this tool did not create is never removed,
    whatever its name. Returns the removed paths. Files of live processes are kept, and so are
    files written to in the last :data:`STALE_TEMP_SECONDS`: the PID in a name is one of the
    host that wrote it, and a sweep starting on another host of a shared folder removed
    temporaries that were still being written (the writer then failed).
    """
    import hmac
    import time

    removed = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(folder):
            m = _TMP_RE.match(entry.name)
            if m is None or not entry.is_file(follow_symlinks=False):
                continue
            head = f".{m.group(1)}.tmp-{m.group(2)}-{m.group(3)}"
            if not hmac.compare_digest(m.group(4), _tag(key, head)):
                continue
            if pid_alive(int(m.group(2))):
                continue
            with contextlib.suppress(OSError):
                if time.time() - entry.stat(follow_symlinks=False).st_mtime < STALE_TEMP_SECONDS:
                    continue
            with contextlib.suppress(OSError):
                os.unlink(entry.path)
                removed.append(Path(entry.path))
    return removed
