"""Options and output shared by every CLI command (no formulas and no grammar live here).

The one way a command prints a result is :func:`emit`: a rich table on a terminal, CSV (streamed in
chunks) when stdout is a pipe or a file, JSON on request, or a file written whole or not at all
(:func:`fgrpo_theory._io.atomic_open`). Nothing but the result goes to stdout; confirmations and
progress go to stderr. Spec grammars live in :mod:`fgrpo_theory._spec`.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypeVar

import numpy as np
import typer

from .. import _spec
from .._io import atomic_open, atomic_path, check_output_path, write_atomic
from .._spec import MAX_LIST_LENGTH
from .._validate import fail

if TYPE_CHECKING:
    import pandas as pd

T = TypeVar("T")

__all__ = [
    "FORMAT_OPTION",
    "OUTPUT_OPTION",
    "SCHEDULER_OPTION",
    "OutputFormat",
    "StdoutClosed",
    "check_output_path",
    "atomic_open",
    "atomic_path",
    "write_atomic",
    "emit",
    "with_progress",
    "resolve_format",
    "parse_int_list",
    "parse_float_list",
    "MAX_LIST_LENGTH",
    "MAX_TABLE_ROWS",
    "CSV_CHUNK_ROWS",
]

#: Rows printed in a terminal table (the rest: ask for --format csv or --output).
MAX_TABLE_ROWS = 1000
#: Rows per chunk when CSV is streamed (so `| head` gets its first line at once).
CSV_CHUNK_ROWS = 5000


class OutputFormat(StrEnum):
    """How a command prints its result."""

    table = "table"
    csv = "csv"
    json = "json"


class StdoutClosed(Exception):
    """The reader of stdout went away (``| head``): stop quietly (``main`` exits 141)."""


#: The ``--format`` and ``--output`` options every command shares.
FORMAT_OPTION = typer.Option(
    None,
    "--format",
    help="Output format: table, csv or json.",
    show_default="table on a terminal, else csv",
)
OUTPUT_OPTION = typer.Option(
    None,
    "--output",
    help="Write the result to FILE (csv, or json with --format json), whole or not at all.",
    metavar="FILE",
    show_default="stdout",
)

#: The ``--scheduler`` option of the commands that run sweeps (simulate, population).
SCHEDULER_OPTION = typer.Option(
    "local",
    "--scheduler",
    help="Where configs run: local (Numba threads), local-cluster:N (N Dask worker "
    "processes) or tcp://host:port (a running Dask scheduler). Results are identical.",
)


def parse_int_list(text: str, name: str, *, lo: int | None = None, hi: int | None = None):
    """:func:`fgrpo_theory._spec.parse_int_list` as an int64 array (kept for older call sites)."""
    return np.asarray(_spec.parse_int_list(text, name=name, lo=lo, hi=hi), dtype=np.int64)


def parse_float_list(text: str, name: str):
    """:func:`fgrpo_theory._spec.parse_float_list` as a float64 array (for older call sites)."""
    return np.asarray(_spec.parse_float_list(text, name=name), dtype=np.float64)


def add_sweep_options(
    sweep: dict, *, N: str | None = None, gamma: str | None = None, ds_range: str | None = None
) -> dict:
    """Put the sweepable options simulate and population share into a sweep mapping.

    ``--N`` (integer list/range grammar) and ``--gamma`` (float list): one value sets the field,
    several make it a sweep axis; ``--ds-range LO,HI`` is one pair. Returns ``sweep``.
    """
    if N is not None:
        vals = [int(v) for v in parse_int_list(N, "--N", lo=1)]
        sweep["N"] = vals if len(vals) > 1 else vals[0]
    if gamma is not None:
        vals_g = [float(v) for v in parse_float_list(gamma, "--gamma")]
        sweep["gamma"] = vals_g if len(vals_g) > 1 else vals_g[0]
    if ds_range is not None:
        pair = [float(v) for v in parse_float_list(ds_range, "--ds-range")]
        if len(pair) != 2:
            fail("--ds-range", ds_range, "two values LO,HI such as 0,1")
        sweep["ds_range"] = pair
    return sweep


def with_progress(
    show: bool, total: int, label: str, run: Callable[[Callable[[int, int], None] | None], T]
) -> T:
    """``run(progress)`` under a transient progress bar on stderr counting to ``total`` when
    ``show``, else ``run(None)``; ``progress(done, total)`` is the library's callback."""
    if not show:
        return run(None)
    from rich.console import Console
    from rich.progress import Progress

    with Progress(console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(label, total=total)
        return run(lambda done, _total: bar.update(task, completed=done))


def _stdout() -> IO[str]:
    out = sys.stdout
    if out is None or getattr(out, "closed", False):
        fail("stdout", "closed", "open to print the result (or use --output FILE)")
    return out


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def resolve_format(fmt: OutputFormat | str | None, output: Path | None = None) -> OutputFormat:
    """The format actually used: ``fmt`` if given, else table on a terminal and CSV otherwise."""
    if fmt is not None:
        return OutputFormat(fmt)
    if output is None and sys.stdout is not None and _is_terminal(sys.stdout):
        return OutputFormat.table
    return OutputFormat.csv


def _json_text(df: pd.DataFrame) -> str:
    records = df.to_dict(orient="records")
    clean = [
        {k: (v.item() if isinstance(v, np.generic) else v) for k, v in rec.items()}
        for rec in records
    ]
    try:
        return json.dumps(clean, indent=2, allow_nan=False) + "\n"
    except ValueError:
        fail("output", "NaN or infinity", "finite numbers only (a bug: please report it)")


def _write_csv(df: pd.DataFrame, fh: IO[str]) -> None:
    """Write ``df`` as CSV in chunks (the header first), full float precision."""
    if len(df) == 0:
        fh.write(df.to_csv(index=False))
        return
    for start in range(0, len(df), CSV_CHUNK_ROWS):
        chunk = df.iloc[start : start + CSV_CHUNK_ROWS]
        fh.write(chunk.to_csv(index=False, header=start == 0))
        fh.flush()


def _render_table(df: pd.DataFrame, title: str | None, out: IO[str]) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    shown = df if len(df) <= MAX_TABLE_ROWS else df.iloc[:MAX_TABLE_ROWS]
    caption = None
    if len(shown) < len(df):
        caption = (
            f"first {len(shown)} of {len(df)} rows; "
            "use --format csv or --output FILE for all of them"
        )
    table = Table(title=escape(title) if title else None, caption=caption, show_lines=False)
    for col in df.columns:
        table.add_column(escape(str(col)), justify="right", overflow="fold")
    for row in shown.itertuples(index=False):
        cells = []
        for v in row:
            if v is None or (isinstance(v, float | np.floating) and np.isnan(v)):
                cells.append("")  # no value (e.g. no interval for this row): an empty cell
            elif isinstance(v, float | np.floating):
                cells.append(f"{float(v):.6g}")
            else:
                cells.append(escape(str(v)))
        table.add_row(*cells)
    # A terminal (or $COLUMNS) sets the width and the table wraps to fit it; a table asked for
    # explicitly on a pipe, with no $COLUMNS, gets room for its columns instead of 80 characters.
    width = None
    if not _is_terminal(out) and not os.environ.get("COLUMNS"):
        width = max(100, 14 * len(df.columns))
    Console(file=out, width=width).print(table)


def _handle_stdout_error(e: OSError) -> None:
    if isinstance(e, BrokenPipeError):
        # Later flushes at exit would fail again: point stdout at /dev/null (best effort).
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, AttributeError, ValueError):
            pass
        raise StdoutClosed from None
    fail("stdout", e.strerror or type(e).__name__, "writable to print the result")


def emit(
    df: pd.DataFrame,
    fmt: OutputFormat | str | None = None,
    output: Path | None = None,
    *,
    title: str | None = None,
) -> None:
    """Print ``df`` as a table, CSV or JSON, or write it to ``output`` whole or not at all.

    ``fmt=None`` means a rich table when stdout is a terminal and CSV otherwise (and in files).
    CSV and JSON carry full float precision; CSV is streamed in chunks of
    :data:`CSV_CHUNK_ROWS` rows. With ``output``, the file is written through a temporary file and
    a rename, and one confirmation line goes to stderr. Nothing else is written to stdout.
    """
    fmt = resolve_format(fmt, output)
    if output is not None:
        path = check_output_path(output)
        with atomic_open(path, "w", newline="") as fh:
            if fmt is OutputFormat.json:
                fh.write(_json_text(df))
            else:
                _write_csv(df, fh)
        print(f"wrote {len(df)} rows to {path}", file=sys.stderr)
        return
    out = _stdout()
    try:
        if fmt is OutputFormat.csv:
            _write_csv(df, out)
        elif fmt is OutputFormat.json:
            out.write(_json_text(df))
        else:
            _render_table(df, title, out)
        out.flush()
    except OSError as e:
        _handle_stdout_error(e)
