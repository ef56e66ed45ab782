"""The arena: every remedy against GRPO progress-matched per draw, on populations.

The grid was fixed before any run (docs/arena.md, "Pre-registration", 2026-11-25): every arm of
:mod:`fgrpo_theory.population.arena` (focal, MaxRL, W-REINFORCE, PSR, NSR, PKPO, entropy, KL,
differential smoothing, unlikeliness, low learning rate, larger N at B x N = 256, dynamic
sampling) on shared logits under SGD and Adam, on the default and the headroom population, N = 8,
16 population draws x 4 seeds. Each arm is compared with GRPO at the learning-rate factor whose
median final train pass@1 over the seeds equals the arm's, matched on each draw
(:func:`fgrpo_theory.population.draws.compare_arms`). Arms a simulator does not accept yet are
listed in the table's ``missing`` rows with the reason.
Figure: columns = settings, rows = test pass@1, pass@256 and rare-NLL rise; one line per arm
(sorted as the table), arm minus matched GRPO: each draw's difference of medians (dots) and the
pooled difference of medians with its 95 % two-level paired interval (bar).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ._common import footnote

__all__ = [
    "TITLE", "IN_PAPER", "COST_SECONDS", "STORED", "Params", "PARAMS", "compute", "plot",
    "summary",
    "table", "markdown",
]  # fmt: skip

TITLE = "The arena: every remedy vs progress-matched GRPO over population draws"
IN_PAPER = False
COST_SECONDS = 900  # the budget on an idle 2-core machine (benchmarks/bench_arena.py)
#: the full table is committed (experiments/stored/arena_population.parquet)
STORED = True

#: worker processes (the rows do not depend on it, so it is not a parameter)
WORKERS = 2
#: pass@k in points
SCALE = {"pass_at_1": 100.0, "pass_at_16": 100.0, "pass_at_256": 100.0}
#: colours (Okabe-Ito): the interval lies above 0, below 0, or contains it (the caption names them)
ABOVE, BELOW, NEITHER = "#D55E00", "#0072B2", "0.3"
#: reported metrics (test prompts, at equal train pass@1)
METRICS = (
    "pass_at_1", "pass_at_16", "pass_at_256", "coverage_at_256", "rare_nll_rise", "entropy",
)  # fmt: skip


@dataclass(frozen=True)
class Params:
    settings: tuple[str, ...] = (
        "shared-sgd", "shared-adam", "headroom-shared-sgd", "headroom-shared-adam",
    )  # fmt: skip
    population_seeds: tuple[int, ...] = tuple(range(16))
    seeds: int = 4
    steps: int = 300
    N: int = 8
    compute_budget: int = 256  # B x N of the larger-N arms (= the presets' 32 x 8)
    tol: float = 5e-4
    max_evals: int = 8


PARAMS = Params()


def _bases(params: Params, fast: bool):
    from fgrpo_theory.population.presets import preset

    settings = params.settings[:1] if fast else params.settings
    kw = dict(seeds=2, steps=20) if fast else dict(seeds=params.seeds, steps=params.steps)
    return {s: preset(s, N=params.N, **kw) for s in settings}


def compute(params: Params = PARAMS, fast: bool = False) -> pd.DataFrame:
    """Per (setting, draw, arm, role, seed, split) last-step metrics, plus ``missing`` rows."""
    from fgrpo_theory.population.arena import arena_arms, missing_reason, population_arms
    from fgrpo_theory.population.draws import compare_arms_task, map_configs

    draws = params.population_seeds[:2] if fast else params.population_seeds
    arms = arena_arms()
    if fast:  # one coefficient per remedy
        arms = [a for i, a in enumerate(arms) if a.family not in {b.family for b in arms[:i]}]
    tasks, labels, missing = [], [], []
    kw = dict(tol=params.tol, max_evals=params.max_evals, verbose=True)
    for name, base in _bases(params, fast).items():
        ok = []
        for a in arms:
            why = missing_reason(a, base, params.compute_budget)
            if why:
                missing.append(dict(table="missing", setting=name, arm=a.name, family=a.family,
                                    coef=a.coef, reason=why))  # fmt: skip
            else:
                ok.append(a)
        pop_arms = tuple(population_arms(ok, base, params.compute_budget))
        for d in draws:
            tasks.append((base.replace(population_seed=d), pop_arms, name))
            labels.append((name, d))
    # one pool over every (setting, draw); each task is deterministic, so the rows do not
    # depend on the number of workers
    results = map_configs(compare_arms_task, tasks, workers=1 if fast else WORKERS, kw=kw)
    out = [
        df.assign(table="runs", setting=lab[0], population_seed=lab[1])
        for lab, df in zip(labels, results, strict=True)
    ]
    return pd.concat([*out, pd.DataFrame(missing)], ignore_index=True)


def summary(df: pd.DataFrame) -> pd.DataFrame:
    """Arm minus matched GRPO per setting, arm and metric (test prompts; pass@k in points):
    :func:`~fgrpo_theory.fair.twolevel.summarize_arms` with a ``setting`` column."""
    from fgrpo_theory.fair.twolevel import summarize_arms

    runs = df[df["table"] == "runs"]
    out = []
    for s in dict.fromkeys(runs["setting"]):
        e = runs[runs["setting"] == s]
        out.append(summarize_arms(e, METRICS, split="test", scale=SCALE).assign(setting=s))
    return pd.concat(out, ignore_index=True)


def _cell(r) -> str:
    return f"{r['median']:+.2f} [{r.lo:+.2f}, {r.hi:+.2f}]"


def table(df: pd.DataFrame, s: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per arm: the pass@256 difference [95 % two-level interval] per setting, a mark
    where the test pass@1 interval lies below 0 ("costs pass@1"), sorted by the median over
    settings of the pass@256 difference (best first)."""
    s = summary(df) if s is None else s
    p256 = s[s.metric == "pass_at_256"]
    p1 = s[s.metric == "pass_at_1"].set_index(["setting", "arm"])
    rows = []
    for a in dict.fromkeys(p256["arm"]):
        e = p256[p256.arm == a]
        row = {"arm": a}
        costs = []
        for _, r in e.iterrows():
            q = p1.loc[(r.setting, a)]
            mark = " (-p1)" if q.hi < 0 else ""
            if q.hi < 0:
                costs.append(r.setting)
            row[r.setting] = _cell(r) + mark
        row["median_p256"] = float(e["median"].median())
        row["costs_pass@1_in"] = len(costs)
        rows.append(row)
    t = pd.DataFrame(rows).sort_values("median_p256", ascending=False, kind="stable")
    return t.reset_index(drop=True)


