"""Focal weighting on the single-solution sequence task, N = 4..32 (the paper's Table 4 analogue).

Settings fixed before any result (docs/sequence.md, 2026-11-25): the single-solution grid-route
task (one correct route per maze, L = 7, <= 10 walls) with 1,024 train and 64 held-out mazes and
an SFT of 1,000 steps (with the 64-maze preset the SFT model memorizes the train mazes: held-out
pass@1 0.023 on draw 0; with 1,024 it generalizes: 0.106); GRPO, focal gamma 0.5 and gamma 1 at
N = 4, 8, 16, 32, B = 8, 40 steps, AdamW lr 3e-4; 8 task draws x 2 seeds = 16 runs per arm (4
draws x 1 seed at first; 8 x 2 by the project's rule of at least 16 runs against a
progress-matched control, decided for the rule, not from results). Each arm is compared
with GRPO at the same N progress-matched on train pass@1 on each draw (ladder lr x 0.5, 1, 2,
interpolated; :func:`fgrpo_theory.sequence.study.match_controls`).
Figure: left, held-out pass@1 against N for GRPO and the two focal arms at lr x 1 (median over
draws x seeds with its 95 % two-level interval, the SFT start dashed); middle and right, focal
minus progress-matched GRPO in held-out pass@1 and pass@16 against N (every run, draw x seed, a
dot; the pooled difference of medians with its 95 % two-level paired interval).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ._common import footnote
from ._sequence import WORKERS, arm_summary, levels, single_base, smoke_base

__all__ = ["TITLE", "IN_PAPER", "COST_SECONDS", "STORED", "Params", "PARAMS", "compute", "plot",
           "summary", "levels_table"]  # fmt: skip

TITLE = "Sequence rung: focal vs progress-matched GRPO on single-solution mazes (Table 4 analogue)"
IN_PAPER = False
COST_SECONDS = 4800  # 8 draws x 2 seeds: 4x the 4 x 1 estimate (4 x 1 took 382 s on 27 Nov)
STORED = True

METRICS = ("pass_at_1", "pass_at_4", "pass_at_16", "pass_at_256", "entropy")
SCALE = {"pass_at_1": 100.0, "pass_at_4": 100.0, "pass_at_16": 100.0, "pass_at_256": 100.0}
#: (label, scheme spec) of the arms at every N
SCHEMES = (("grpo", "grpo"), ("focal 0.5", "grpo+focal:gamma=0.5"),
           ("focal 1", "grpo+focal:gamma=1"))  # fmt: skip


@dataclass(frozen=True)
class Params:
    Ns: tuple[int, ...] = (4, 8, 16, 32)
    draws: tuple[int, ...] = tuple(range(8))
    seeds: int = 2
    steps: int = 40
    ladder: tuple[float, ...] = (0.5, 1.0, 2.0)


PARAMS = Params()


def compute(params: Params = PARAMS, fast: bool = False) -> pd.DataFrame:
    """Last-step metrics per (draw, seed, arm or ladder rung, split) and the step-0 rows."""
    from fgrpo_theory.sequence.study import SeqArm, map_draws

    base = smoke_base("single") if fast else single_base(params.steps)
    Ns = params.Ns[:1] if fast else params.Ns
    arms = [SeqArm(f"{lab} N={n}", spec, 1.0, n, lab.split()[0], lab.partition(" ")[2] or "0")
            for n in Ns for lab, spec in SCHEMES]  # fmt: skip
    runs, _ = map_draws(base, params.draws[:2] if fast else params.draws, arms,
                        seeds=1 if fast else params.seeds, ladder=params.ladder,
                        workers=1 if fast else WORKERS)  # fmt: skip
    return runs


def summary(df: pd.DataFrame) -> pd.DataFrame:
    """Focal arm minus matched GRPO per arm and metric (held-out), with the arm's N."""
    s = arm_summary(df, METRICS, scale=SCALE)
    n = df[df.role == "arm"].groupby("arm")["N"].first()
    s.insert(1, "N", s["arm"].map(n).astype(int))
    return s[s.family != "grpo"].sort_values(["N", "arm", "metric"]).reset_index(drop=True)


