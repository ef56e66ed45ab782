"""Keys that authenticate what this tool wrote in a folder (private; sweeps and caches use it).

A folder that holds results (a sweep's ``--out``, the figure-table cache) gets a key file
``.fgrpo-theory.key``: 32 random bytes, created with ``O_CREAT | O_EXCL | O_NOFOLLOW`` and mode
0600, so only the user who created it can read it. Every result written there carries
:func:`keyed_digest` values under that key (of its metadata and of its rows), and temporary files
carry a tag under it. Anyone else can write files into a shared folder, but not files whose
digests verify: a forged, relabelled or edited result is recomputed, never reused.

A key file that is not a regular file owned by the current user, readable by nobody else, of
exactly 32 bytes and with one link, is not used: :func:`folder_key` returns None with the reason,
and the caller then trusts nothing in the folder (it recomputes, and says so in one line).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import secrets
import stat
from pathlib import Path

__all__ = ["KEY_NAME", "folder_key", "keyed_digest", "owned_private_dir", "make_dir"]

#: Name of the key file in a folder of results.
KEY_NAME = ".fgrpo-theory.key"
_KEY_BYTES = 32
_SHORT = f"it is not a {_KEY_BYTES}-byte key"
#: Seconds a new, still short key file is given for its creator to write it.
_KEY_WRITE_SECONDS = 5.0


def _check_key_fd(fd: int) -> str | None:
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        return "it is not a regular file"
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        return "it belongs to another user"
    if st.st_mode & 0o077:
        return "other users can read or write it"
    if st.st_nlink != 1:
        return "it has other hard links"
    if st.st_size != _KEY_BYTES:
        return _SHORT
    return None


def folder_key(folder: str | os.PathLike[str]) -> tuple[bytes | None, str | None]:
    """``(key, None)``: the folder's key, created if missing; ``(None, why)`` if there is a key
    file this tool cannot trust, or the folder takes no new file.

    Another process may have just created the key file and not yet written its 32 bytes (it is
    created empty with ``O_EXCL``, then written): a short key file younger than
    :data:`_KEY_WRITE_SECONDS` is read again until it is whole, for up to that long. (Refusing
    it at once made the second of two sweeps started together on a new folder trust none of
    the first one's results, and compute a config the first had finished: seen in CI.)
    """
    import time

    path = Path(folder) / KEY_NAME
    nofollow = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    deadline = time.monotonic() + _KEY_WRITE_SECONDS
    gone = 0
    while True:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | nofollow, 0o600)
        except FileExistsError:
            pass
        except OSError as e:
            return None, f"its key file {path} cannot be created ({e.strerror or e})"
        else:
            key = secrets.token_bytes(_KEY_BYTES)
            try:
                os.write(fd, key)
            except OSError as e:
                os.close(fd)
                with contextlib.suppress(OSError):
                    path.unlink()
                return None, f"its key file {path} cannot be written ({e.strerror or e})"
            os.close(fd)
            return key, None
        try:
            fd = os.open(path, os.O_RDONLY | nofollow)
        except FileNotFoundError:
            gone += 1
            if gone < 3:
                continue  # removed meanwhile: create it again
            return None, f"its key file {path} could not be read"
        except OSError as e:
            return None, f"its key file {path} cannot be opened ({e.strerror or e})"
        try:
            why = _check_key_fd(fd)
            st = os.fstat(fd)
            # only its size is wrong, and it is new: its creator is writing it
            being_written = (
                why == _SHORT
                and st.st_size < _KEY_BYTES
                and time.time() - st.st_mtime < _KEY_WRITE_SECONDS
            )
            if why is None:
                key = os.read(fd, _KEY_BYTES + 1)
                if len(key) == _KEY_BYTES:
                    return key, None
                being_written = True  # shorter than when checked: read it again
        finally:
            os.close(fd)
        if not being_written:
            return None, f"its key file {path} is not this user's private key ({why})"
        if time.monotonic() > deadline:
            return None, f"its key file {path} is not this user's private key (it is incomplete)"
        time.sleep(0.01)


def keyed_digest(key: bytes, *parts: str | bytes) -> str:
    """HMAC-SHA256 (hex, 32 characters) of ``parts`` (each length-prefixed) under ``key``."""
    h = hmac.new(key, digestmod=hashlib.sha256)
    for p in parts:
        b = p.encode() if isinstance(p, str) else bytes(p)
        h.update(len(b).to_bytes(8, "big") + b)
    return h.hexdigest()[:32]


def owned_private_dir(path: str | os.PathLike[str]) -> str | None:
    """None if ``path`` is a folder (not a symlink) owned by the current user that no other user
    can write, nor any folder above it up to the first one owned by root or the user with the
    sticky bit; else the reason it is not."""
    p = Path(os.path.abspath(path))
    try:
        st = os.lstat(p)
    except OSError as e:
        return f"{p} cannot be read ({e.strerror or e})"
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        return f"{p} is not a folder"
    uid = os.getuid() if hasattr(os, "getuid") else st.st_uid
    if st.st_uid != uid:
        return f"{p} belongs to another user"
    if st.st_mode & 0o022:
        return f"other users can write to {p}"
    for parent in p.parents:
        try:
            pst = os.stat(parent)
        except OSError:
            break
        if pst.st_mode & 0o022 and not pst.st_mode & stat.S_ISVTX:
            return f"other users can write to {parent}, which holds it"
        if pst.st_uid not in (0, uid):
            return f"{parent}, which holds it, belongs to another user"
    return None


def make_dir(path: str | os.PathLike[str], mode: int = 0o700) -> str | None:
    """Create folder ``path`` (and missing parents, with ``mode``); None on success, else the
    reason. A home folder that does not exist is never created (``$HOME`` pointing nowhere is
    the user's business, not a folder to make)."""
    p = Path(os.path.abspath(path))
    home = os.environ.get("HOME")
    if home:
        h = Path(os.path.abspath(home))
        if (p == h or h in p.parents) and not h.is_dir():
            return f"the home folder {h} does not exist"
    try:
        p.mkdir(mode=mode, parents=True, exist_ok=True)
    except OSError as e:
        return f"{p} cannot be created ({e.strerror or e})"
    return None
