"""Sensitivity of the Fig. 2 simulation to Adam's eps and to weight decay, for both surrogates.

The two Fig. 2 configs (``fig2-logprob-adam.toml``: log-prob surrogate, Adam with L2 weight
decay; ``fig2-linear-adamw.toml``: linear surrogate, AdamW with decoupled decay), vanilla
(gamma = 0), rerun at four optimizer settings: eps in {1e-8, 1e-10, 1e-12} without weight decay,
and eps 1e-8 with weight decay 0.01 (AdamW's usual default). Final Q_pos and final M_ret against N,
median over seeds (line) and every seed (dots). theory.md sections 10-11: the linear surrogate's
raw gradients are of order p^2 (about 1e-9), at or below eps = 1e-8.
Fast mode: N in {2, 128, 8,192}, 1 seed, 100 steps, marked FAST PREVIEW.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ._common import PAPER, footnote
from ._sim import CONFIG_DIR, run_configs

__all__ = ["Params", "PARAMS", "TITLE", "IN_PAPER", "COST_SECONDS", "compute", "plot"]

TITLE = "Sensitivity of Fig. 2 to Adam's eps and weight decay (both surrogates)"
IN_PAPER = False
#: 250-269 s measured 29 Nov 2026 in `make reproduce` (2 workers, empty cache, 2 cores).
COST_SECONDS = 260.0
#: its runs go to the shared run cache (``_sim.run_configs``): never beside another such figure
SHARED_RUNS = True


@dataclass(frozen=True)
class Params:
    configs: tuple[Path, ...] = (
        CONFIG_DIR / "fig2-logprob-adam.toml",
        CONFIG_DIR / "fig2-linear-adamw.toml",
    )
    #: The N of the README's Fig. 2 tables: both ends, the band's edges (128, 32,768) and inside.
    n_values: tuple[int, ...] = (2, 16, 128, 1024, 8192, 32768, 131072)
    #: (adam_eps, weight_decay): PyTorch's default eps and the two smaller eps the review probed,
    #: then AdamW's usual decay 0.01 at the default eps, in each config's own optimizer (Adam with
    #: L2 for log-prob, AdamW for linear).
    variants: tuple[tuple[float, float], ...] = (
        (1e-8, 0.0),
        (1e-10, 0.0),
        (1e-12, 0.0),
        (1e-8, 0.01),
    )
    #: Added AFTER the first full run showed that coupled L2 0.01 under Adam drives every logit to
    #: 0 (uniform policy): the log-prob surrogate with decoupled AdamW decay 0.01, eps 1e-8.
    adamw_logprob: bool = True
    #: Vanilla only: the sensitivity is a property of the optimizer on the baseline every
    #: comparison is made against (and halves the cost).
    gamma: float = 0.0
    #: Fig. 2's seed count (cost: 2 surrogates x 4 variants x 7 N runs of 1,000 steps per seed).
    seeds: int = 4
    steps: int = 1000
    fast_n: tuple[int, ...] = (2, 128, 8192)
    fast_seeds: int = 1
    fast_steps: int = 100


PARAMS = Params()


def _final(raw: pd.DataFrame, steps: int, eps: float, wd: float) -> pd.DataFrame:
    last = raw[raw["step"] == steps]
    cols = ["rule", "optimizer", "N", "seed_index", "q_pos", "m_ret"]
    return last[cols].assign(adam_eps=eps, weight_decay=wd)


def _fig2_runs(base: dict, eps: float, wd: float, fast: bool) -> bool:
    """Whether the variant ``(eps, wd)`` is the config's own optimizer setting: then its runs
    are Fig. 2's (``fig2_simulation``, ``fig2_linear_adamw``) at gamma = 0, logged as those
    figures log them, so that the shared run cache computes them once for both figures. The
    last step's values do not depend on what else is logged (the random streams do not)."""
    from fgrpo_theory.sim import SimConfig

    own_eps = base.get("adam_eps", SimConfig.adam_eps)  # the config's, else the default
    own_wd = base.get("weight_decay", SimConfig.weight_decay)
    return not fast and eps == own_eps and wd == own_wd


