"""Theory checks at the sequence level: Lemma 3.1 frequencies and Prop. 3.2's unsampled mass.

Settings fixed before any result (docs/sequence.md, 2026-11-25): GRPO at N = 8, B = 8, 40 steps,
AdamW lr 3e-4 on the multi-solution task, 8 task draws x 2 seeds = 16 runs (1 seed at first; 2
by the project's rule of at least 16 runs, decided for the rule, not from results). For every
group the run trains on, the exact ``mu`` and ``tau`` of the policy that sampled it give Lemma
3.1's Pr(B) (active, no rare correct answer); the observed frequency of B is compared with the
mean Pr(B) (z from the standard error sqrt(sum p(1-p)) / n), per draw, per run (draw x seed),
per bin of ``mu`` and pooled. After the update the
same prompt's ``mu`` and the mass ``Q_u`` of the correct answers the group did not draw are
evaluated again: Prop. 3.2 says the unsampled correct mass shrinks while ``mu`` grows on
reward-positive groups of high-success prompts.
Figure: left, observed frequency of B against Lemma 3.1 per bin of mu (bars: 2 standard errors of
the lemma's prediction), the pooled z and the ranges of the per-draw and per-run z in the title;
right, share of active groups whose Q_u fell while mu rose, per bin of mu (95 % Wilson
interval), next to the share whose Q_u fell at all.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ._common import footnote
from ._sequence import WORKERS, multi_base, smoke_base

__all__ = ["TITLE", "IN_PAPER", "COST_SECONDS", "STORED", "Params", "PARAMS", "compute", "plot",
           "lemma_table", "prop32_table"]  # fmt: skip

TITLE = "Sequence rung: Lemma 3.1 frequencies and Prop. 3.2 with the transformer's own mu, tau"
IN_PAPER = False
COST_SECONDS = 1200  # 8 draws x 2 seeds: twice the 1-seed estimate (1 seed took 263 s on 27 Nov)
STORED = True

#: bins of mu before the update (right-open; the last includes 1)
MU_BINS = (0.0, 0.5, 0.8, 0.95, 1.0)


@dataclass(frozen=True)
class Params:
    draws: tuple[int, ...] = tuple(range(8))
    seeds: int = 2
    steps: int = 40
    N: int = 8


PARAMS = Params()


def compute(params: Params = PARAMS, fast: bool = False) -> pd.DataFrame:
    """One row per trained group (:func:`fgrpo_theory.sequence.study.train_run` with checks)."""
    from fgrpo_theory.sequence.study import SeqArm, map_draws

    base = smoke_base(N=params.N) if fast else multi_base(params.steps, params.N)
    draws = params.draws[:2] if fast else params.draws
    _, groups = map_draws(base, draws, [SeqArm("grpo")], seeds=1 if fast else params.seeds,
                          ladder=(), checks=True, workers=1 if fast else WORKERS)  # fmt: skip
    return groups.drop(columns=["arm"]).assign(N=base.rl.N)


def _bin(mu: pd.Series) -> pd.Series:
    b = np.digitize(mu.to_numpy(float), MU_BINS[1:-1])
    return pd.Series([f"[{MU_BINS[i]:g}, {MU_BINS[i + 1]:g}{']' if i == len(MU_BINS) - 2 else ')'}"
                      for i in b], index=mu.index)  # fmt: skip


def lemma_table(df: pd.DataFrame) -> pd.DataFrame:
    """Observed frequency of event B against Lemma 3.1 per draw, per run (draw x seed, key
    ``"draw/seed"``), per bin of mu and pooled."""
    from fgrpo_theory.sequence.theory import tail_miss_z

    g = df[df["has_rare"]].assign(bin=lambda d: _bin(d["mu"]))
    rows = []
    parts = [("draw", str(k), e) for k, e in g.groupby("population_seed")]
    parts += [("run", f"{d}/{s}", e) for (d, s), e in g.groupby(["population_seed", "seed_index"])]
    parts += [("mu bin", k, e) for k, e in g.groupby("bin")] + [("pooled", "all", g)]
    for kind, key, e in parts:
        p = e["p_lemma"].to_numpy(float)
        n, obs = len(e), int(e["event_b"].sum())
        rows.append(dict(level=kind, key=key, groups=n, observed=obs / n, predicted=p.mean(),
                         se=np.sqrt((p * (1 - p)).sum()) / n, z=tail_miss_z(obs, p),
                         mu=e["mu"].mean(), tau=e["tau"].mean()))  # fmt: skip
    return pd.DataFrame(rows)


def _wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return np.nan, np.nan
    p = k / n
    c = (p + z * z / (2 * n)) / (1 + z * z / n)
    h = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return c - h, c + h


def prop32_table(df: pd.DataFrame) -> pd.DataFrame:
    """Among active groups, per bin of mu before the update: the share whose unsampled correct
    mass Q_u fell while mu rose, and the share whose Q_u fell, with 95 % Wilson intervals."""
    a = df[(df["X"] > 0) & (df["X"] < df["N"]) & (df["q_u"] > 0)]
    a = a.assign(bin=_bin(a["mu"]))
    rows = []
    for key, e in list(a.groupby("bin")) + [("all", a)]:
        fell = e["q_u_after"] < e["q_u"]
        both = fell & (e["mu_after"] > e["mu"])
        n = len(e)
        lo, hi = _wilson(int(both.sum()), n)
        flo, fhi = _wilson(int(fell.sum()), n)
        rows.append(
            dict(
                bin=key,
                groups=n,
                share_qu_down_mu_up=both.mean(),
                lo=lo,
                hi=hi,
                share_qu_down=fell.mean(),
                lo_down=flo,
                hi_down=fhi,
                share_mu_up=(e["mu_after"] > e["mu"]).mean(),
                median_rel_dqu=float(np.median((e["q_u_after"] - e["q_u"]) / e["q_u"])),
            )
        )
    return pd.DataFrame(rows)


def plot(df: pd.DataFrame, params: Params = PARAMS) -> Figure:
    from fgrpo_theory.plotting import color_cycle, new_figure

    lem = lemma_table(df)
    pr = prop32_table(df)
    c = color_cycle(3)
    fig = new_figure(7.0, 2.9)
    ax1, ax2 = fig.subplots(1, 2)
    b = lem[lem.level == "mu bin"].reset_index(drop=True)
    x = np.arange(len(b))
    ax1.errorbar(x - 0.1, b.predicted, yerr=2 * b.se, fmt="s", color=c[0], ms=4, capsize=2,
                 label="Lemma 3.1 (mean Pr(B), +-2 SE)")  # fmt: skip
    ax1.plot(x + 0.1, b.observed, "o", color=c[1], ms=4, label="observed frequency")
    for i, r in b.iterrows():
        ax1.annotate(f"n={r.groups}", (i, 0), textcoords="offset points", xytext=(0, 2),
                     ha="center", fontsize=5)  # fmt: skip
    d = lem[lem.level == "draw"]
    r = lem[lem.level == "run"]
    pooled = lem[lem.level == "pooled"].iloc[0]
    ax1.set_xticks(x, b.key, fontsize=6)
    ax1.set_xlabel("mu of the sampling policy (bin)")
    ax1.set_ylabel("P(active and no rare correct answer)")
    ax1.set_ylim(0, max(0.05, float((b.predicted + 2 * b.se).max()) * 1.25))
    ax1.set_title(f"Lemma 3.1: pooled z = {pooled.z:+.2f}; per draw z {d.z.min():+.2f} to "
                  f"{d.z.max():+.2f}, per run {r.z.min():+.2f} to {r.z.max():+.2f}",
                  fontsize=7)  # fmt: skip
    ax1.legend(fontsize=5.5, loc="upper left")
    p = pr[pr["bin"] != "all"].reset_index(drop=True)
    x = np.arange(len(p))
    ax2.errorbar(x - 0.1, p.share_qu_down_mu_up, yerr=[p.share_qu_down_mu_up - p.lo,
                 p.hi - p.share_qu_down_mu_up], fmt="o", color=c[2], ms=4, capsize=2,
                 label="Q_u fell and mu rose")  # fmt: skip
    ax2.errorbar(x + 0.1, p.share_qu_down, yerr=[p.share_qu_down - p.lo_down,
                 p.hi_down - p.share_qu_down], fmt="^", color=c[0], ms=4, capsize=2,
                 label="Q_u fell")  # fmt: skip
    ax2.set_xticks(x, p["bin"], fontsize=6)
    ax2.set_ylim(0, 1.05)
    ax2.set_xlabel("mu before the update (bin)")
    ax2.set_ylabel("share of active groups")
    ax2.set_title("Prop. 3.2: unsampled correct mass Q_u over one update", fontsize=7)
    ax2.legend(fontsize=5.5, loc="lower left")
    footnote(fig, (
        f"Sequence rung, GRPO N = {params.N}, B = 8, {params.steps} steps, AdamW lr 3e-4, "
        f"multi-solution grid routes (L = 7), {len(d)} task draws x {df.seed_index.nunique()} "
        f"seed(s) = {df.groupby(['population_seed', 'seed_index']).ngroups} runs; every "
        "trained group, mu and tau exact (prefix-tree walk) at the policy that sampled it; "
        "Q_u = mass of the correct answers the group did not draw, before and after its update "
        "(the batch's other 7 prompts update the shared weights too). Intervals: 2 SE of the "
        "lemma (left), 95% Wilson (right)."), width=150)  # fmt: skip
    return fig
