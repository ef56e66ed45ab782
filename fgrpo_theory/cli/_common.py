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
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypeVar

import numpy as np
import typer

from .. import _spec
from .._io import atomic_open, atomic_path, check_output_path, write_atomic
from .._spec import MAX_LIST_LENGTH
from .._validate import fail
from ..sim.config import CLIP_DEFAULTS

if TYPE_CHECKING:
    import pandas as pd

T = TypeVar("T")

__all__ = [
    "ALGO_OPTION",
    "CLIP_HIGH_OPTION",
    "CLIP_LOW_OPTION",
    "DS_RANGE_OPTION",
    "DUAL_CLIP_OPTION",
    "DYNAMIC_SAMPLING_OPTION",
    "INNER_UPDATES_OPTION",
    "ResultFolder",
    "check_out",
    "FORMAT_OPTION",
    "OUTPUT_OPTION",
    "SCHEDULER_OPTION",
    "OutputFormat",
    "Rows",
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
#: Characters per write when JSON is printed: one large write into a pipe whose reader has gone
#: returns short and CPython's buffered writer does not report it (exit 0, table cut); writes of
#: this size, each flushed, meet the closed pipe on the next one (BrokenPipeError: exit 141).
JSON_CHUNK_CHARS = 1 << 16


class OutputFormat(StrEnum):
    """How a command prints its result."""

    table = "table"
    csv = "csv"
    json = "json"


#: What a command stopped by Ctrl-C had finished ("rl step 3/40"): :func:`cli.main` appends it
#: to its one "interrupted" line (Typer turns the KeyboardInterrupt into an exit code, so the
#: exception's text cannot travel with it).
INTERRUPTED_AFTER: list[str] = []


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

#: The per-algorithm clip defaults shown in --help, e.g. "grpo 0.2, dapo 0.2, cispo 1.0".
_CLIP_LOW = ", ".join(f"{a} {lo:g}" for a, (lo, _) in CLIP_DEFAULTS.items())
_CLIP_HIGH = ", ".join(f"{a} {hi:g}" for a, (_, hi) in CLIP_DEFAULTS.items())

# Options of the training algorithm shared by simulate and population: the same flag, help and
# shown default in both; None (not given) keeps the config's value.
ALGO_OPTION = typer.Option(None, "--algo", help="grpo, dapo or cispo.", show_default="grpo")
SCHEME_OPTION = typer.Option(
    None,
    "--scheme",
    help="Training scheme spec TERM[+TERM...], TERM = NAME[:KEY=VALUE,...]: one advantage term "
    "(grpo, maxrl, pkpo:k=4, unlikeliness:penalty=0.25, ds, ...), optional focal:gamma=G, "
    "entropy:coef=C, kl:coef=C,estimator=exact|k3; e.g. 'maxrl+entropy:coef=0.001'. "
    "'fgrpo-theory scheme list' lists them.",
    show_default="the advantage and gamma fields",
)
INNER_UPDATES_OPTION = typer.Option(
    None,
    "--inner-updates",
    help="Optimizer steps per sampled group (PPO epochs: ratios to the sampling policy and "
    "clipping act only when > 1).",
    show_default="1",
)
CLIP_LOW_OPTION = typer.Option(
    None,
    "--clip-low",
    help="Clip range [1 - clip_low, 1 + clip_high] of the ratio (CISPO: of its weight).",
    show_default=_CLIP_LOW,
)
CLIP_HIGH_OPTION = typer.Option(
    None,
    "--clip-high",
    help="Upper clip (TRL's cispo cap epsilon_high = E is --clip-high E-1 --clip-low 1).",
    show_default=_CLIP_HIGH,
)
DUAL_CLIP_OPTION = typer.Option(
    None,
    "--dual-clip",
    help="Dual-clip PPO constant c > 1 (verl's clip_ratio_c, 3 there) or off: no gradient "
    "where A < 0 and the ratio exceeds c.",
    show_default="off",
)
DYNAMIC_SAMPLING_OPTION = typer.Option(
    None,
    "--dynamic-sampling",
    help="Filter whose dropped groups are redrawn (population: see --ds-fill): off, dapo (drop "
    "all-equal groups), verl "
    "(dapo, but keep groups of one) or openrlhf (keep LO < X/N < HI, see --ds-range).",
    show_default="off",
)
DS_RANGE_OPTION = typer.Option(
    None,
    "--ds-range",
    metavar="LO,HI",
    help="openrlhf filter: open range LO,HI of the success rate X/N a kept group lies in.",
    show_default="0,1",
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
    sweep: dict,
    *,
    N: str | None = None,
    gamma: str | None = None,
    ds_range: str | None = None,
    dual_clip: str | None = None,
) -> dict:
    """Put the sweepable options simulate and population share into a sweep mapping.

    ``--N`` (integer list/range grammar) and ``--gamma`` (float list): one value sets the field,
    several make it a sweep axis; ``--ds-range LO,HI`` is one pair; ``--dual-clip`` one number
    (the config checks c > 1) or ``off``. Returns ``sweep``.
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
    if dual_clip is not None:
        if dual_clip.strip().lower() == "off":
            sweep["dual_clip"] = None
        else:
            vals_c = parse_float_list(dual_clip, "--dual-clip")
            if len(vals_c) != 1:
                fail("--dual-clip", dual_clip, "one number c > 1 (e.g. 3) or off")
            sweep["dual_clip"] = float(vals_c[0])
    return sweep


def check_out(out: Path, n_configs: int) -> None:
    """``--out``: a .parquet/.csv file in an existing, writable folder for one config, a folder
    (created if missing, checked writable) for a sweep of ``n_configs``."""
    if n_configs > 1:
        from ..sim.sweep import check_out_dir

        if out.suffix in (".parquet", ".csv"):
            fail("--out", str(out), f"a folder for a sweep of {n_configs} configs")
        check_out_dir(out, "--out")
        return
    if out.suffix not in (".parquet", ".csv"):
        fail("--out", str(out), "a .parquet or .csv file (or a folder for a sweep)")
    if out.is_dir():
        fail("--out", str(out), "a file path, not a folder")
    parent = out.parent if str(out.parent) else Path(".")
    if not parent.is_dir():
        fail("--out", str(out), "a path in an existing folder")
    if not os.access(parent, os.W_OK):
        fail("--out", str(out), "a path in a writable folder")


class ResultFolder:
    """A sweep's ``--out`` folder: created by :func:`check_out` if missing, removed again (with
    the parents created for it) if the command fails before writing anything into it, and able
    to say how many result files a run wrote and how many it reused.

    Use as ``with ResultFolder(out, n) as folder: ...; folder.report()``.
    """

    def __init__(self, out: Path | None, n_configs: int) -> None:
        self.out = out
        self.n_configs = n_configs
        self._created: list[Path] = []
        self._before: dict[str, tuple[int, int]] = {}

    def _state(self) -> dict[str, tuple[int, int]]:
        if self.out is None or not self.out.is_dir():
            return {}
        state = {}
        for f in self.out.glob("*.parquet"):
            try:
                st = f.stat()
            except OSError:  # removed meanwhile (another sweep's temporary file)
                continue
            state[f.name] = (st.st_ino, st.st_mtime_ns)
        return state

    def __enter__(self) -> ResultFolder:
        if self.out is not None:
            if self.n_configs > 1:
                missing = self.out.absolute()
                while not missing.exists() and missing != missing.parent:
                    self._created.append(missing)
                    missing = missing.parent
            check_out(self.out, self.n_configs)
            self._before = self._state()
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        if kind is None:
            return
        if self._created and self.out is not None:
            # the folder's private key (written before any result) is all a failed run left there
            from .._trust import KEY_NAME

            key = self.out / KEY_NAME
            try:
                if [p.name for p in self.out.iterdir()] == [KEY_NAME] and not key.is_symlink():
                    key.unlink()
            except OSError:
                pass
        for folder in self._created:  # innermost first; a folder holding anything is kept
            try:
                folder.rmdir()
            except OSError:
                break

    def report(self) -> None:
        """One stderr line: how many result files were written now and how many reused."""
        if self.out is None or self.n_configs <= 1:
            return
        after = self._state()
        written = min(sum(1 for k, v in after.items() if self._before.get(k) != v), self.n_configs)
        reused = self.n_configs - written
        files = f"result file{'' if written == 1 else 's'}"
        if written == 0:
            msg = f"reused all {reused} result files in {self.out} (nothing to compute)"
        elif reused == 0:
            msg = f"wrote {written} {files} to {self.out}"
        else:
            msg = f"wrote {written} {files} to {self.out}, reused {reused}"
        print(msg, file=sys.stderr)


def with_progress(
    show: bool, total: int, label: str, run: Callable[[Callable[[int, int], None] | None], T]
) -> T:
    """``run(progress)`` under a transient progress bar on stderr counting to ``total`` when
    ``show``, else ``run(None)``; ``progress(done, total)`` is the library's callback."""
    if not show:
        return run(None)
    from rich.console import Console
    from rich.progress import Progress

    console = Console(stderr=True)
    if not console.is_terminal:  # a transient bar on a pipe or file leaves an empty line
        return run(None)
    with Progress(console=console, transient=True) as bar:
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


