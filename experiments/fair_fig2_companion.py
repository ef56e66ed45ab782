"""Fig. 2 companion: focal gamma = 1 against matched vanilla controls, at equal progress.

Config ``fgrpo_theory/sim/presets/fig2-logprob-adam.toml`` (log-prob surrogate, Adam, lr 1e-2,
K = 128,000; theory.md sections 10-11) with an extra single-action subset ``one`` = action 1 (one
non-anchor correct action, so its NLL rise is exact). For N in {128, 8,192, 32,768}, arms (names
of :mod:`fgrpo_theory.fair.controls`): ``vanilla`` (gamma 0, lr), ``focal`` (gamma 1, lr),
``vanilla-m`` (gamma 0, lr x m_1 = lr / 2) and ``vanilla-progress`` (gamma 0 at the lr whose
median final Q_pos equals focal's). 16 seeds, 1,000 steps; every 5th step logged for the
traces, while the equal-progress values come from the kernel's threshold checks, which read the
state after every step.
Top row: M_ret against Q_pos over training, every seed thin (its logged steps), the median over
seeds (of M_ret at the first step each Q_pos is reached, over seeds that reach it) thick.
Bottom row: focal minus each control of M_ret at the first step where Q_pos reaches a
threshold: the difference of the medians over the seeds where both arms reach it, with its 95%
paired bootstrap interval.
Fast mode: N in {128, 8,192}, 4 seeds, 100 steps, marked FAST PREVIEW.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ._common import PAPER, footnote
from ._sim import CONFIG_DIR

__all__ = ["Params", "PARAMS", "TITLE", "IN_PAPER", "COST_SECONDS", "compute", "plot"]

TITLE = "Fig. 2 companion: focal vs matched vanilla controls at equal Q_pos"
IN_PAPER = False
#: 384-406 s measured 29 Nov 2026 in `make reproduce` (2 workers, empty cache, 2 cores);
#: 1,829 s once on older code at load 6-15 (docs/fair-comparison.md).
COST_SECONDS = 400.0

ARM_ORDER = ("vanilla", "focal", "vanilla-m", "vanilla-progress")


@dataclass(frozen=True)
class Params:
    config: Path = CONFIG_DIR / "fig2-logprob-adam.toml"
    #: The edges and the inside of the collapse band in the Fig. 2 table (README): where the
    #: fixed-step comparison claims the largest focal benefit (128, 32,768) and the middle (8,192).
    n_values: tuple[int, ...] = (128, 8192, 32768)
    gamma: float = 1.0  # the paper's simulated focal exponent (theory.md section 8)
    #: 16 seeds: the project's minimum for bimodal outcomes at the edge of the band.
    seeds: int = 16
    steps: int = 1000  # Fig. 2's horizon
    #: Steps between the logged rows of the per-seed traces (the thin lines): 201 points per
    #: line. The equal-progress metrics do not depend on it (the kernel checks the thresholds
    #: after every step); logging every step cost 28-38 % of the run (a metrics pass over
    #: K = 128,000 logits per row; measured at N = 32,768 and 128) for lines no finer on the page.
    trace_every: int = 5
    #: The controls besides plain vanilla: the paper's own a-priori recipe and progress matching.
    controls: tuple[str, ...] = ("m", "progress")
    #: Q_pos grid of the difference panel: from just above the start (0.63) to 0.99.
    diff_grid: tuple[float, ...] = tuple(np.round(np.arange(0.70, 0.991, 0.01), 3))
    #: Equal-progress thresholds of the tables (fgrpo_theory.fair.progress.DEFAULT_THRESHOLDS).
    thresholds: tuple[float, ...] = (0.9, 0.95, 0.98)
    q_tol: float = 2e-3  # progress-match tolerance on the median final Q_pos
    fast_n: tuple[int, ...] = (128, 8192)
    fast_seeds: int = 4
    fast_steps: int = 100


PARAMS = Params()


def _base_config(params: Params, N: int, fast: bool):
    from fgrpo_theory.sim import SimConfig, load_sweep

    sweep = load_sweep(params.config)
    sweep = {k: v for k, v in sweep.items() if not isinstance(v, list) or k == "pass_k"}
    subsets = dict(sweep.pop("subsets", {}))
    subsets["one"] = "1"  # one non-anchor correct action: exact NLL rise
    sweep.update(subsets=subsets, N=N, gamma=params.gamma, pass_k=[1])
    sweep.update(
        seeds=params.fast_seeds if fast else params.seeds,
        steps=params.fast_steps if fast else params.steps,
    )
    return SimConfig(**sweep)


def compute(params: Params = PARAMS, fast: bool = False) -> pd.DataFrame:
    """Long table with a ``table`` column: trace, curve, diff, threshold, search."""
    from fgrpo_theory.fair import paired_differences, run_arms

    frames = []
    grid_t = sorted(set(params.diff_grid) | set(params.thresholds))
    for N in params.fast_n if fast else params.n_values:
        cfg = _base_config(params, N, fast)
        # every trace_every-th step logged for the per-seed traces; the equal-progress metrics
        # come from the kernel's thresholds (the numbers fair.threshold_metrics gives on a log
        # of every step)
        res = run_arms(
            cfg, params.controls, seeds=cfg.seeds, log_every=params.trace_every,
            q_tol=params.q_tol, thresholds=grid_t, tables=True,
        )  # fmt: skip
        log, table = res.log, res.thresholds
        trace = log[["arm", "N", "seed_index", "step", "q_pos", "m_ret", "lr"]].assign(
            table="trace"
        )
        grid = table[table["threshold"].isin(params.diff_grid)]
        curve = (
            grid[grid["reached"]]
            .groupby(["arm", "N", "threshold"])
            .agg(median=("m_ret", "median"), reached_seeds=("m_ret", "size"))
            .reset_index()
            .assign(table="curve")
        )
        diff = paired_differences(grid).assign(table="diff")
        keep = ["arm", "N", "gamma", "lr", "lr_multiplier", "seed_index", "threshold", "reached"]
        keep += ["step", "q_pos", "m_ret", *[c for c in table.columns if c.startswith("nll_")]]
        keep += [c for c in table.columns if c.startswith("mass_")]
        thr = table.loc[table["threshold"].isin(params.thresholds), keep]
        thr = thr.assign(table="threshold")
        last = log[log["step"] == log["step"].max()]
        fin = last[["arm", "seed_index", "q_pos", "m_ret"]].rename(
            columns={"q_pos": "final_q_pos", "m_ret": "final_m_ret"}
        )
        thr = thr.merge(fin, on=["arm", "seed_index"], how="left")
        pm = log.attrs["progress_match"]
        search = pd.DataFrame(
            [
                {
                    "table": "search",
                    "N": N,
                    "eval": i,
                    "lr": lr,
                    "median_final_q_pos": q,
                    "target": pm["target"],
                    "matched_lr": pm["lr"],
                    "achieved": pm["achieved"],
                    "q_tol": pm["q_tol"],
                    "matched": pm["matched"],
                    "monotone": pm["monotone"],
                }
                for i, (lr, q) in enumerate(pm["evaluations"])
            ]
        )
        frames += [trace, curve, diff, thr, search]
    df = pd.concat(frames, ignore_index=True)
    df["fast"] = fast
    df["steps"] = params.fast_steps if fast else params.steps
    return df


def plot(df: pd.DataFrame, params: Params = PARAMS) -> Figure:
    """Top: M_ret against Q_pos per N and arm; bottom: paired focal-minus-control differences."""
    from fgrpo_theory.plotting import DOUBLE_COLUMN, PALETTE, new_figure

    ns = sorted(df.loc[df["table"] == "trace", "N"].unique())
    fig = new_figure(DOUBLE_COLUMN, 4.6)
    axes = fig.subplots(2, len(ns), squeeze=False)
    color = {a: PALETTE[i] for i, a in enumerate(ARM_ORDER)}
    trace = df[df["table"] == "trace"]
    curve = df[df["table"] == "curve"]
    diff = df[df["table"] == "diff"]
    search = df[df["table"] == "search"]
    for j, N in enumerate(ns):
        ax = axes[0, j]
        for arm in ARM_ORDER:
            t = trace[(trace["N"] == N) & (trace["arm"] == arm)]
            for _, s in t.groupby("seed_index"):
                ax.plot(s["q_pos"], s["m_ret"], color=color[arm], lw=0.35, alpha=0.3)
            c = curve[(curve["N"] == N) & (curve["arm"] == arm)].sort_values("threshold")
            seeds = t["seed_index"].nunique()
            c = c[c["reached_seeds"] * 2 >= seeds]  # median only where most seeds got there
            lr = t["lr"].iloc[0] if len(t) else np.nan
            ax.plot(
                c["threshold"], c["median"], color=color[arm], lw=1.6, label=f"{arm} (lr {lr:.3g})"
            )
        ax.set_title(f"N = {int(N):,}")
        ax.set_xlabel(r"correct mass $Q_{pos}$")
        ax.set_ylim(-0.02, 1.05)
        ax.legend(fontsize=5, loc="lower left")
        s = search[search["N"] == N]
        if len(s):
            r = s.iloc[0]
            ax.text(
                0.02, 0.45,
                f"progress match: {r['achieved']:.4f} vs {r['target']:.4f}\n"
                f"(tol {r['q_tol']:g}, {len(s)} evals, monotone: {bool(r['monotone'])})",
                transform=ax.transAxes, ha="left", va="top", fontsize=5,
            )  # fmt: skip
        ax = axes[1, j]
        ax.axhline(0.0, color="0.5", lw=0.6)
        for arm in ARM_ORDER[2:] + ("vanilla",):
            if arm == "focal":
                continue
            d = diff[(diff["N"] == N) & (diff["control"] == arm)].sort_values("threshold")
            ax.plot(d["threshold"], d["estimate"], color=color[arm], lw=1.1, label=f"focal - {arm}")
            ax.fill_between(d["threshold"], d["lo"], d["hi"], color=color[arm], alpha=0.2, lw=0)
        ax.set_xlabel(r"$Q_{pos}$ threshold (first step reached)")
        ax.set_ylim(-1.05, 1.05)
        ax.legend(fontsize=5, loc="lower left")
    axes[0, 0].set_ylabel(r"retained positive mass $M_{ret}$")
    axes[1, 0].set_ylabel(r"$\Delta M_{ret}$ focal $-$ control")
    steps = int(df["steps"].iloc[0])
    seeds = int(trace["seed_index"].nunique())
    fig.suptitle(
        r"Focal ($\gamma$ = 1) against matched vanilla at equal progress (log-prob, Adam)",
        fontsize=8.5,
    )
    footnote(
        fig,
        f"Categorical simulation of {PAPER} appendix J (K = 128,000, log-prob surrogate, Adam, "
        f"lr 1e-2, {steps} steps, {seeds} seeds per arm, paired by seed through common random "
        f"numbers). Top: M_ret against Q_pos over training, every seed thin ({_every(params)}), "
        "thick = median over "
        "the seeds that reach each Q_pos (drawn where at least half do). Bottom: focal's median "
        "minus the control's of M_ret at the first step where Q_pos reaches the threshold "
        "(seeds where both arms reach it), band = 95% paired bootstrap interval. "
        "vanilla-m: lr x m_1 (appendix N); vanilla-progress: the lr whose median final Q_pos "
        "equals focal's.",
        width=170,
    )
    return fig


def _every(params: Params) -> str:
    """The traces' logging interval in words: "every step", "every 2nd step", "every 5th step"."""
    n = params.trace_every
    if n == 1:
        return "every step"
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"every {n}{suffix} step"
