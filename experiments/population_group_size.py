"""Group size on a population of prompts: GRPO at N = 2..32, F-GRPO at N = 8, matched control.

The model of :mod:`fgrpo_theory.population` on its default population (presets, chosen before
any result; reasons in :mod:`fgrpo_theory.population.presets` and docs/populations.md): GRPO at
N = 2, 4, 8, 16, 32, F-GRPO at N = 8 (gamma 0.5, 1) and the vanilla control at lr x c (c the
focal effective-lr multiplier on the train prompts, theory.md section 13), 8 seeds, under Adam and
SGD, at B = 32 and 8, at the shared (theta and phi trained) and fully tabular (theta frozen) ends.
Also the batch-gradient signal-to-noise ratio |E[g]|^2 / E[|g|^2] at the start against N.
Figure: rows = published Qwen2.5-7B sweep (Math avg), then shared/Adam (test prompts),
tabular/Adam (train prompts: held-out ones cannot move there), shared/SGD (test), all B = 32,
and shared/Adam compute-matched (B x N = 256, test; rows with ``B = -256`` in the table);
columns = pass@1, pass@256, rise of rare NLL against N,
focal starred, control as a cross, bars = 95% intervals over seeds (mean +- 1.96 s.e.).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ._common import PAPER, footnote, published_tables, rare_solution_nll

__all__ = ["TITLE", "IN_PAPER", "COST_SECONDS", "Params", "PARAMS", "compute", "plot"]

TITLE = "Populations: group-size sweep with shared vs tabular logits (issue 12)"
IN_PAPER = False
COST_SECONDS = 120  # measured 52 s on the loaded 2-core machine (load average ~17)

_METRICS = ["pass_at_1", "pass_at_256", "rare_nll_rise", "coverage_at_256", "active_frac"]


@dataclass(frozen=True)
class Params:
    sharings: tuple[str, ...] = ("shared", "tabular")
    optimizers: tuple[str, ...] = ("adam", "sgd")
    batch_sizes: tuple[int, ...] = (32, 8)
    Ns: tuple[int, ...] = (2, 4, 8, 16, 32)
    focal_N: int = 8
    gammas: tuple[float, ...] = (0.5, 1.0)
    seeds: int = 8
    snr_draws: int = 200
    compute_budget: int = 256  # rows with B = -256: compute-matched, B = 256 // N


PARAMS = Params()


def compute(params: Params = PARAMS, fast: bool = False) -> pd.DataFrame:
    """Last-step metrics per (sharing, optimizer, B, arm, N, gamma, seed, split, bucket); SNR."""
    from fgrpo_theory.population.analysis import batch_gradient_snr, group_size_sweep
    from fgrpo_theory.population.presets import preset

    frames = []
    for sh in params.sharings:
        for opt in params.optimizers if not fast else params.optimizers[:1]:
            for B in params.batch_sizes if not fast else params.batch_sizes[:1]:
                name = f"{sh}-{opt}" + ("" if B == 32 else f"-B{B}")
                kw = dict(seeds=2, steps=30) if fast else dict(seeds=params.seeds)
                base = preset(name, **kw)
                Ns = (2, params.focal_N, 32) if fast else params.Ns
                df = group_size_sweep(base, Ns, params.focal_N, params.gammas)
                keep = ["arm", "N", "gamma_arm", "lr_factor", "seed_index", "split", "bucket"]
                df = df[keep + _METRICS].rename(columns={"gamma_arm": "gamma"})
                frames.append(df.assign(sharing=sh, optimizer=opt, B=B))
    if not fast:  # compute-matched: B x N = compute_budget rollouts per step at every N
        for opt in params.optimizers:
            base = preset(f"shared-{opt}", seeds=params.seeds, compute_budget=params.compute_budget)
            df = group_size_sweep(base, params.Ns, params.focal_N, params.gammas)
            keep = ["arm", "N", "gamma_arm", "lr_factor", "seed_index", "split", "bucket"]
            df = df[keep + _METRICS].rename(columns={"gamma_arm": "gamma"})
            frames.append(df.assign(sharing="shared", optimizer=opt, B=-params.compute_budget))
    for B in params.batch_sizes if not fast else params.batch_sizes[:1]:
        for n in params.Ns:
            draws = 20 if fast else params.snr_draws
            snr = batch_gradient_snr(preset("shared-adam", N=n, B=B), draws)
            row = dict(arm="snr", N=n, gamma=0.0, sharing="start", optimizer="-", B=B)
            frames.append(pd.DataFrame([{**row, **{k: float(v) for k, v in snr.items()}}]))
    return pd.concat(frames, ignore_index=True)


def summary(df: pd.DataFrame) -> pd.DataFrame:
    """Mean, s.e. over seeds of the metrics (bucket "all") per arm and split."""
    d = df[(df["arm"] != "snr") & (df["bucket"] == "all")]
    keys = ["sharing", "optimizer", "B", "split", "arm", "N", "gamma"]
    g = d.groupby(keys)[["pass_at_1", "pass_at_256", "rare_nll_rise"]]
    m = g.mean()
    se = g.std() / np.sqrt(g.count())
    return m.join(se.add_suffix("_se")).reset_index()


def plot(df: pd.DataFrame, params: Params = PARAMS) -> Figure:
    """Published sweep (top row) beside the model at three settings."""
    s = summary(df)
    # the tabular end moves no held-out prompt (theta frozen), so its row shows train prompts
    rows = [("shared", "adam", 32, "test"), ("tabular", "adam", 32, "train"),
            ("shared", "sgd", 32, "test"), ("shared", "adam", -256, "test")]  # fmt: skip
    rows = [r for r in rows if ((s.sharing == r[0]) & (s.optimizer == r[1]) & (s.B == r[2])).any()]
    fig = Figure(figsize=(10, 2.4 * (1 + len(rows))))
    axes = fig.subplots(1 + len(rows), 3, squeeze=False)
    t = published_tables()
    t = t[(t.model == "Qwen2.5-7B") & (t.benchmark == "Math avg")]
    nll = rare_solution_nll()
    nll = nll[nll.model == "Qwen2.5-7B"]
    pub = [("pass_at_1", t), ("pass_at_256", t), ("nll_increase", nll)]
    for j, (col, tab) in enumerate(pub):
        ax = axes[0, j]
        gr = tab[(tab.method == "GRPO") & tab.group_size.isin(params.Ns)]
        gr = gr.groupby("group_size")[col].mean()
        ax.plot(gr.index, gr.values, "o-", color="k")
        fo = tab[(tab.method == "F-GRPO") & (tab.group_size == params.focal_N)]
        if len(fo):
            ax.plot([params.focal_N], [fo[col].iloc[0]], "*", ms=14, color="C3")
        ax.set_title(f"published: {col.replace('_', ' ')}", fontsize=9)
    cols = ["pass_at_1", "pass_at_256", "rare_nll_rise"]
    for i, (sh, opt, B, split) in enumerate(rows, start=1):
        d = s[(s.sharing == sh) & (s.optimizer == opt) & (s.B == B) & (s.split == split)]
        for j, c in enumerate(cols):
            ax = axes[i, j]
            gr = d[d.arm == "grpo"].sort_values("N")
            ax.errorbar(gr.N, gr[c], 1.96 * gr[f"{c}_se"], fmt="o-", color="k", capsize=2)
            for arm, mk, colr in (("focal", "*", "C3"), ("control", "x", "C0")):
                a = d[d.arm == arm]
                for k, (_, r) in enumerate(a.iterrows()):
                    ax.errorbar([r.N * (1.06 + 0.06 * k)], [r[c]], [1.96 * r[f"{c}_se"]],
                                fmt=mk, ms=10 if mk == "*" else 7, color=colr, capsize=2,
                                label=f"{arm} gamma={r.gamma:g}" if j == 0 else None)  # fmt: skip
            bs = f"B={B}" if B > 0 else f"BxN={-B}"
            ax.set_title(f"{sh}, {opt}, {bs}: {split} {c.replace('_', ' ')}", fontsize=9)
        axes[i, 0].legend(fontsize=6)
    for ax in axes.flat:
        ax.set_xscale("log", base=2)
        ax.set_xlabel("N", fontsize=8)
        ax.tick_params(labelsize=7)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    note = (
        f"Top: {PAPER}, Qwen2.5-7B math average and rare-solution NLL. Below: the population "
        "model (not fitted); star = F-GRPO N=8, cross = vanilla at lr x c."
    )
    footnote(fig, note)
    return fig
