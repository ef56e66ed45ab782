"""Output files written whole or not at all (private; every command and the simulator use it).

A result is written to a temporary file in the destination's folder and renamed over the
destination only once it is complete, so a failing write (disk full, a file-size limit, an
interrupt) leaves any previous file intact and no partial file. Temporary names are
``.<name>.tmp-<pid>-<random><suffix>`` (the suffix is kept so that writers choosing a format by
extension, such as matplotlib, still work); :func:`remove_stale_temps` deletes those of processes
that are gone. Errors are :class:`ValueError` naming the option and the path.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from ._validate import fail

__all__ = ["check_output_path", "atomic_path", "atomic_open", "write_atomic", "remove_stale_temps"]

_TMP_RE = re.compile(r"^\..+\.tmp-(\d+)-[0-9a-f]+(\.[^.]*)?$")


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
    """A device, FIFO or socket (``/dev/null``, ``/dev/stdout``): written in place, not renamed."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not stat.S_ISREG(mode)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str], *, name: str = "--output") -> Iterator[Path]:
    """Yield a temporary path next to ``path``; on success rename it to ``path``.

    For writers that take a path (``DataFrame.to_parquet``, ``Figure.savefig``). If the body
    raises, the temporary file is removed and ``path`` is untouched; an :class:`OSError` becomes a
    one-line :class:`ValueError` naming ``name`` and ``path``. Devices such as ``/dev/null`` are
    yielded as they are.
    """
    target = check_output_path(path, name)
    assert target is not None
    if _is_special(target):
        try:
            yield target
        except OSError as e:
            fail(name, str(path), f"a writable path ({_describe(e)})")
        return
    real = Path(os.path.realpath(target))
    tmp = real.with_name(f".{real.stem}.tmp-{os.getpid()}-{secrets.token_hex(4)}{real.suffix}")
    try:
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except OSError as e:
            fail(name, str(path), f"a path in a folder where files can be created ({_describe(e)})")
        os.close(fd)
        try:
            yield tmp
            os.replace(tmp, real)
        except OSError as e:
            fail(name, str(path), f"a writable path ({_describe(e)})")
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


@contextlib.contextmanager
def atomic_open(
    path: str | os.PathLike[str], mode: str = "w", *, name: str = "--output", **kwargs: Any
) -> Iterator[IO[Any]]:
    """Open a temporary file next to ``path`` for writing; rename it to ``path`` when complete.

    ``mode`` is ``"w"`` (text, UTF-8 unless ``encoding`` is given) or ``"wb"``. See
    :func:`atomic_path` for what happens on failure.
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"mode must be 'w' or 'wb'; got {mode!r}")
    if "b" not in mode:
        kwargs.setdefault("encoding", "utf-8")
    with atomic_path(path, name=name) as tmp:
        try:
            with open(tmp, mode, **kwargs) as fh:
                yield fh
                fh.flush()
                with contextlib.suppress(OSError, ValueError):
                    os.fsync(fh.fileno())
        except OSError as e:
            fail(name, str(path), f"a writable path ({_describe(e)})")


def write_atomic(
    path: str | os.PathLike[str], data: str | bytes, *, name: str = "--output"
) -> Path:
    """Write ``data`` (text as UTF-8, or bytes) to ``path`` whole or not at all; return the path."""
    with atomic_open(path, "wb" if isinstance(data, bytes) else "w", name=name) as fh:
        fh.write(data)
    return Path(path)


def remove_stale_temps(folder: str | os.PathLike[str]) -> list[Path]:
    """Delete temporary files of :func:`atomic_path` in ``folder`` whose process is gone.

    Returns the removed paths. Files of live processes (another run writing now) are kept.
    """
    removed = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(folder):
            m = _TMP_RE.match(entry.name)
            if m is None or not entry.is_file(follow_symlinks=False):
                continue
            if _pid_alive(int(m.group(1))):
                continue
            with contextlib.suppress(OSError):
                os.unlink(entry.path)
                removed.append(Path(entry.path))
    return removed


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True
