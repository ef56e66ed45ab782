"""Keys that authenticate what this tool wrote in a folder (private; sweeps and caches use it).

A folder that holds results (a sweep's ``--out``, the figure-table cache) gets a key file
``.fgrpo-theory.key``: 32 random bytes, written and synced to a temporary created with ``O_CREAT |
O_EXCL | O_NOFOLLOW`` and mode 0600, then hard-linked to that name (so it appears whole, and is
readable only by the user who created it). Every result written there carries
:func:`keyed_digest` values under that key (of its metadata and of its rows), and temporary files
carry a tag under it. Anyone else can write files into a shared folder, but not files whose
digests verify: a forged, relabelled or edited result is recomputed, never reused.

A key file that is not a regular file owned by the current user, readable by nobody else, of
exactly 32 bytes and with one link, is not used: :func:`folder_key` returns None with the reason,
and the caller then trusts nothing in the folder (it recomputes, and says so in one line). It is
opened without following a symlink and without blocking (a FIFO planted there never hangs).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import hmac
import os
import re
import secrets
import stat
from pathlib import Path

__all__ = ["KEY_NAME", "READ_FLAGS", "CACHE_ENV", "folder_key", "keyed_digest", "owned_private_dir",
           "make_dir", "pid_alive", "user_cache_dir"]  # fmt: skip

#: Name of the key file in a folder of results.
KEY_NAME = ".fgrpo-theory.key"
_KEY_BYTES = 32
_SHORT = f"it is not a {_KEY_BYTES}-byte key"
#: Seconds a new, still short key file is given for its creator to write it.
_KEY_WRITE_SECONDS = 5.0


_LINKS = "it has other hard links"
#: errno values of ``link`` on a file system without hard links.
_NO_LINKS = {getattr(errno, n) for n in ("EPERM", "ENOTSUP", "EOPNOTSUPP", "EXDEV", "EMLINK")
             if hasattr(errno, n)}  # fmt: skip
#: Flags that open an existing file of a shared folder to read it (a key file here, a lock in
#: :mod:`.sim.locks`): never through a symlink, never blocking (a FIFO planted under the name
#: returns at once, and is then refused as not a regular file).
READ_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_NOCTTY", 0)
    | getattr(os, "O_CLOEXEC", 0)
)
_CREATE_FLAGS = (
    os.O_WRONLY
    | os.O_CREAT
    | os.O_EXCL
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_CLOEXEC", 0)
)


def _check_key(st: os.stat_result) -> str | None:
    """Why the key file of status ``st`` cannot be trusted as it is (None: it can)."""
    if not stat.S_ISREG(st.st_mode):
        return "it is not a regular file"
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        return "it belongs to another user"
    if st.st_mode & 0o077:
        return "other users can read or write it"
    if st.st_nlink != 1:
        return _LINKS
    if st.st_size != _KEY_BYTES:
        return _SHORT
    return None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.fsync(fd)


#: Names of the temporaries :func:`_create_key` and :func:`_set_aside` make (with their PID).
_TEMP_RE = re.compile(re.escape(KEY_NAME) + r"\.(?:tmp|empty)-(\d{1,10})-[0-9a-f]{16}")
#: Seconds after which a temporary of a process that is gone is removed.
_TEMP_SECONDS = 60.0


def _remove_dead_temporaries(folder: Path, of: os.stat_result | None = None) -> int:
    """Remove the key temporaries a killed process left in ``folder``: regular files of this
    user, of at most 32 bytes, named as :func:`_create_key` names them, older than
    :data:`_TEMP_SECONDS` and of a PID that no process has. Nothing else is touched. With
    ``of`` (the key file's status), only the temporaries that are other names of that very
    file, whatever their age (a creator killed between linking its temporary to the key and
    removing it). Returns how many were removed."""
    import time

    removed = 0
    uid = os.getuid() if hasattr(os, "getuid") else None
    with contextlib.suppress(OSError), os.scandir(folder) as entries:
        for entry in entries:
            m = _TEMP_RE.fullmatch(entry.name)
            if m is None:
                continue
            with contextlib.suppress(OSError):
                st = entry.stat(follow_symlinks=False)
                if not stat.S_ISREG(st.st_mode) or st.st_size > _KEY_BYTES:
                    continue
                if uid is not None and st.st_uid != uid:
                    continue
                if of is not None:
                    if (st.st_dev, st.st_ino) != (of.st_dev, of.st_ino):
                        continue
                elif time.time() - st.st_mtime < _TEMP_SECONDS:
                    continue
                if pid_alive(int(m.group(1))):
                    continue
                os.unlink(entry.path)
                removed += 1
    return removed


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` may exist (the check of every stale lock, key temporary and
    half-written file of the package). A PID outside 1..2**31-1 never exists; this process
    always does; otherwise ``os.kill(pid, 0)``: no such process -> False, any other refusal
    (another user's process) -> True. On Windows always True: ``os.kill(pid, 0)`` there
    terminates the process (and these PIDs come from names and files anyone can plant)."""
    if os.name == "nt" or pid == os.getpid():
        return True
    if not 0 < pid < 2**31:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _create_key(path: Path) -> tuple[bytes | None, str | None]:
    """Create the key file at ``path`` whole: ``(key, None)``; ``(None, None)`` if one exists
    already; ``(None, why)`` if the folder takes no new file.

    The key is written and synced to a fresh temporary (``O_CREAT | O_EXCL | O_NOFOLLOW``, mode
    0600) which is then hard-linked to ``path`` (``link`` never replaces nor follows what is
    there) and removed: a crash never leaves a short key file (a process killed before the link
    may leave its temporary, removed by the next creation; one killed between the link and the
    removal leaves the key with a second name, removed by :func:`folder_key`). On a file system
    without hard links the key file is created with ``O_EXCL`` and written in place, as before.
    """
    _remove_dead_temporaries(path.parent)
    key = secrets.token_bytes(_KEY_BYTES)
    tmp = path.with_name(f"{KEY_NAME}.tmp-{os.getpid()}-{secrets.token_hex(8)}")
    try:
        fd = os.open(tmp, _CREATE_FLAGS, 0o600)
    except OSError as e:
        return None, f"its key file {path} cannot be created ({e.strerror or e})"
    try:
        try:
            _write_all(fd, key)
        finally:
            os.close(fd)
        os.link(tmp, path, follow_symlinks=False)
        return key, None
    except FileExistsError:
        return None, None
    except NotImplementedError:
        return _create_in_place(path, key)
    except OSError as e:
        if e.errno in _NO_LINKS:
            return _create_in_place(path, key)
        return None, f"its key file {path} cannot be written ({e.strerror or e})"
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


def _create_in_place(path: Path, key: bytes) -> tuple[bytes | None, str | None]:
    try:
        fd = os.open(path, _CREATE_FLAGS, 0o600)
    except FileExistsError:
        return None, None
    except OSError as e:
        return None, f"its key file {path} cannot be created ({e.strerror or e})"
    try:
        _write_all(fd, key)
    except OSError as e:
        os.close(fd)
        with contextlib.suppress(OSError):
            path.unlink()
        return None, f"its key file {path} cannot be written ({e.strerror or e})"
    os.close(fd)
    return key, None


def _set_aside(path: Path, st: os.stat_result) -> bool:
    """Remove the empty key file ``path`` left by a crash, if it is still the file ``st`` (moved
    aside first, so that a key another process has just put there is put back, never lost)."""
    aside = path.with_name(f"{KEY_NAME}.empty-{os.getpid()}-{secrets.token_hex(8)}")
    try:
        os.rename(path, aside)
    except FileNotFoundError:
        return True  # another process removed it first
    except OSError:
        return False
    try:
        now = os.lstat(aside)
        if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino) or now.st_size:
            with contextlib.suppress(OSError):  # not ours to remove: put it back
                try:
                    os.link(aside, path, follow_symlinks=False)
                except NotImplementedError:  # no linkat here: ``aside`` was a regular file
                    os.link(aside, path)
    except OSError:
        pass
    with contextlib.suppress(OSError):
        aside.unlink()
    return True


