"""CLI command ``compare-passk``: is model B's pass@k different from model A's? (appendix Q)

Thin layer over :func:`fgrpo_theory.significance.compare_passk`.
"""

from __future__ import annotations

from pathlib import Path

import typer

from .._validate import fail
from ._app import app
from ._common import (
    FORMAT_OPTION,
    OUTPUT_OPTION,
    OutputFormat,
    check_output_path,
    emit,
    parse_int_list,
)

__all__ = ["compare_passk_cmd"]


def _read_counts(source: str, name: str, columns: dict[str, str] | None):
    import numpy as np
    import pandas as pd

    from ..diagnose.io import _rename, id_column, numeric_column, read_table

    df = _rename(read_table(source, name), columns)
    missing = [c for c in ("problem", "n", "c") if c not in df.columns]
    if missing:
        there = ", ".join(str(c) for c in df.columns)
        fail(name, ", ".join(missing), f"a file with columns problem,n,c (missing; there: {there})")
    if len(df) == 0:
        fail(name, source, "a file with at least one problem")
    prob = pd.Series(id_column(df, "problem"))
    if prob.duplicated().any():
        fail(name, prob[prob.duplicated()].iloc[0], "one row per problem (repeated problem)")
    n = numeric_column(df, "n", integer=True)
    c = numeric_column(df, "c", integer=True)
    if (n == 0).any():
        i = int(np.argmax(n == 0))
        fail(name, f"n = 0 for problem {prob.iloc[i]}", "a file with n >= 1 generations")
    if (c > n).any():
        i = int(np.argmax(c > n))
        fail(name, f"c = {c[i]} > n = {n[i]} for problem {prob.iloc[i]}", "a file with c <= n")
    return prob.to_numpy(), n, c


@app.command("compare-passk")
def compare_passk_cmd(
    a: str = typer.Argument(..., metavar="A", help="Model A's counts: problem,n,c (or -)."),
    b: str = typer.Argument(..., metavar="B", help="Model B's counts: problem,n,c."),
    k: str = typer.Option("1,256", "--k", help="Attempt budgets k, list/range, each <= --m."),
    m: int = typer.Option(256, "--m", help="Subsample size m (< n)."),
    iterations: int = typer.Option(50_000, "--iterations", help="Subsampling iterations."),
    alpha: float = typer.Option(0.05, "--alpha", help="Level: central 1 - alpha intervals."),
    seed: int = typer.Option(0, "--seed", help="Seed of the subsampling."),
    columns: str | None = typer.Option(
        None, "--columns", help="Map column names of both files: new=old,... (e.g. c=correct)."
    ),
    fmt: OutputFormat = FORMAT_OPTION,
    output: Path | None = OUTPUT_OPTION,
) -> None:
    """Difference in mean pass@k (B - A) by paired m-out-of-n subsampling (appendix Q).

    Joins the two files on problem; every iteration draws m of the n generations per problem and
    model (hypergeometric), recomputes the unbiased pass@k and records the mean difference.
    Reports the full-sample difference, its rescaled m-out-of-n interval and p-value, and the
    paper's raw percentile interval (paper_ci_low/high, conservative).

    Example: fgrpo-theory compare-passk base.csv focal.csv --k 1,256
    """
    import numpy as np
    import pandas as pd

    from ..diagnose.io import parse_columns
    from ..significance import compare_passk

    col_map = parse_columns(columns)
    if m < 1:  # before --k, whose bound it is
        fail("--m", m, ">= 1")
    ks = parse_int_list(k, "--k", lo=1, hi=m)
    output = check_output_path(output)
    pa, na, ca = _read_counts(a, "A", col_map)
    pb, nb, cb = _read_counts(b, "B", col_map)
    common = np.intersect1d(pa, pb)
    if common.size == 0:
        fail("B", b, "a file sharing problems with A (no common problem)")
    dropped = pa.size + pb.size - 2 * common.size
    if dropped:
        import sys

        print(
            f"joined on {common.size} common problems ({dropped} rows without a partner dropped)",
            file=sys.stderr,
        )
    ia = pd.Index(pa).get_indexer(common)
    ib = pd.Index(pb).get_indexer(common)
    res = compare_passk(
        na[ia], ca[ia], nb[ib], cb[ib], ks, m=m, iterations=iterations, alpha=alpha, seed=seed
    )
    df = pd.DataFrame(res)
    df.insert(1, "problems", common.size)
    emit(df, fmt, output, title="pass@k difference B - A (m-out-of-n subsampling)")