@dataclass(frozen=True)
class Rows:
    """A small result table without pandas: column names and rows of Python scalars (``None``
    or NaN for no value). :func:`emit` prints it exactly as it prints the DataFrame of the
    same values with the same dtypes (``tests/test_cli_rows.py`` checks it against pandas), so
    a command can print its result without importing pandas (about 0.4 s)."""

    columns: tuple[str, ...]
    rows: tuple[tuple, ...]

    def __len__(self) -> int:
        return len(self.rows)


def _csv_cell(v: object) -> object:
    """A value as pandas' ``to_csv`` writes it: no value empty, a float by its ``repr``."""
    if v is None or (isinstance(v, float) and v != v):
        return ""
    return repr(v) if isinstance(v, float) else v


def _json_text(df: pd.DataFrame | Rows) -> str:
    if isinstance(df, Rows):
        clean = [dict(zip(df.columns, row, strict=True)) for row in df.rows]
    else:
        clean = [
            {k: (v.item() if isinstance(v, np.generic) else v) for k, v in rec.items()}
            for rec in df.to_dict(orient="records")
        ]
    try:
        return json.dumps(clean, indent=2, allow_nan=False) + "\n"
    except ValueError:
        fail("output", "NaN or infinity", "finite numbers only (a bug: please report it)")


