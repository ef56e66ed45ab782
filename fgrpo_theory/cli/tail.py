"""CLI commands ``miss-prob`` and ``peak``: the tail-miss probability of Lemma 3.1 and its peak.

Thin layer over :mod:`fgrpo_theory.tail_miss`. Only ``--plot`` imports matplotlib; nothing here
imports Numba.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from .. import _spec
from .._validate import fail
from ._app import app
from ._common import (
    FORMAT_OPTION,
    OUTPUT_OPTION,
    OutputFormat,
    atomic_path,
    check_output_path,
    emit,
)

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["miss_prob", "peak", "N_MAX"]

#: Largest group size accepted by ``--N``.
N_MAX = 10**15

_MU_HELP = "Success probability mu = pi(C), in (0, 1); comma-separated list, e.g. 0.2,0.5,0.8."
_RHO_HELP = "Rarity rho = tau/mu of the rare correct subset, in (0, 1); list. Give --rho or --tau."
_TAU_HELP = "Mass tau of the rare correct subset, in (0, mu); list. Give --tau or --rho."
#: Option names for the library's error messages.
_NAMES = {"N": "--N", "mu": "--mu", "rho": "--rho", "tau": "--tau"}


def _floats(text: str | None, name: str) -> list[float] | None:
    return None if text is None else _spec.parse_float_list(text, name=name)


def _check_plot_path(plot: Path | None) -> Path | None:
    if plot is None:
        return None
    if Path(plot).suffix.lower() not in {".png", ".pdf"}:
        fail("--plot", str(plot), "a file name ending in .png or .pdf")
    return check_output_path(plot, "--plot")


def _save_plot(df: pd.DataFrame, plot: Path) -> None:
    import sys

    from ..plotting import new_figure, paper_style, plot_tail_miss, save_figure

    with paper_style():
        fig = new_figure()
        ax = fig.subplots()
        plot_tail_miss(ax, df)
        # Whole or not at all: render to a temporary file beside the target, then rename.
        with atomic_path(plot, name="--plot") as tmp:
            save_figure(fig, tmp.with_suffix(""), formats=(plot.suffix.lower()[1:],))
    print(f"wrote plot to {plot}", file=sys.stderr)


@app.command("miss-prob")
def miss_prob(
    N: str = typer.Option(
        "1..128",
        "--N",
        help="Group sizes: integers, A..B, A..B:S or A..B:xF (geometric), comma-separated.",
    ),
    mu: str = typer.Option(..., "--mu", help=_MU_HELP),
    rho: str | None = typer.Option(None, "--rho", help=_RHO_HELP),
    tau: str | None = typer.Option(None, "--tau", help=_TAU_HELP),
    fmt: OutputFormat | None = FORMAT_OPTION,
    output: Path | None = OUTPUT_OPTION,
    plot: Path | None = typer.Option(
        None,
        "--plot",
        help="Also draw Pr(B) against N (peaks starred) to FILE.png or FILE.pdf.",
        metavar="FILE",
    ),
) -> None:
    """Tail-miss probability Pr(B) of Lemma 3.1, with Pr(active) (P-7) and Pr(hit).

    One row per (mu, tau, N), with tau = rho * mu the mass of a rare correct subset:
    p_active = 1 - mu^N - (1-mu)^N: the group has mixed rewards (P-7);
    p_tail_miss = (1-tau)^N - (mu-tau)^N - (1-mu)^N: active, yet the rare subset is never sampled;
    p_tail_miss_given_active = p_tail_miss / p_active: the share of active groups (all that dynamic
    sampling keeps) that miss the subset (0 at N = 1, where no group is active);
    p_hit = 1 - (1-tau)^N: at least one rollout lands in the rare subset.

    Example (paper Fig. 1a), one line:

    `fgrpo-theory miss-prob --N 1..128:x2 --mu 0.3 --rho 0.05,0.1,0.2 --plot fig1a.png`
    """
    from ..tables import tail_miss_table

    n_values = _spec.parse_int_list(N, name="--N", lo=1, hi=N_MAX)
    mus, rhos, taus = _floats(mu, "--mu"), _floats(rho, "--rho"), _floats(tau, "--tau")
    output = check_output_path(output)
    plot = _check_plot_path(plot)
    df = tail_miss_table(n_values, mus, rho=rhos, tau=taus, names=_NAMES)
    if plot is not None:
        _save_plot(df, plot)
    emit(df, fmt, output, title="Tail-miss probability (Lemma 3.1)")


@app.command("peak")
def peak(
    mu: str = typer.Option(..., "--mu", help=_MU_HELP),
    rho: str | None = typer.Option(None, "--rho", help=_RHO_HELP),
    tau: str | None = typer.Option(None, "--tau", help=_TAU_HELP),
    fmt: OutputFormat | None = FORMAT_OPTION,
    output: Path | None = OUTPUT_OPTION,
) -> None:
    """Group size N* that maximizes the tail-miss probability Pr(B) of Lemma 3.1.

    The paper gives no closed form; Pr(B) is unimodal in N, so it is solved numerically:
    n_star: the integer argmax over N = 1, 2, ...;
    n_star_continuous: the root of d/dN Pr(B) = 0 over real N (n_star is its floor or ceiling);
    p_peak: Pr(B) at n_star. Works down to tau = 1e-12 (N* then up to ~1e12).

    Example (paper Fig. 3), one line:

    `fgrpo-theory peak --mu 0.8,0.5,0.2 --rho 0.01,0.05,0.1,0.2`
    """
    from ..tables import peak_table

    mus, rhos, taus = _floats(mu, "--mu"), _floats(rho, "--rho"), _floats(tau, "--tau")
    output = check_output_path(output)
    df = peak_table(mus, rho=rhos, tau=taus, names=_NAMES)
    emit(df, fmt, output, title="Peak of the tail-miss probability over N")
