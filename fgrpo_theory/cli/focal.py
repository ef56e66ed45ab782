"""CLI commands ``focal``, ``lr-multiplier`` and ``passk`` (focal weights, advantages, pass@k)."""

from __future__ import annotations

from pathlib import Path

import typer

from .._validate import check_array, check_int_array, check_scalar, fail
from ._app import app
from ._common import (
    FORMAT_OPTION,
    OUTPUT_OPTION,
    OutputFormat,
    emit,
    parse_float_list,
    parse_int_list,
)

#: Largest number of rows a command of this module prints.
MAX_ROWS = 1_000_000


def _check_rows(name: str, value: str, rows: int) -> None:
    if rows > MAX_ROWS:
        fail(name, value, f"small enough for at most {MAX_ROWS} output rows ({rows} requested)")


@app.command("focal")
def focal(
    n: str = typer.Option("8", "--N", help="Group size(s) N >= 1: 8, 2,8,32 or 2..64:x2."),
    gamma: str = typer.Option("0,0.5,1", "--gamma", help="Focal exponents gamma >= 0."),
    convention: str = typer.Option(
        "grpo",
        "--convention",
        help="Advantage convention: grpo, grpo-bessel, trl, verl, openrlhf, dr-grpo, rloo, "
        "paper-sim.",
    ),
    r_correct: float = typer.Option(1.0, "--r-correct", help="Reward of a correct rollout."),
    r_incorrect: float = typer.Option(
        0.0, "--r-incorrect", help="Reward of an incorrect rollout (< --r-correct)."
    ),
    fmt: OutputFormat = FORMAT_OPTION,
    output: Path | None = OUTPUT_OPTION,
) -> None:
    """Focal weight g = (1 - X/N)^gamma (P-12) and focal advantages g*A (P-13) for X = 0..N.

    One row per gamma, N and number of correct rollouts X: mu_hat = X/N, g, and the focal-weighted
    advantage of a correct (adv_pos) and an incorrect (adv_neg) rollout under the chosen
    convention. A column for a rollout the group does not have is 0, never NaN: adv_pos at X = 0
    (no correct rollout) and adv_neg at X = N (no incorrect one). Such groups have zero variance
    and get A = 0 (inactive), except a group of one under verl's rule (A = r / (1 + 1e-6)).

    Example: fgrpo-theory focal --N 8 --gamma 0,0.5,1 --convention trl --format csv
    """
    import numpy as np
    import pandas as pd

    from ..advantages import binary_advantages, focal_weight, get_convention

    ns = parse_int_list(n, "--N", lo=1)
    gammas = check_array("--gamma", parse_float_list(gamma, "--gamma"), lo=0)
    conv = get_convention(convention)
    rc = check_scalar("--r-correct", r_correct)
    rw = check_scalar("--r-incorrect", r_incorrect)
    if not rc > rw:
        fail("--r-correct", rc, f"> --r-incorrect = {rw!r}")
    _check_rows("--N", n, len(gammas) * int((ns + 1).sum()))
    if conv.group_of_one == "raise" and ns[0] == 1:
        fail("--N", 1, f">= 2 for convention {conv.name!r} (it refuses groups of one)")

    n_col = np.concatenate([np.full(k + 1, k, dtype=np.int64) for k in ns])
    x_col = np.concatenate([np.arange(k + 1, dtype=np.int64) for k in ns])
    adv_pos, adv_neg = binary_advantages(x_col, n_col, conv, r_correct=rc, r_incorrect=rw)
    mu_hat = x_col / n_col
    frames = []
    for gm in gammas:
        g = focal_weight(mu_hat, gm)
        frames.append(
            pd.DataFrame(
                {
                    "gamma": float(gm),
                    "N": n_col,
                    "X": x_col,
                    "mu_hat": mu_hat,
                    "g": g,
                    "adv_pos": g * adv_pos + 0.0,
                    "adv_neg": g * adv_neg + 0.0,
                }
            )
        )
    df = pd.concat(frames, ignore_index=True)
    emit(df, fmt, output, title=f"focal advantages ({conv.name})")


