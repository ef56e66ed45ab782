"""The ``--scheduler`` option of distributed sweeps: parsing it, importing Dask for it, and
checking that a ``tcp://`` address really is a Dask scheduler (without importing Dask to parse).

Re-exported by :mod:`fgrpo_theory.distributed`, where it is documented.
"""

from __future__ import annotations

import re
import socket
import struct
import time
from typing import Any, NamedTuple

from ._validate import fail, format_value

__all__ = [
    "INSTALL_HINT",
    "MAX_LOCAL_WORKERS",
    "SchedulerSpec",
    "parse_scheduler",
    "require_distributed",
    "probe_dask_scheduler",
]

#: How to install the optional dependency (quoted in the error message).
INSTALL_HINT = 'pip install "fgrpo-theory[dask]"'

#: Largest worker count ``local-cluster:N`` accepts.
MAX_LOCAL_WORKERS = 1024

_LOCAL_CLUSTER = re.compile(r"^local-cluster(?::(.*))?$")
_ADDRESS = re.compile(r"^(tcp|tls)://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(\d{1,5})$")

_SCHEDULER_FORMS = "'local', 'local-cluster:N' or 'tcp://host:port'"


class SchedulerSpec(NamedTuple):
    """A parsed ``--scheduler`` value.

    Attributes
    ----------
    kind : str
        ``"local"``, ``"local-cluster"`` or ``"address"``.
    address : str or None
        The scheduler address for ``kind == "address"``.
    n_workers : int or None
        The worker-process count for ``kind == "local-cluster"``.
    text : str
        The original option value (used in error messages).
    """

    kind: str
    address: str | None
    n_workers: int | None
    text: str


def parse_scheduler(text: str, name: str = "--scheduler") -> SchedulerSpec:
    """Parse a scheduler option without importing Dask.

    Parameters
    ----------
    text : str
        ``"local"``, ``"local-cluster:N"`` (``N`` worker processes, 1 thread each, ``N`` in
        ``[1, 1024]``) or ``"tcp://host:port"`` / ``"tls://host:port"``.
    name : str
        Parameter name used in error messages.

    Returns
    -------
    SchedulerSpec

    Raises
    ------
    ValueError
        If ``text`` has none of these forms, e.g.
        ``--scheduler must be 'local', 'local-cluster:N' or 'tcp://host:port'; got 'bogus'``.

    Examples
    --------
    >>> parse_scheduler("local-cluster:4")
    SchedulerSpec(kind='local-cluster', address=None, n_workers=4, text='local-cluster:4')
    """
    if not isinstance(text, str):
        fail(name, text, _SCHEDULER_FORMS)
    s = text.strip()
    if s == "local":
        return SchedulerSpec("local", None, None, text)
    m = _LOCAL_CLUSTER.match(s)
    if m is not None:
        count = m.group(1)
        if count is None or not re.fullmatch(r"\d+", count):
            fail(name, text, f"'local-cluster:N' with an integer N in [1, {MAX_LOCAL_WORKERS}]")
        n = int(count)
        if not 1 <= n <= MAX_LOCAL_WORKERS:
            fail(name, text, f"'local-cluster:N' with N in [1, {MAX_LOCAL_WORKERS}] workers")
        return SchedulerSpec("local-cluster", None, n, text)
    if "://" in s:
        m = _ADDRESS.match(s)
        if m is None or not 1 <= int(m.group(3)) <= 65535:
            fail(name, text, "a scheduler address 'tcp://host:port' with a port in [1, 65535]")
        return SchedulerSpec("address", s, None, text)
    fail(name, text, _SCHEDULER_FORMS)


#: Largest first message a Dask scheduler's handshake could plausibly take (bytes).
_MAX_HANDSHAKE = 1 << 20


def probe_dask_scheduler(address: str, timeout: float, name: str) -> None:
    """Refuse, within ``timeout`` seconds, a ``tcp://`` address where no Dask scheduler answers.

    A Dask scheduler writes its handshake as soon as a connection opens: an 8-byte frame length
    (``struct`` format ``"Q"``) and that many bytes of frames. Anything else (an HTTP server,
    random bytes, silence) is refused here, before :class:`distributed.Client` could allocate
    a garbage length or leave a half-built client behind. A ``tls://`` address is only checked
    to accept a connection within ``timeout`` (an unreachable one took 11 s and a traceback).
    """
    from urllib.parse import urlsplit

    parts = urlsplit(address)
    if parts.hostname is None or parts.port is None:
        return
    if parts.scheme == "tls":  # TLS handshakes are Dask's business; reachability is ours
        try:
            socket.create_connection((parts.hostname, parts.port), timeout=timeout).close()
        except OSError as e:  # the same words as a tcp:// address that does not answer
            fail(
                name,
                address,
                f"a reachable Dask scheduler (no answer within {format_value(timeout)} s: "
                f"{type(e).__name__})",
            )
        return
    if parts.scheme != "tcp":
        return
    deadline = time.monotonic() + timeout

    def recv_exactly(sock: socket.socket, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            sock.settimeout(max(deadline - time.monotonic(), 1e-3))
            chunk = sock.recv(min(n - len(buf), 65536))
            if not chunk:
                raise ConnectionResetError("closed by the server")
            buf.extend(chunk)
        return bytes(buf)

    what = "a reachable Dask scheduler"
    try:
        with socket.create_connection((parts.hostname, parts.port), timeout=timeout) as sock:
            what = "the address of a Dask scheduler"
            (n,) = struct.unpack("Q", recv_exactly(sock, 8))
            if not 0 < n <= _MAX_HANDSHAKE:
                raise ValueError(n)
            from distributed.protocol.utils import unpack_frames

            unpack_frames(recv_exactly(sock, n), partial=True)
    except (OSError, TimeoutError) as e:
        if what.startswith("a reachable"):
            fail(
                name,
                address,
                f"a reachable Dask scheduler (no answer within {format_value(timeout)} s: "
                f"{type(e).__name__})",
            )
        fail(
            name,
            address,
            f"the address of a Dask scheduler (the server there sent no Dask handshake within "
            f"{format_value(timeout)} s: {type(e).__name__})",
        )
    except Exception:
        fail(
            name,
            address,
            "the address of a Dask scheduler (something else answers there: not the Dask protocol)",
        )


def _as_spec(scheduler: str | SchedulerSpec, name: str) -> SchedulerSpec:
    return scheduler if isinstance(scheduler, SchedulerSpec) else parse_scheduler(scheduler, name)


def require_distributed(spec: SchedulerSpec | str, name: str = "--scheduler") -> Any:
    """Import and return the ``distributed`` module, or explain how to install it.

    Parameters
    ----------
    spec : SchedulerSpec or str
        The scheduler that needs Dask (quoted in the error message).
    name : str
        Parameter name used in the error message.

    Returns
    -------
    module
        :mod:`distributed`.

    Raises
    ------
    ValueError
        ``--scheduler must be 'local' unless dask[distributed] is installed
        (pip install "fgrpo-theory[dask]"); got 'local-cluster:2'``.
    """
    try:
        import distributed
    except ImportError:
        text = spec.text if isinstance(spec, SchedulerSpec) else spec
        fail(name, text, f"'local' unless dask[distributed] is installed ({INSTALL_HINT})")
    return distributed
