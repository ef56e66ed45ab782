"""CLI commands ``miss-prob`` and ``peak``: the tail-miss probability of Lemma 3.1 and its peak.

Thin layer over :mod:`fgrpo_theory.tail_miss`. Only ``--plot`` imports matplotlib; nothing here
imports Numba.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import typer

from .._validate import check_array, fail, format_value
from ._app import app
from ._common import (
    FORMAT_OPTION,
    MAX_LIST_LENGTH,
    OUTPUT_OPTION,
    OutputFormat,
    check_output_path,
    emit,
    parse_float_list,
    parse_int_list,
)

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["miss_prob", "peak", "N_MAX"]

#: Largest group size accepted by ``--N``.
N_MAX = 10**15

_MU_HELP = "Success probability mu = pi(C), in (0, 1); comma-separated list, e.g. 0.2,0.5,0.8."
_RHO_HELP = "Rarity rho = tau/mu of the rare correct subset, in (0, 1); list. Give --rho or --tau."
_TAU_HELP = "Mass tau of the rare correct subset, in (0, mu); list. Give --tau or --rho."


def _parse_mu_tau(
    mu: str, rho: str | None, tau: str | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return flat (mu, tau, rho) arrays, one entry per (mu, rho-or-tau) pair, mu outermost."""
    mus = check_array("--mu", parse_float_list(mu, "--mu"), lo=0, hi=1, lo_open=True, hi_open=True)
    if (rho is None) == (tau is None):
        fail("--rho/--tau", "both" if rho is not None else "neither", "given, exactly one of them")
    if rho is not None:
        rhos = parse_float_list(rho, "--rho")
        check_array("--rho", rhos, lo=0, hi=1, lo_open=True, hi_open=True)
        mu_g, rho_g = np.meshgrid(mus, rhos, indexing="ij")
        tau_g = rho_g * mu_g
    else:
        taus = parse_float_list(tau, "--tau")
        check_array("--tau", taus, lo=0, lo_open=True)
        mu_g, tau_g = np.meshgrid(mus, taus, indexing="ij")
        bad = tau_g >= mu_g
        if bad.any():
            i = np.flatnonzero(bad.ravel())[0]
            fail("--tau", tau_g.flat[i], f"< --mu (= {format_value(mu_g.flat[i])})")
        rho_g = tau_g / mu_g
    return mu_g.ravel(), tau_g.ravel(), rho_g.ravel()


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
        paths = save_figure(fig, plot.with_suffix(""), formats=(plot.suffix.lower()[1:],))
    print(f"wrote plot to {paths[0]}", file=sys.stderr)


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
    fmt: OutputFormat = FORMAT_OPTION,
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
    p_hit = 1 - (1-tau)^N: at least one rollout lands in the rare subset.

    Example (paper Fig. 1a):
    fgrpo-theory miss-prob --N 1..128:x2 --mu 0.3 --rho 0.05,0.1,0.2 --plot fig1a.png
    """
    import pandas as pd

    from ..tail_miss import active_probability, hit_probability, tail_miss_probability

    n_values = parse_int_list(N, "--N", lo=1, hi=N_MAX)
    mu_p, tau_p, rho_p = _parse_mu_tau(mu, rho, tau)
    output = check_output_path(output)
    plot = _check_plot_path(plot)
    rows = n_values.size * mu_p.size
    if rows > MAX_LIST_LENGTH:
        fail("--N", N, f"such that N values x mu values x rho/tau values <= {MAX_LIST_LENGTH}")
    n_col = np.tile(n_values, mu_p.size)
    mu_col = np.repeat(mu_p, n_values.size)
    tau_col = np.repeat(tau_p, n_values.size)
    df = pd.DataFrame(
        {
            "N": n_col,
            "mu": mu_col,
            "tau": tau_col,
            "rho": np.repeat(rho_p, n_values.size),
            "p_active": active_probability(n_col, mu_col),
            "p_tail_miss": tail_miss_probability(n_col, mu_col, tau_col),
            "p_hit": hit_probability(n_col, tau_col),
        }
    )
    if plot is not None:
        _save_plot(df, plot)
    emit(df, fmt, output, title="Tail-miss probability (Lemma 3.1)")


@app.command("peak")
def peak(
    mu: str = typer.Option(..., "--mu", help=_MU_HELP),
    rho: str | None = typer.Option(None, "--rho", help=_RHO_HELP),
    tau: str | None = typer.Option(None, "--tau", help=_TAU_HELP),
    fmt: OutputFormat = FORMAT_OPTION,
    output: Path | None = OUTPUT_OPTION,
) -> None:
    """Group size N* that maximizes the tail-miss probability Pr(B) of Lemma 3.1.

    The paper gives no closed form; Pr(B) is unimodal in N, so it is solved numerically:
    n_star: the integer argmax over N = 1, 2, ...;
    n_star_continuous: the root of d/dN Pr(B) = 0 over real N (n_star is its floor or ceiling);
    p_peak: Pr(B) at n_star. Works down to tau = 1e-12 (N* then up to ~1e12).

    Example (paper Fig. 3):
    fgrpo-theory peak --mu 0.8,0.5,0.2 --rho 0.01,0.05,0.1,0.2
    """
    import pandas as pd

    from ..tail_miss import peak_group_size

    mu_p, tau_p, rho_p = _parse_mu_tau(mu, rho, tau)
    output = check_output_path(output)
    res = peak_group_size(mu_p, tau_p)
    df = pd.DataFrame(
        {
            "mu": mu_p,
            "tau": tau_p,
            "rho": rho_p,
            "n_star": np.asarray(res.n_star, dtype=np.int64),
            "n_star_continuous": res.n_star_continuous,
            "p_peak": res.p_peak,
        }
    )
    emit(df, fmt, output, title="Peak of the tail-miss probability over N")