@app.command("lr-multiplier")
def lr_multiplier_cmd(
    gamma: str = typer.Option("0,0.5,1,2", "--gamma", help="Focal exponents gamma >= 0."),
    fmt: OutputFormat = FORMAT_OPTION,
    output: Path | None = OUTPUT_OPTION,
) -> None:
    """Learning-rate multiplier m_gamma = B(3/2, gamma+3/2) / B(3/2, 3/2) (appendix N).

    The average focal weight applied to the mean |advantage| 2 sqrt(mu(1-mu)) over
    mu ~ Uniform(0, 1), relative to gamma = 0: how much F-GRPO shrinks the average update. The
    paper's low-LR control trains vanilla GRPO at base LR * m_gamma.

    Example: fgrpo-theory lr-multiplier --gamma 0,0.5,1,2 --format csv
    """
    import pandas as pd

    from ..advantages import lr_multiplier

    gammas = check_array("--gamma", parse_float_list(gamma, "--gamma"), lo=0)
    df = pd.DataFrame({"gamma": gammas, "lr_multiplier": lr_multiplier(gammas)})
    emit(df, fmt, output, title="learning-rate multiplier")


def _read_nc_csv(path: Path):
    import pandas as pd

    if not path.is_file():
        fail("--from-csv", str(path), "an existing file")
    try:
        df = pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError):
        fail("--from-csv", str(path), "a readable CSV file")
    if not {"n", "c"} <= set(df.columns):
        fail("--from-csv", str(path), "a CSV with columns n and c")
    if df.empty:
        fail("--from-csv", str(path), "a CSV with at least one row")
    return df


@app.command("passk")
def passk(
    n: str | None = typer.Option(None, "--n", help="Sample counts n >= 1: 1024 or 64,1024."),
    c: str | None = typer.Option(None, "--c", help="Correct counts 0 <= c <= n: 3,10."),
    k: str = typer.Option("1", "--k", help="Attempt budgets 1 <= k <= n: 1,256."),
    from_csv: Path | None = typer.Option(
        None,
        "--from-csv",
        help="CSV with columns n and c (one row per problem; other columns are kept); "
        "replaces --n/--c.",
    ),
    fmt: OutputFormat = FORMAT_OPTION,
    output: Path | None = OUTPUT_OPTION,
) -> None:
    """Unbiased pass@k = 1 - C(n-c, k)/C(n, k) from n samples with c correct (theory.md sec. 7).

    Either the grid of --n x --c x --k, or every row of --from-csv times every --k.

    Example: fgrpo-theory passk --n 1024 --c 3,10 --k 1,256
    """
    import numpy as np
    import pandas as pd

    from ..passk import pass_at_k

    ks = parse_int_list(k, "--k", lo=1)
    if from_csv is not None:
        if n is not None or c is not None:
            fail("--from-csv", str(from_csv), "used without --n and --c")
        src = _read_nc_csv(Path(from_csv))
        ns = check_int_array("--from-csv column n", src["n"].to_numpy(), lo=1)
        cs = check_int_array("--from-csv column c", src["c"].to_numpy(), lo=0)
        _check_rows("--k", k, len(src) * len(ks))
        extra = src.drop(columns=["n", "c"])
        rows = np.repeat(np.arange(len(src)), len(ks))
        df = extra.iloc[rows].reset_index(drop=True)
        n_col, c_col, k_col = ns[rows], cs[rows], np.tile(ks, len(src))
    else:
        if n is None:
            fail("--n", "nothing", "given unless --from-csv is used")
        if c is None:
            fail("--c", "nothing", "given unless --from-csv is used")
        ns = parse_int_list(n, "--n", lo=1)
        cs = parse_int_list(c, "--c", lo=0)
        _check_rows("--k", k, len(ns) * len(cs) * len(ks))
        grid = np.stack(np.meshgrid(ns, cs, ks, indexing="ij"), axis=-1).reshape(-1, 3)
        df = pd.DataFrame(index=range(len(grid)))
        n_col, c_col, k_col = grid[:, 0], grid[:, 1], grid[:, 2]
    for name, col in (("--c", c_col), ("--k", k_col)):
        bad = col > n_col
        if bad.any():
            fail(name, col[bad][0], f"<= n = {n_col[bad][0]}")
    df["n"], df["c"], df["k"] = n_col, c_col, k_col
    df["pass_at_k"] = pass_at_k(n_col, c_col, k_col)
    emit(df, fmt, output, title="pass@k")
