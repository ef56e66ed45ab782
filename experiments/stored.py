"""Stored result tables: the full tables of long experiments, committed with the code.

A figure module that sets ``STORED = True`` (see ``experiments/README.md``) has its full-settings
table kept in ``experiments/stored/<name>.parquet`` (installed as package data). The file's
Parquet metadata records what produced it:

- ``fgrpo_theory.stored.params``: the key of ``(name, PARAMS)`` (:func:`.cache.params_key` with an
  empty code digest and ``fast=False``: the parameters, not the package version);
- ``fgrpo_theory.stored.code``: the digest of the source of every project module the experiment
  imports (:func:`.cache.module_sources`, the same digest the table cache uses);
- ``fgrpo_theory.stored.rows``: SHA-256 of the rows (as CSV), so a damaged file is never plotted;
- ``fgrpo_theory.stored.seconds`` and ``fgrpo_theory.stored.created``: how long the computation
  took and when (information only; not part of any check).

``fgrpo-theory figures NAME`` plots from the stored table when its parameters and code digest
match the code that runs (no computation at all); otherwise from the user's table cache when that
holds the table; otherwise it refuses in one line naming the reason and the command that
recomputes (``fgrpo-theory figures NAME --recompute``). ``--recompute`` (or ``--force``) computes
the table, caches it, and writes the stored file when the experiments folder is a checkout (never
into an installed package: there the table stays in the user's cache). Because the digest covers
the simulator, editing a kernel makes the stored tables that depend on it stale until they are
recomputed; ``tests/test_stored.py`` fails for a stale or damaged stored table, so a change that
alters a stored table's code lands together with the recomputed table.
"""

from __future__ import annotations

import hashlib
import io
import time
from pathlib import Path

import pandas as pd

__all__ = [
    "STORED_DIR",
    "StoredStatus",
    "stored_path",
    "status",
    "load",
    "write",
    "writable",
    "rows_digest",
]

#: The folder of stored tables (package data; committed).
STORED_DIR = Path(__file__).resolve().parent / "stored"

_PREFIX = "fgrpo_theory.stored."


def stored_path(name: str) -> Path:
    """Where the stored table of experiment ``name`` lives."""
    return STORED_DIR / f"{name}.parquet"


def rows_digest(df: pd.DataFrame) -> str:
    """SHA-256 (hex) of the table's rows written as CSV (column order and dtypes as read back)."""
    text = df.to_csv(index=False, lineterminator="\n").encode()
    return hashlib.sha256(text).hexdigest()


def writable() -> bool:
    """True when the experiments folder is a checkout (not inside an installed environment)."""
    parts = set(STORED_DIR.parts)
    return not ({"site-packages", "dist-packages"} & parts)


class StoredStatus:
    """What the stored file of one experiment says about the current code and parameters."""

    def __init__(self, name: str, ok: bool, reason: str, seconds: float | None = None):
        self.name, self.ok, self.reason, self.seconds = name, ok, reason, seconds

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"StoredStatus({self.name!r}, ok={self.ok}, reason={self.reason!r})"


def _meta(path: Path) -> dict[str, str]:
    import pyarrow.parquet as pq

    md = pq.read_metadata(path)
    raw = md.metadata or {}
    return {
        k.decode()[len(_PREFIX) :]: v.decode()
        for k, v in raw.items()
        if k.decode().startswith(_PREFIX)
    }


def _expected(name: str, params, code: str) -> dict[str, str]:
    from .cache import params_key

    return {"params": params_key(name, params, False, ""), "code": code}


def status(name: str, params, code: str) -> StoredStatus:
    """Whether ``stored_path(name)`` holds the table of ``params`` computed by code ``code``.

    Reads the file's footer only (a few bytes); the rows are checked by :func:`load`.
    """
    path = stored_path(name)
    if not path.is_file():
        return StoredStatus(name, False, f"no stored table {path.name}")
    try:
        meta = _meta(path)
    except Exception as e:  # unreadable footer: treated as absent, never trusted
        return StoredStatus(name, False, f"stored table {path.name} is unreadable ({e})")
    want = _expected(name, params, code)
    seconds = float(meta["seconds"]) if meta.get("seconds") else None
    if meta.get("params") != want["params"]:
        return StoredStatus(
            name, False, "the stored table was computed with other parameters", seconds
        )
    if meta.get("code") != want["code"]:
        return StoredStatus(
            name, False, "the stored table was computed by other code (the digest differs)", seconds
        )
    return StoredStatus(name, True, "stored table matches the code and parameters", seconds)


def load(name: str, params, code: str) -> pd.DataFrame | None:
    """The stored table when its parameters, code digest and rows all verify, else None."""
    if not status(name, params, code).ok:
        return None
    path = stored_path(name)
    try:
        df = pd.read_parquet(path)
        meta = _meta(path)
    except Exception:
        return None
    if rows_digest(df) != meta.get("rows"):
        return None
    return df


def write(name: str, params, code: str, df: pd.DataFrame, seconds: float) -> Path:
    """Write ``df`` as the stored table of ``(name, params, code)`` atomically; return its path.

    The table goes through Parquet in memory first, so the digest is that of the rows as they
    will be read back.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    from fgrpo_theory._io import write_atomic

    if not writable():
        raise ValueError(
            f"stored tables are not written into an installed package; got {STORED_DIR}"
        )
    table = pa.Table.from_pandas(df.reset_index(drop=True), preserve_index=False)
    buf = io.BytesIO()
    pq.write_table(table, buf)
    back = pd.read_parquet(io.BytesIO(buf.getvalue()))
    meta = dict(table.schema.metadata or {})
    fields = {
        **_expected(name, params, code),
        "rows": rows_digest(back),
        "seconds": f"{seconds:.1f}",
        "created": time.strftime("%Y-%m-%d", time.gmtime()),
    }
    for k, v in fields.items():
        meta[(_PREFIX + k).encode()] = v.encode()
    buf = io.BytesIO()
    pq.write_table(table.replace_schema_metadata(meta), buf)
    STORED_DIR.mkdir(exist_ok=True)
    path = stored_path(name)
    write_atomic(path, buf.getvalue())
    return path
