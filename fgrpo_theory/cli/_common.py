"""Parsing and output helpers shared by the CLI commands (no formulas live here)."""

from __future__ import annotations

import json
import math
import re
import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import typer

from .._validate import MAX_EXACT_INT, fail

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "FORMAT_OPTION",
    "OUTPUT_OPTION",
    "OutputFormat",
    "parse_int_list",
    "parse_float_list",
    "check_output_path",
    "emit",
    "MAX_LIST_LENGTH",
]

#: Largest number of values one list option may expand to.
MAX_LIST_LENGTH = 1_000_000

_INT = r"[+-]?\d+"
_RANGE = re.compile(rf"^({_INT})\.\.({_INT})(?::(x)?([^:]+))?$")


class OutputFormat(StrEnum):
    """How a command prints its result."""

    table = "table"
    csv = "csv"
    json = "json"


#: The ``--format`` and ``--output`` options every command shares.
FORMAT_OPTION = typer.Option(
    OutputFormat.table, "--format", help="Output format: table, csv or json."
)
OUTPUT_OPTION = typer.Option(
    None,
    "--output",
    help="Write the result to FILE (in the chosen format; a table is written as CSV).",
    metavar="FILE",
)


def _parse_int(token: str, name: str) -> int:
    if not re.fullmatch(_INT, token):
        fail(name, token, "an integer, A..B, A..B:S or A..B:xF")
    return int(token)


def parse_int_list(
    text: str, name: str, *, lo: int | None = None, hi: int | None = None
) -> np.ndarray:
    """Parse ``"4,8,16"``, ``"4..64"``, ``"4..64:4"`` or ``"1..131072:x2"`` into sorted unique ints.

    Items are comma-separated; each is an integer, an inclusive range ``A..B``, a range with step
    ``A..B:S`` or a geometric range ``A..B:xF`` (``A, A*F, A*F^2, ... <= B``, rounded to integers).
    Every value must lie in ``[lo, hi]`` (``hi`` defaults to ``2**53``, the largest integer that
    the library's float-based checks hold exactly). Errors name ``name`` and the offending item.
    """
    if hi is None:
        hi = MAX_EXACT_INT
    values: list[int] = []
    items = [t.strip() for t in text.split(",")]
    if not text.strip() or any(not t for t in items):
        fail(name, text, "a non-empty comma-separated list")
    for item in items:
        m = _RANGE.match(item)
        if m is None:
            if ".." in item:
                fail(name, item, "a range A..B, A..B:S or A..B:xF with integer A, B")
            v = _parse_int(item, name)
            seq = [v]
        else:
            a, b = int(m.group(1)), int(m.group(2))
            if b < a:
                fail(name, item, "a range A..B with A <= B")
            if lo is not None and a < lo:
                fail(name, a, f">= {lo}")
            if hi is not None and b > hi:
                fail(name, b, f"<= {hi}")
            if m.group(4) is None:
                step = 1
                count = b - a + 1
            elif m.group(3):
                try:
                    factor = float(m.group(4))
                except ValueError:
                    fail(name, item, "a geometric range A..B:xF with a number F > 1")
                if not factor > 1 or not math.isfinite(factor):
                    fail(name, item, "a geometric range A..B:xF with F > 1")
                if a < 1:
                    fail(name, item, "a geometric range A..B:xF with A >= 1")
                count = int(math.floor(math.log(b / a) / math.log(factor) + 1e-9)) + 1
            else:
                step = _parse_int(m.group(4), name)
                if step < 1:
                    fail(name, item, "a range A..B:S with step S >= 1")
                count = (b - a) // step + 1
            if len(values) + count > MAX_LIST_LENGTH:
                fail(name, item, f"a list of at most {MAX_LIST_LENGTH} values")
            if m.group(4) is None or not m.group(3):
                seq = list(range(a, b + 1, step))
            else:
                seq = [int(round(a * factor**j)) for j in range(count)]
                seq = [s for s in seq if s <= b]
        for v in seq:
            if lo is not None and v < lo:
                fail(name, v, f">= {lo}")
            if hi is not None and v > hi:
                fail(name, v, f"<= {hi}")
        values.extend(seq)
        if len(values) > MAX_LIST_LENGTH:
            fail(name, item, f"a list of at most {MAX_LIST_LENGTH} values")
    return np.unique(np.asarray(values, dtype=np.int64))


def parse_float_list(text: str, name: str) -> np.ndarray:
    """Parse a comma-separated list of finite numbers (``"0.2,0.5,0.8"``), order kept."""
    items = [t.strip() for t in text.split(",")]
    if not text.strip() or any(not t for t in items):
        fail(name, text, "a non-empty comma-separated list of numbers")
    out = []
    for item in items:
        try:
            v = float(item)
        except ValueError:
            fail(name, item, "a number")
        if not math.isfinite(v):
            fail(name, item, "a finite number")
        out.append(v)
    return np.asarray(out, dtype=float)


def check_output_path(path: Path | None, name: str = "--output") -> Path | None:
    """Check that ``path`` can be created: its folder exists and it is not itself a folder."""
    if path is None:
        return None
    path = Path(path)
    if path.is_dir():
        fail(name, str(path), "a file path, not a folder")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        fail(name, str(path), "a path in an existing folder")
    return path


def _to_json(df: pd.DataFrame) -> str:
    records = df.to_dict(orient="records")
    clean = [
        {k: (v.item() if isinstance(v, np.generic) else v) for k, v in rec.items()}
        for rec in records
    ]
    return json.dumps(clean, indent=2, allow_nan=False)


def _render_table(df: pd.DataFrame, title: str | None) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=escape(title) if title else None, show_lines=False)
    for col in df.columns:
        table.add_column(escape(str(col)), justify="right")
    for row in df.itertuples(index=False):
        cells = []
        for v in row:
            if isinstance(v, float | np.floating):
                cells.append(f"{float(v):.6g}")
            else:
                cells.append(escape(str(v)))
        table.add_row(*cells)
    Console(width=max(100, 14 * len(df.columns))).print(table)


def emit(
    df: pd.DataFrame,
    fmt: OutputFormat = OutputFormat.table,
    output: Path | None = None,
    *,
    title: str | None = None,
) -> None:
    """Print ``df`` as a rich table, CSV or JSON, or write it to ``output``.

    CSV and JSON carry full float precision (``repr``); the table shows 6 significant digits. When
    ``output`` is given, the file gets the chosen format (a table is written as CSV) and a one-line
    confirmation goes to stderr.
    """
    fmt = OutputFormat(fmt)
    if output is not None:
        output = check_output_path(output)
        text = _to_json(df) + "\n" if fmt is OutputFormat.json else df.to_csv(index=False)
        output.write_text(text)
        print(f"wrote {len(df)} rows to {output}", file=sys.stderr)
        return
    if fmt is OutputFormat.csv:
        sys.stdout.write(df.to_csv(index=False))
    elif fmt is OutputFormat.json:
        sys.stdout.write(_to_json(df) + "\n")
    else:
        _render_table(df, title)