def _write_csv(df: pd.DataFrame | Rows, fh: IO[str]) -> None:
    """Write ``df`` as CSV in chunks (the header first), full float precision."""
    if isinstance(df, Rows):  # as pandas writes it: minimal quoting, "\n" after each row
        import csv

        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(df.columns)
        writer.writerows([_csv_cell(v) for v in row] for row in df.rows)
        return
    if len(df) == 0:
        fh.write(df.to_csv(index=False))
        return
    for start in range(0, len(df), CSV_CHUNK_ROWS):
        chunk = df.iloc[start : start + CSV_CHUNK_ROWS]
        fh.write(chunk.to_csv(index=False, header=start == 0))
        fh.flush()


def _write_text(text: str, fh: IO[str]) -> None:
    """Write ``text`` in flushed chunks of :data:`JSON_CHUNK_CHARS` characters."""
    for start in range(0, len(text), JSON_CHUNK_CHARS):
        fh.write(text[start : start + JSON_CHUNK_CHARS])
        fh.flush()


def _render_table(df: pd.DataFrame | Rows, title: str | None, out: IO[str]) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    n_shown = min(len(df), MAX_TABLE_ROWS)
    rows: Iterable[tuple]
    if isinstance(df, Rows):
        rows = df.rows[:n_shown]
    else:
        rows = df.iloc[:n_shown].itertuples(index=False)
    caption = None
    if n_shown < len(df):
        caption = (
            f"first {n_shown} of {len(df)} rows; use --format csv or --output FILE for all of them"
        )
    table = Table(title=escape(title) if title else None, caption=caption, show_lines=False)
    for col in df.columns:
        table.add_column(escape(str(col)), justify="right", overflow="fold")
    for row in rows:
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
    try:
        Console(file=out, width=width).print(table)
    except SystemExit as e:  # rich turns a closed pipe into SystemExit(1): report it as one
        if isinstance(e.__context__, BrokenPipeError):
            raise StdoutClosed from None
        raise


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
    df: pd.DataFrame | Rows,
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
            _write_text(_json_text(df), out)
        else:
            _render_table(df, title, out)
        out.flush()
    except OSError as e:
        _handle_stdout_error(e)
