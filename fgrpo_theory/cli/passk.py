"""CLI command ``passk``: the unbiased pass@k estimate from n samples with c correct.

Parse, one library call (:func:`fgrpo_theory.tables.passk_table`), emit.
"""

from __future__ import annotations

from pathlib import Path

import typer

from .. import _spec
from .._validate import MAX_EXACT_INT, fail
from ._app import app
from ._common import FORMAT_OPTION, OUTPUT_OPTION, OutputFormat, emit

_NAMES = {"n": "--n", "c": "--c", "k": "--k"}


def _read_nc_csv(path: str):
    """Columns n, c (and any others) of a CSV file, or of stdin for ``-``, checked cell by cell."""
    import pandas as pd

    name = "--from-csv"
    if path == "-":
        import io

        from ..diagnose.io import read_stdin
        from ..tables import MAX_TABLE_ROWS

        source, shown = io.StringIO(read_stdin(name, MAX_TABLE_ROWS)), "stdin"
    else:
        if not Path(path).is_file():
            fail(name, path, "an existing file (or - for stdin)")
        source, shown = path, path
    try:
        df = pd.read_csv(source, dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, OSError) as e:
        fail(name, shown, f"a readable CSV file ({type(e).__name__})")
    df.columns = [str(c).strip() for c in df.columns]
    if not {"n", "c"} <= set(df.columns):
        fail(name, shown, "a CSV with columns n and c")
    if df.empty:
        fail(name, shown, "a CSV with at least one row")
    out = {}
    for col, lo in (("n", 1), ("c", 0)):
        values = []
        for row, cell in enumerate(df[col].tolist(), start=2):  # row 1 is the header
            text = str(cell).strip()
            try:
                v = int(text)
            except ValueError:
                v = None
            if v is None or v < lo or v > MAX_EXACT_INT:
                need = f"an integer in [{lo}, 2**53]"
                fail(f"{name} column {col} (row {row} of {shown})", text, need)
            values.append(v)
        out[col] = values
    extra = df.drop(columns=["n", "c"])
    return out["n"], out["c"], extra


@app.command("passk")
def passk(
    n: str | None = typer.Option(None, "--n", help="Sample counts n >= 1: 1024 or 64,1024."),
    c: str | None = typer.Option(None, "--c", help="Correct counts 0 <= c <= n: 3,10."),
    k: str = typer.Option("1", "--k", help="Attempt budgets 1 <= k <= n: 1,256."),
    from_csv: str | None = typer.Option(
        None,
        "--from-csv",
        help="CSV with columns n and c (one row per problem; other columns are kept), or - for "
        "stdin; replaces --n/--c.",
        metavar="FILE",
    ),
    fmt: OutputFormat | None = FORMAT_OPTION,
    output: Path | None = OUTPUT_OPTION,
) -> None:
    """Unbiased pass@k = 1 - C(n-c, k)/C(n, k) from n samples with c correct (theory.md sec. 7).

    Either the grid of --n x --c x --k, or every row of --from-csv times every --k. Any n up
    to 2**53 costs O(1) time and memory per row.

    Example, one line:

    `fgrpo-theory passk --n 1024 --c 3,10 --k 1,256`
    """
    import numpy as np
    import pandas as pd

    from ..tables import MAX_TABLE_ROWS, passk_table

    ks = _spec.parse_int_list(k, name="--k", lo=1)
    if from_csv is not None:
        if n is not None or c is not None:
            fail("--from-csv", from_csv, "used without --n and --c")
        ns, cs, extra = _read_nc_csv(from_csv)
        rows = len(ns) * len(ks)
        if rows > MAX_TABLE_ROWS:
            fail("--k", k, f"small enough for at most {MAX_TABLE_ROWS} rows ({rows} requested)")
        idx = np.repeat(np.arange(len(ns)), len(ks))
        n_s = pd.Series(np.asarray(ns, dtype=np.int64)[idx])
        c_s = pd.Series(np.asarray(cs, dtype=np.int64)[idx])
        k_s = pd.Series(np.tile(np.asarray(ks, dtype=np.int64), len(ns)))
        names = {"n": "--from-csv column n", "c": "--from-csv column c", "k": "--k"}
        table = passk_table(n_s, c_s, k_s, names=names)
        df = pd.concat([extra.iloc[idx].reset_index(drop=True), table], axis=1)
    else:
        if n is None:
            fail("--n", "nothing", "given unless --from-csv is used")
        if c is None:
            fail("--c", "nothing", "given unless --from-csv is used")
        ns = _spec.parse_int_list(n, name="--n", lo=1)
        cs = _spec.parse_int_list(c, name="--c", lo=0)
        df = passk_table(ns, cs, ks, names=_NAMES)
    emit(df, fmt, output, title="pass@k")
