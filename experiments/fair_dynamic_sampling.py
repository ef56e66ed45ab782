"""Dynamic sampling and the tail miss: Pr(B) and Pr(B | A_N) against N (theory.md section 12).

Closed forms for the Fig. 1a parameters (mu = 0.3, rho in {0.05, 0.1, 0.2}, tau = rho mu,
N = 1..128): Pr(B) of Lemma 3.1 and Pr(B | A_N) = Pr(B) / Pr(A_N), what a DAPO-style trainer that
keeps only active groups trains on. Points: simulator frequencies with 95% Wilson intervals, from a
frozen policy (K = 200 equal logits, actions 0..59 correct so mu = 0.3; rare subsets of 3, 6 and 12
correct actions so tau = 0.015, 0.03, 0.06; SGD at lr 1e-12, so logits move by < 1e-8 over the
run), dynamic sampling off and on.

What the simulator counts: ``tail_miss_<subset>`` and ``active_frac`` refer to the *first draw*
of each step (also under dynamic sampling), ``kept_active`` and ``kept_tail_miss_<subset>`` to the
group each step keeps and trains on (the last draw under dynamic sampling). Pr(B) = first-draw
tail misses / groups (both settings); Pr(B | A_N) = first-draw tail misses / active first draws
with dynamic sampling off, and kept tail misses / kept active groups with it on: the frequency
among the groups a DAPO-style trainer actually trains on.
Fast mode: 1,000 steps instead of 5,000 (per seed), marked FAST PREVIEW.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ._common import PAPER, footnote

__all__ = ["Params", "PARAMS", "TITLE", "IN_PAPER", "COST_SECONDS", "compute", "plot"]

TITLE = "Dynamic sampling: Pr(B) and Pr(B | A_N) against N, closed form and simulator"
IN_PAPER = False
#: 6-9 s measured 29 Nov 2026 in `make reproduce` (2 workers, empty cache, 2 cores).
COST_SECONDS = 8.0


@dataclass(frozen=True)
class Params:
    mu: float = 0.3  # Fig. 1a
    rho: tuple[float, ...] = (0.05, 0.1, 0.2)  # Fig. 1a
    n_max: int = 128  # Fig. 1a's axis
    #: Simulated N: powers of two (N = 1 has no active group, so no conditional frequency).
    sim_n: tuple[int, ...] = (2, 4, 8, 16, 32, 64, 128)
    #: 4 seeds x 5,000 steps = 20,000 first draws per point: s.e. of a frequency <= 0.0035.
    seeds: int = 4
    steps: int = 5000
    fast_steps: int = 1000
    K: int = 200  # smallest K giving mu = 0.3 and every tau = rho mu with whole actions


PARAMS = Params()


def _wilson(k: np.ndarray, n: np.ndarray, z: float = 1.959963984540054):
    """95% Wilson score interval of a binomial proportion k / n."""
    k = np.asarray(k, dtype=float)
    n = np.asarray(n, dtype=float)
    p = k / n
    den = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return centre - half, centre + half


def _subsets(params: Params) -> dict[str, str]:
    n_c = round(params.mu * params.K)
    out = {}
    for r in params.rho:
        size = round(r * n_c)
        if not np.isclose(size, r * n_c) or size < 1:
            raise ValueError(f"rho must give whole actions at K = {params.K}; got {r}")
        out[f"r{round(r * 100):02d}"] = f"0..{size - 1}"
    return out


def compute(params: Params = PARAMS, fast: bool = False) -> pd.DataFrame:
    """Rows ``kind`` = closed (curves over N = 1..n_max) and sim (frequencies with intervals)."""
    from fgrpo_theory.sim import SimConfig, simulate
    from fgrpo_theory.tail_miss import tail_miss_probability, tail_miss_probability_given_active

    n = np.arange(1, params.n_max + 1)
    rows = []
    for r in params.rho:
        tau = r * params.mu
        pb = tail_miss_probability(n, params.mu, tau)
        with np.errstate(invalid="ignore", divide="ignore"):
            pba = np.where(
                n > 1, tail_miss_probability_given_active(np.maximum(n, 2), params.mu, tau), 0.0
            )
        rows.append(
            pd.DataFrame(
                dict(kind="closed", N=n, rho=r, p_tail_miss=pb, p_tail_miss_given_active=pba)
            )
        )
    n_c = round(params.mu * params.K)
    subsets = _subsets(params)
    steps = params.fast_steps if fast else params.steps
    for dyn in ("off", "dapo"):
        for N in params.sim_n:
            cfg = SimConfig(
                K=params.K, logits=None, correct=f"0..{n_c - 1}", subsets=subsets, N=N,
                steps=steps, optimizer="sgd", lr=1e-12, dynamic_sampling=dyn,
                seeds=params.seeds, log_steps=[0, steps], pass_k=[1],
            )  # fmt: skip
            d = simulate(cfg)
            d = d[d["step"] == steps]
            groups = int(d["groups"].sum())
            active = int(np.rint((d["active_frac"] * d["groups"]).sum()))
            kept = int(d["kept_active"].sum())
            for r, name in zip(params.rho, subsets, strict=True):
                miss = int(d[f"tail_miss_{name}"].sum())
                kept_miss = int(d[f"kept_tail_miss_{name}"].sum())
                lo_b, hi_b = _wilson(miss, groups)
                lo_c, hi_c = _wilson(kept_miss, kept)
                rows.append(
                    pd.DataFrame(
                        [
                            dict(
                                kind="sim",
                                N=N,
                                rho=r,
                                dynamic_sampling=dyn,
                                groups=groups,
                                active=active,
                                tail_miss=miss,
                                p_tail_miss=miss / groups,
                                lo=lo_b,
                                hi=hi_b,
                                kept_active=kept,
                                kept_tail_miss=kept_miss,
                                p_tail_miss_given_active=kept_miss / kept,
                                lo_given=lo_c,
                                hi_given=hi_c,
                                resamples=int(d["resamples"].sum()),
                            )  # fmt: skip
                        ]
                    )
                )
    df = pd.concat(rows, ignore_index=True)
    df["mu"] = params.mu
    df["steps"] = steps
    df["fast"] = fast
    return df


def plot(df: pd.DataFrame, params: Params = PARAMS) -> Figure:
    """(a) Pr(B), (b) Pr(B | A_N) against N; curves closed form, points simulator."""
    from fgrpo_theory.plotting import DOUBLE_COLUMN, PALETTE, new_figure

    fig = new_figure(DOUBLE_COLUMN, 2.6)
    axes = fig.subplots(1, 2)
    closed = df[df["kind"] == "closed"]
    sim = df[df["kind"] == "sim"]
    for ax, col, lo, hi, title in (
        (axes[0], "p_tail_miss", "lo", "hi", r"(a) $\Pr(B)$ (Lemma 3.1)"),
        (
            axes[1],
            "p_tail_miss_given_active",
            "lo_given",
            "hi_given",
            r"(b) $\Pr(B \mid A_N) = \Pr(B)/\Pr(A_N)$",
        ),
    ):
        for k, r in enumerate(params.rho):
            c = closed[closed["rho"] == r]
            if col == "p_tail_miss_given_active":
                c = c[c["N"] > 1]
            ax.plot(c["N"], c[col], color=PALETTE[k], lw=1.1, label=rf"$\rho$ = {r:g}")
            for dyn, marker, shift in (("off", "o", 0.94), ("dapo", "s", 1.06)):
                s = sim[(sim["rho"] == r) & (sim["dynamic_sampling"] == dyn)]
                ax.errorbar(
                    s["N"] * shift, s[col],
                    yerr=[s[col] - s[lo], s[hi] - s[col]],
                    fmt=marker, ms=2.5, color=PALETTE[k],
                    mfc="white" if dyn == "dapo" else PALETTE[k],
                    elinewidth=0.6, capsize=1, lw=0,
                )  # fmt: skip
        ax.set_xscale("log", base=2)
        ax.set_xlabel("group size N")
        ax.set_title(title)
        ax.set_ylim(-0.02, 1.02)
    axes[1].plot([], [], "o", color="0.3", ms=2.5, label="simulator, dynamic sampling off")
    axes[1].plot([], [], "s", color="0.3", mfc="white", ms=2.5, label="simulator, on")
    axes[1].legend(fontsize=5.5, loc="lower left")
    steps = int(df["steps"].iloc[0])
    footnote(
        fig,
        f"{PAPER}, theory.md section 12: mu = {params.mu:g}, tau = rho mu. Curves: closed forms. "
        f"Points: frequencies over {params.seeds} seeds x {steps:,} steps of a frozen simulator "
        "policy (95% Wilson intervals); filled = dynamic sampling off, open = on. (a) counts "
        "each step's first draw; (b) the group each step keeps and trains on (with dynamic "
        "sampling on: among the kept groups, which are active).",
        width=170,
    )
    return fig