def folder_key(folder: str | os.PathLike[str]) -> tuple[bytes | None, str | None]:
    """``(key, None)``: the folder's key, created if missing; ``(None, why)`` if there is a key
    file this tool cannot trust, or the folder takes no new file. Never blocks: a FIFO, socket
    or device under the key's name is refused at once, in one line.

    Another process may be creating the key file (an older version created it empty with
    ``O_EXCL``, then wrote it; this one links a whole temporary to it, which has two links for
    an instant): a short or doubly linked key file younger than :data:`_KEY_WRITE_SECONDS` is
    read again until it is whole, for up to that long. (Refusing it at once made the second of
    two sweeps started together on a new folder trust none of the first one's results, and
    compute a config the first had finished: seen in CI.) An empty key file of this user that
    nobody is writing (older than that, or still empty after waiting), which a crash between
    its creation and its write leaves, is replaced by a new key. A whole key file of this user
    with two links, older than that, whose other name is a temporary of a process that is gone
    (killed between linking it to the key and removing it), is used once that name is removed.
    """
    import time

    path = Path(folder) / KEY_NAME
    deadline = time.monotonic() + _KEY_WRITE_SECONDS
    gone = replaced = 0
    unlinked = False
    while True:
        try:
            fd = os.open(path, READ_FLAGS)
        except FileNotFoundError:
            gone += 1
            if gone > 3:
                return None, f"its key file {path} could not be read"
            key, why = _create_key(path)
            if key is not None or why is not None:
                return key, why
            continue  # created meanwhile by another process: read it
        except OSError as e:
            return None, f"its key file {path} cannot be opened ({e.strerror or e})"
        try:
            # one look at the file, for the check and for what follows: a creator removing its
            # temporary in between made a checked second link look like a foreign one
            st = os.fstat(fd)
            why = _check_key(st)
            if why is None:
                key = os.read(fd, _KEY_BYTES + 1)
                if len(key) == _KEY_BYTES:
                    return key, None
                why = _SHORT  # shorter than when checked: read it again
        finally:
            os.close(fd)
        young = time.time() - st.st_mtime < _KEY_WRITE_SECONDS
        late = time.monotonic() > deadline
        # only its size or its link count is wrong, and it is new: its creator is writing it
        being_written = (why == _SHORT and st.st_size < _KEY_BYTES) or (
            why == _LINKS and st.st_nlink == 2 and st.st_size == _KEY_BYTES
        )
        if why == _SHORT and st.st_size == 0 and (late or not young) and replaced < 3:
            replaced += 1  # left empty by a crash: replace it by a new key
            if _set_aside(path, st):
                gone = 0
                continue
        if why == _LINKS and st.st_nlink == 2 and not young and not unlinked:
            unlinked = True  # a creator killed before removing its temporary: remove it
            if _remove_dead_temporaries(path.parent, of=st):
                continue
        if not (being_written and young):
            return None, f"its key file {path} is not this user's private key ({why})"
        if late:
            return None, f"its key file {path} is not this user's private key (it is incomplete)"
        time.sleep(0.01)