def compute(params: Params = PARAMS, fast: bool = False) -> pd.DataFrame:
    """Final q_pos and m_ret per (rule, optimizer, adam_eps, weight_decay, N, seed)."""
    from fgrpo_theory.sim import load_sweep

    steps = params.fast_steps if fast else params.steps
    frames = []
    for path in params.configs:
        base = load_sweep(path)
        for eps, wd in params.variants:
            sweep = dict(base)
            sweep.update(
                N=list(params.fast_n if fast else params.n_values),
                gamma=params.gamma,
                adam_eps=eps,
                weight_decay=wd,
                seeds=params.fast_seeds if fast else params.seeds,
                steps=steps,
            )
            if not _fig2_runs(base, eps, wd, fast):
                sweep.update(log_steps=[0, steps], pass_k=[1])
            frames.append(_final(run_configs(sweep), steps, eps, wd))
        if params.adamw_logprob and base["rule"] == "logprob":
            sweep.update(optimizer="adamw", adam_eps=1e-8, weight_decay=0.01,
                         log_steps=[0, steps], pass_k=[1])  # fmt: skip
            frames.append(_final(run_configs(sweep), steps, 1e-8, 0.01))
    df = pd.concat(frames, ignore_index=True)
    df["steps"] = steps
    df["fast"] = fast
    return df


def plot(df: pd.DataFrame, params: Params = PARAMS) -> Figure:
    """Rows: final Q_pos, final M_ret; columns: log-prob / Adam, linear / AdamW."""
    from fgrpo_theory.plotting import DOUBLE_COLUMN, PALETTE, new_figure

    rules = [r for r in ("logprob", "linear") if r in set(df["rule"])]
    fig = new_figure(DOUBLE_COLUMN, 4.2)
    axes = fig.subplots(2, len(rules), squeeze=False)
    for j, rule in enumerate(rules):
        d = df[df["rule"] == rule]
        opt = "adam" if rule == "logprob" else "adamw"  # the config's own optimizer
        for i, (metric, label) in enumerate(
            (("q_pos", r"final $Q_{pos}$"), ("m_ret", r"final $M_{ret}$"))
        ):
            ax = axes[i, j]
            combos = d[["optimizer", "adam_eps", "weight_decay"]].drop_duplicates()
            combos = combos.sort_values(
                ["optimizer", "weight_decay", "adam_eps"], ascending=[True, True, False]
            )
            for k, (o, eps, wd) in enumerate(combos.itertuples(index=False)):
                sel = (d["optimizer"] == o) & (d["adam_eps"] == eps) & (d["weight_decay"] == wd)
                v = d[sel]
                med = v.groupby("N")[metric].median()
                ls = ":" if o != opt else ("--" if wd > 0 else "-")
                ax.plot(
                    med.index, med.values, ls, marker="o", ms=2.5, lw=1.1, color=PALETTE[k],
                    label=f"{o}, eps {eps:g}, wd {wd:g}",
                )  # fmt: skip
                jitter = np.exp(0.06 * (k - 1.5))
                ax.plot(v["N"] * jitter, v[metric], ".", ms=2, color=PALETTE[k], alpha=0.5)
            ax.set_xscale("log")
            ax.set_ylim(-0.02, 1.05)
            ax.set_ylabel(label)
            if i == 0:
                name = "log-prob surrogate" if rule == "logprob" else "linear surrogate"
                ax.set_title(f"{name}, {opt}")
                ax.legend(fontsize=5.5, loc="lower right")
            else:
                ax.set_xlabel("group size N")
    steps = int(df["steps"].iloc[0])
    seeds = int(df["seed_index"].nunique())
    fig.suptitle("Fig. 2 setting: dependence on Adam's eps and on weight decay", fontsize=8.5)
    footnote(
        fig,
        f"Categorical simulation of {PAPER} appendix J (K = 128,000, lr 1e-2, vanilla gamma = 0, "
        f"{steps} steps); line = median over {seeds} seeds, dots = every seed (slightly offset "
        "in N). Log-prob: Adam, weight decay as an L2 term (dotted: AdamW, decoupled decay 0.01); "
        "linear: AdamW, decoupled decay.",
        width=170,
    )
    return fig