def levels_table(df: pd.DataFrame) -> pd.DataFrame:
    """Median held-out and train metrics of each arm (lr x 1) with two-level intervals; the SFT
    start as arm ``start``."""
    d = df[df.role.isin(["arm", "start"])].assign(seed_index=lambda e: e.seed_index.clip(lower=0))
    return levels(d, "arm", METRICS)


def plot(df: pd.DataFrame, params: Params = PARAMS) -> Figure:
    from fgrpo_theory.plotting import color_cycle, new_figure

    s = summary(df)
    lv = levels_table(df)
    lv = lv[(lv.split == "test") & (lv.metric == "pass_at_1")]
    cols = dict(zip([lab for lab, _ in SCHEMES], color_cycle(3), strict=True))
    fig = new_figure(7.0, 2.7)
    ax0, ax1, ax2 = fig.subplots(1, 3)
    Ns = sorted(df.loc[df.role == "arm", "N"].unique())
    for k, (lab, _) in enumerate(SCHEMES):
        e = lv[lv.arm.isin([f"{lab} N={n}" for n in Ns])].copy()
        e["N"] = e.arm.str.extract(r"N=(\d+)")[0].astype(int)
        e = e.sort_values("N")
        x = e.N.to_numpy(float) * (1 + 0.06 * (k - 1))
        ax0.errorbar(x, 100 * e["median"], yerr=[100 * (e["median"] - e.lo),
                     100 * (e.hi - e["median"])], fmt="o-", ms=3, capsize=2, lw=1,
                     color=cols[lab], label=lab)  # fmt: skip
    st = lv[lv.arm == "start"]
    if len(st):
        ax0.axhline(100 * float(st["median"].iloc[0]), color="0.4", ls="--", lw=0.8,
                    label="SFT start")  # fmt: skip
    ax0.set_ylabel("held-out pass@1 (points), lr x 1")
    ax0.legend(fontsize=5.5)
    for ax, m, lab in ((ax1, "pass_at_1", "pass@1"), (ax2, "pass_at_16", "pass@16")):
        for k, (name, _) in enumerate(SCHEMES[1:]):
            e = s[(s.metric == m) & s.arm.str.startswith(name + " N=")].sort_values("N")
            x = e.N.to_numpy(float) * (1 + 0.06 * (2 * k - 1))
            for xi, rd in zip(x, e.run_diffs, strict=True):  # runs on the bar's outer side
                ax.plot(np.full(len(rd), xi * (1 + 0.03 * (2 * k - 1))), rd, ".", ms=3,
                        color=cols[name], alpha=0.5, mec="none")  # fmt: skip
            ax.errorbar(x, e["median"], yerr=[e["median"] - e.lo, e.hi - e["median"]], fmt="o",
                        ms=3.5, capsize=2, lw=1, color=cols[name],
                        label=f"{name} - matched GRPO")  # fmt: skip
        ax.axhline(0.0, color="0.5", lw=0.6)
        ax.set_ylabel(f"held-out {lab}: focal - matched GRPO (points)")
        ax.legend(fontsize=5.5)
    for ax in (ax0, ax1, ax2):
        ax.set_xscale("log", base=2)
        ax.set_xticks(Ns, [str(n) for n in Ns])
        ax.set_xlabel("group size N")
    runs = df[df.role == "arm"]
    footnote(fig, (
        f"Sequence rung, single-solution grid mazes (one correct route, L = 7, 1,024 train / "
        f"64 held-out mazes, 16 of each evaluated per draw, SFT 1,000 steps), B = 8, "
        f"{params.steps} steps, AdamW lr 3e-4; "
        f"{runs.population_seed.nunique()} task draws x {runs.seed_index.nunique()} seed(s) = "
        f"{runs.groupby(['population_seed', 'seed_index']).ngroups} runs per arm. "
        "Left: median over draws x seeds with 95% two-level interval. Middle, right: focal minus "
        "GRPO progress-matched on train pass@1 per draw (ladder lr x "
        f"{', '.join(f'{f:g}' for f in params.ladder)}, interpolated); dots = runs (draw x seed), "
        "arm minus matched GRPO on the same draw and seed; bar = pooled difference of medians "
        "with its 95% two-level paired interval."), width=150)  # fmt: skip
    return fig