def keyed_digest(key: bytes, *parts: str | bytes) -> str:
    """HMAC-SHA256 (hex, 32 characters) of ``parts`` (each length-prefixed) under ``key``."""
    h = hmac.new(key, digestmod=hashlib.sha256)
    for p in parts:
        b = p.encode() if isinstance(p, str) else bytes(p)
        h.update(len(b).to_bytes(8, "big") + b)
    return h.hexdigest()[:32]


def _open_folder(d: Path, uid: int, holds: str) -> str | None:
    """Why others than ``uid`` and root can change what folder ``d`` holds (``holds`` names
    it): it is writable by group or others without the sticky bit, or owned by another user."""
    try:
        st = os.stat(d)
    except OSError:
        return None
    if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
        return f"other users can write to {d}, which holds {holds}"
    if st.st_uid not in (0, uid):
        return f"{d}, which holds {holds}, belongs to another user"
    return None


def _foreign_link(p: Path, uid: int) -> str | None:
    """Why the way to ``p`` could be changed by another user; else None. ``p`` is resolved as
    the kernel does, component by component, through the targets of links too, and every
    symlink met must belong to ``uid`` or root (its owner can retarget it, whatever the folder
    it is in), and every folder in which a name is looked up must pass :func:`_open_folder`
    (whoever can write it can replace the name: a root link in a folder anyone can write, or a
    folder left again by ``..``, is no safer than the attacker's own link)."""
    todo = list(reversed(p.parts[1:]))
    cur = Path(p.anchor)
    hops = 0
    checked: set[Path] = set()
    while todo:
        part = todo.pop()
        if part in ("", "."):
            continue
        if part == "..":
            cur = cur.parent
            continue
        nxt = cur / part
        try:
            st = os.lstat(nxt)
        except OSError:
            return None  # the rest does not exist: nothing more is followed
        link = stat.S_ISLNK(st.st_mode)
        if cur not in checked or link:
            why = _open_folder(cur, uid, f"{nxt}, a symlink on the way to {p}" if link else nxt)
            if why is not None:
                return why
            checked.add(cur)
        if not link:
            cur = nxt
            continue
        if st.st_uid not in (0, uid):
            return f"{nxt}, a symlink on the way to {p}, belongs to another user"
        hops += 1
        if hops > 40:
            return f"{p} is reached through too many symlinks"
        try:
            target = Path(os.readlink(nxt))
        except OSError as e:
            return f"{nxt} cannot be read ({e.strerror or e})"
        if target.is_absolute():
            cur = Path(target.anchor)
            todo.extend(reversed(target.parts[1:]))
        else:
            todo.extend(reversed(target.parts))
    return None


def owned_private_dir(path: str | os.PathLike[str]) -> str | None:
    """None if ``path`` is a folder (not a symlink) owned by the current user that no other user
    can write, nor any folder above it (as written, and as resolved) up to the first one owned
    by root or the user with the sticky bit, and if every symlink on the way to it belongs to
    the user or root; else the reason it is not."""
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
    why = _foreign_link(p, uid)
    if why is not None:
        return why
    real = Path(os.path.realpath(p))
    for parent in dict.fromkeys([*p.parents, *real.parents]):
        try:
            pst = os.stat(parent)
        except OSError:
            continue
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


#: Environment variable naming the package's cache folder (kernels, tables, SFT checkpoints).
CACHE_ENV = "FGRPO_THEORY_CACHE_DIR"


def user_cache_dir() -> Path:
    """The cache folder: ``$FGRPO_THEORY_CACHE_DIR``, else ``$XDG_CACHE_HOME/fgrpo-theory``,
    else ``~/.cache/fgrpo-theory``."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return base / "fgrpo-theory"
