"""The arena's single-prompt companion: M_ret at equal Q_pos for every arm.

Fig. 2's start state (``fig2-logprob-adam.toml``: K = 128,000, one anchor correct action at
logit 5, 9,999 other correct at 3, 118,000 incorrect at 0; Adam lr 0.01; rewards +1 / -1) with
the reference GRPO of Fig. 2 (``dr-grpo``, A = R - mean R), at N = 128 (1,500 steps) and 8,192
(600 steps), 8 seeds. Every remedy of :mod:`fgrpo_theory.population.arena` with a single-prompt
meaning (all but larger N at B x N fixed), at each of its three coefficients, runs on the same
seeds (common random numbers). Equal progress, without
a learning-rate search: the first step at which Q_pos reaches 0.8, 0.9 and 0.95 (the kernel's
exact per-step threshold tables); there the retained positive mass M_ret (P-26) of the arm minus
the reference's, per seed, where both reach it. theory.md section 15 predicts that X-only schemes
cannot change the within-prompt redistribution in expectation (so at large N their M_ret at equal
Q_pos equals the reference's), while entropy, KL, differential smoothing and unlikeliness can
(the prediction is for SGD; Fig. 2 runs Adam). Grid fixed before any run (docs/arena.md).
Figure: columns = N, rows = thresholds; one line per arm: each seed's difference (dots), the
median difference with its 95 % paired bootstrap interval (bar).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ._common import footnote
from ._sim import CONFIG_DIR

__all__ = [
    "TITLE", "IN_PAPER", "COST_SECONDS", "STORED", "Params", "PARAMS", "compute", "plot",
    "summary",
]  # fmt: skip

TITLE = "Arena companion: M_ret at equal Q_pos for every arm on one prompt (Fig. 2 start state)"
IN_PAPER = False
COST_SECONDS = 600  # 574 s CPU measured 2026-11-25 (one process per N): about 5 min on 2 idle cores
#: the full table is committed (experiments/stored/arena_companion.parquet)
STORED = True

#: the arms section 15 says can change the within-prompt redistribution (likelihood-aware
#: schemes and regularizers); every other arm is X-only
NOT_X_ONLY = ("entropy", "kl", "ds", "unlikeliness")
#: colours (Okabe-Ito blue and vermillion; the caption names them)
X_ONLY_COLOR, OTHER_COLOR = "#0072B2", "#D55E00"


@dataclass(frozen=True)
class Params:
    config: Path = CONFIG_DIR / "fig2-logprob-adam.toml"
    reference: str = "dr-grpo"
    n_values: tuple[int, ...] = (128, 8192)
    seeds: int = 8
    #: steps per N: 600 pre-registered; 1,500 at N = 128 (docs/arena.md, "Changes after
    #: pre-registration", 2026-11-25 05:55 UTC: the reference does not reach Q_pos 0.8 within 600
    #: steps there)
    steps: tuple[tuple[int, int], ...] = ((128, 1500), (8192, 600))
    #: the middle coefficient of each remedy only (the reduced run of 03:25 UTC); False = the
    #: pre-registered grid (every coefficient)
    middle_only: bool = False
    thresholds: tuple[float, ...] = (0.8, 0.9, 0.95)
    threads: int = 2  # Numba threads over seeds (results identical for any value)


PARAMS = Params()


def _steps(params: Params, N: int) -> int:
    """The horizon at group size N (``params.steps``)."""
    by_n = dict(params.steps)
    if N not in by_n:
        from fgrpo_theory._validate import fail

        fail("steps", params.steps, f"a horizon for every N of n_values (none for N = {N})")
    return int(by_n[N])


def _base(params: Params, N: int, fast: bool):
    from fgrpo_theory.sim import SimConfig, load_sweep

    sweep = load_sweep(params.config)
    sweep = {k: v for k, v in sweep.items() if not isinstance(v, list) or k == "pass_k"}
    subsets = dict(sweep.pop("subsets", {}))
    subsets["one"] = "1"
    sweep.pop("advantage", None)  # the reference enters through the scheme field
    steps = 20 if fast else _steps(params, N)
    sweep.update(subsets=subsets, N=N, gamma=0.0, scheme=params.reference, pass_k=[1],
                 seeds=2 if fast else params.seeds, steps=steps, log_every=steps,
                 thresholds=list(params.thresholds))  # fmt: skip
    return SimConfig(**sweep)


def compute(params: Params = PARAMS, fast: bool = False) -> pd.DataFrame:
    """Threshold rows (arm, N, seed, threshold, reached, step, q_pos, m_ret, ...) and
    ``missing`` rows (arms the single-prompt simulator does not accept yet, with the reason)."""
    from fgrpo_theory.population.arena import ArenaArm, arena_arms, missing_reason, sim_changes
    from fgrpo_theory.sim import simulate

    frames, missing = [], []
    keep = ["seed_index", "threshold", "reached", "step", "q_pos", "m_ret", "entropy",
            "nll_rise_one", "nll_rise_rare"]  # fmt: skip
    arms = [a for a in arena_arms() if not a.N]
    arms.insert(1, ArenaArm("grpo-std", scheme="grpo"))  # GRPO with std scaling: X-only too
    if fast:  # one coefficient per remedy
        arms = [a for i, a in enumerate(arms) if a.family not in {b.family for b in arms[:i]}]
    elif params.middle_only:  # the middle of each remedy's three coefficients
        fam = [a.family for a in arms]
        arms = [a for i, a in enumerate(arms) if fam.count(a.family) != 3
                or i == fam.index(a.family) + 1]  # fmt: skip
    for N in params.n_values[:1] if fast else params.n_values:
        base = _base(params, N, fast)
        for i, a in enumerate(arms):
            why = missing_reason(a, base)
            if why:
                missing.append(dict(table="missing", N=N, arm=a.name, family=a.family,
                                    coef=a.coef, reason=why))  # fmt: skip
                continue
            print(f"[arena_companion] N={N}: {a.name} ({i + 1}/{len(arms)})", file=sys.stderr,
                  flush=True)  # fmt: skip
            cfg = base.replace(**sim_changes(a, base))
            th = simulate(cfg, tables=True, threads=params.threads).thresholds
            frames.append(th[keep].assign(table="runs", N=N, arm=a.name, family=a.family,
                                          coef=a.coef))  # fmt: skip
    return pd.concat([*frames, pd.DataFrame(missing)], ignore_index=True)


def summary(df: pd.DataFrame) -> pd.DataFrame:
    """Arm minus reference of M_ret at each threshold, per N: the median over the seeds where
    both reach it, its 95 % paired bootstrap interval, the seeds reached; ``x_only``."""
    from fgrpo_theory.fair import paired_bootstrap_interval

    runs = df[df["table"] == "runs"]
    rows = []
    for (N, t), e in runs.groupby(["N", "threshold"], sort=True):
        ref = e[e.arm == "grpo"].set_index("seed_index")
        for a in dict.fromkeys(e["arm"]):
            if a == "grpo":
                continue
            x = e[e.arm == a].set_index("seed_index")
            both = x.index[(x.reached & ref.reached.reindex(x.index)).to_numpy(bool)]
            d = (x.m_ret.loc[both] - ref.m_ret.loc[both]).to_numpy()
            r = dict(N=N, threshold=t, arm=a, family=x.family.iloc[0], reached=len(both),
                     seeds=len(x), diffs=d,
                     x_only=x.family.iloc[0] not in NOT_X_ONLY)  # fmt: skip
            if len(both) >= 2:
                med, lo, hi = paired_bootstrap_interval(
                    x.m_ret.loc[both].to_numpy(), ref.m_ret.loc[both].to_numpy()
                )
            else:
                med = lo = hi = np.nan
            r.update(median=med, lo=lo, hi=hi, ref_m_ret=float(ref.m_ret.loc[both].median())
                     if len(both) else np.nan)  # fmt: skip
            rows.append(r)
    return pd.DataFrame(rows)


def plot(df: pd.DataFrame, params: Params = PARAMS) -> Figure:
    s = summary(df)
    Ns = sorted(s["N"].unique())
    ts = sorted(s["threshold"].unique())
    order = list(dict.fromkeys(s["arm"]))[::-1]
    y = {a: i for i, a in enumerate(order)}
    fig = Figure(figsize=(4.0 * len(Ns) + 1.5, 0.15 * len(order) * len(ts) + 2.0))
    axes = fig.subplots(len(ts), len(Ns), squeeze=False, sharey=True)
    for j, N in enumerate(Ns):
        for i, t in enumerate(ts):
            ax = axes[i, j]
            e = s[(s.N == N) & (s.threshold == t)]
            for _, r in e.iterrows():
                colr = X_ONLY_COLOR if r.x_only else OTHER_COLOR
                ax.plot(r.diffs, np.full(len(r.diffs), y[r.arm]), ".", ms=2, color=colr,
                        alpha=0.5)  # fmt: skip
                if np.isfinite(r["median"]):
                    ax.errorbar([r["median"]], [y[r.arm]],
                                xerr=[[r["median"] - r.lo], [r.hi - r["median"]]], fmt="o",
                                ms=3, color=colr, capsize=1.5, lw=0.8)  # fmt: skip
            ax.axvline(0.0, color="0.5", lw=0.6)
            ax.set_yticks(range(len(order)), order, fontsize=5)
            ax.tick_params(axis="x", labelsize=6)
            ax.set_xlabel(f"M_ret(arm) - M_ret(GRPO) at Q_pos = {t:g}", fontsize=6)
            if i == 0:
                ax.set_title(f"N = {N:,}", fontsize=8)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    miss = sorted(set(df.loc[df["table"] == "missing", "family"].dropna()))
    note = (
        "Fig. 2 start state (K = 128,000, Adam lr 0.01, GRPO = dr-grpo), "
        f"{params.seeds} seeds, steps "
        + ", ".join(f"{s:,} at N = {n:,}" for n, s in params.steps)
        + "; each arm's retained positive mass minus "
        "GRPO's at the first step Q_pos reaches the threshold, per seed (dots), median and 95% "
        "paired bootstrap interval (bar). Blue: X-only schemes (section 15: no change in "
        "expectation); vermillion (red-orange): likelihood-aware schemes and regularizers. "
        + (f"Not run (not in the simulator yet): {', '.join(miss)}." if miss else "")
    )
    footnote(fig, note, width=120)
    return fig