def markdown(df: pd.DataFrame) -> str:
    """The README table (pass@256 in points at equal train pass@1) and the missing arms."""
    t = table(df)
    settings = [c for c in t.columns if c not in ("arm", "median_p256", "costs_pass@1_in")]
    lines = ["| arm | " + " | ".join(settings) + " |", "|---" * (len(settings) + 1) + "|"]
    for _, r in t.iterrows():
        lines.append(f"| {r.arm} | " + " | ".join(str(r[c]) for c in settings) + " |")
    miss = df[df["table"] == "missing"]
    if len(miss):
        fam = miss.groupby("family")["reason"].first()
        lines.append("")
        lines.append("Missing arms: " + "; ".join(f"{f} ({r[:70]})" for f, r in fam.items()))
    return "\n".join(lines)


def plot(df: pd.DataFrame, params: Params = PARAMS) -> Figure:
    """Columns = settings, rows = metrics; arms sorted as :func:`table`."""
    s = summary(df)
    order = list(table(df, s)["arm"])[::-1]  # best at the top
    settings = list(dict.fromkeys(s["setting"]))
    rows = (("pass_at_1", "test pass@1 (points)"), ("pass_at_256", "test pass@256 (points)"),
            ("rare_nll_rise", "rare-NLL rise"))  # fmt: skip
    fig = Figure(figsize=(3.2 * len(settings) + 1.5, 0.16 * len(order) * len(rows) + 2.0))
    axes = fig.subplots(len(rows), len(settings), squeeze=False, sharey=True)
    y = {a: i for i, a in enumerate(order)}
    for j, st in enumerate(settings):
        for i, (m, lab) in enumerate(rows):
            ax = axes[i, j]
            e = s[(s.setting == st) & (s.metric == m)]
            for _, r in e.iterrows():
                yy = y[r.arm]
                colr = ABOVE if r.lo > 0 else (BELOW if r.hi < 0 else NEITHER)
                ax.plot(r.draw_diffs, np.full(len(r.draw_diffs), yy), ".", ms=2, color=colr,
                        alpha=0.45)  # fmt: skip
                ax.errorbar([r["median"]], [yy], xerr=[[r["median"] - r.lo], [r.hi - r["median"]]],
                            fmt="o", ms=3, color=colr, capsize=1.5, lw=0.8)  # fmt: skip
            ax.axvline(0.0, color="0.5", lw=0.6)
            ax.set_yticks(range(len(order)), order, fontsize=5)
            ax.tick_params(axis="x", labelsize=6)
            ax.set_xlabel(f"arm - matched GRPO: {lab}", fontsize=6)
            if i == 0:
                ax.set_title(st, fontsize=8)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    n_d = df.loc[df["table"] == "runs", "population_seed"].nunique()
    miss = sorted(set(df.loc[df["table"] == "missing", "family"].dropna()))
    note = (
        f"The arena: each arm minus GRPO progress-matched on train pass@1 on each of {n_d} "
        f"population draws x {params.seeds} seeds, N = {params.N}, {params.steps} steps; dots = "
        "each draw's difference of medians, bar = pooled difference of medians with its 95% "
        "two-level paired interval (draws, then seeds); vermillion (red-orange) = interval "
        "above 0, blue = below 0, grey = contains 0. "
        + (f"Not run (not in the simulators yet): {', '.join(miss)}." if miss else "")
    )
    footnote(fig, note, width=140)
    return fig
