"""Group size on a population of prompts: GRPO at N = 2..32, F-GRPO at N = 8, matched control.

The model of :mod:`fgrpo_theory.population` on its default population (presets, chosen before
any result; reasons in :mod:`fgrpo_theory.population.presets` and docs/populations.md): GRPO at
N = 2, 4, 8, 16, 32, F-GRPO at N = 8 (gamma 0.5, 1) and two vanilla controls: at lr x c (c the
focal effective-lr multiplier on the train prompts, theory.md section 13: step-size matched a
priori) and progress matched (the factor whose median final train pass@1 equals focal's; the
fair one under Adam, which normalizes a constant loss factor away), under Adam and SGD, at
B = 32 and 8, at the shared (theta and phi trained) and fully tabular (theta frozen) ends.
Also the batch-gradient signal-to-noise ratio |E[g]|^2 / E[|g|^2] at the start against N.
Two-level: every setting runs on D = 16 draws of the default population (population
seeds 0-15, the declared distribution unchanged) x 4 training seeds per draw, the controls matched
per draw; summaries are medians over draws x seeds with 95 % two-level bootstrap intervals
(:func:`fgrpo_theory.fair.two_level_interval`; draws, then seeds) and every draw's median drawn.
Figure: rows = published Qwen2.5-7B sweep (Math avg), then shared/Adam (test prompts),
tabular/Adam (train prompts: held-out ones cannot move there), shared/SGD (test), all B = 32,
and shared/Adam compute-matched (B x N = 256, test; rows with ``B = -256`` in the table);
columns = pass@1, pass@256, rise of rare NLL against N,
focal starred, step-size control as a cross, progress control as a plus, bars = 95% two-level
intervals of the median, every draw's median a small dot; last row = focal (gamma 1) minus each
matched control, every draw's difference of medians a dot, the pooled difference of medians with
its 95% two-level paired interval.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ._common import PAPER, footnote, published_tables, rare_solution_nll

__all__ = ["TITLE", "IN_PAPER", "COST_SECONDS", "Params", "PARAMS", "compute", "plot"]

TITLE = "Populations: group-size sweep with shared vs tabular logits"
IN_PAPER = False
#: 16 draws x 4 seeds: 175-181 s measured 29 Nov 2026 in `make reproduce` (2 workers, empty
#: cache, 2 cores).
COST_SECONDS = 180.0

_METRICS = ["pass_at_1", "pass_at_256", "rare_nll_rise", "coverage_at_256", "active_frac"]
_KEEP = ["arm", "N", "gamma_arm", "lr_factor", "match_error", "seed_index", "split", "bucket"]
#: the matched vanilla controls: (arm, label, marker, colour)
_CONTROLS = (("control", "lr x c", "x", "C0"), ("control-progress", "progress-matched", "P", "C2"))


@dataclass(frozen=True)
class Params:
    sharings: tuple[str, ...] = ("shared", "tabular")
    optimizers: tuple[str, ...] = ("adam", "sgd")
    batch_sizes: tuple[int, ...] = (32, 8)
    Ns: tuple[int, ...] = (2, 4, 8, 16, 32)
    focal_N: int = 8
    gammas: tuple[float, ...] = (0.5, 1.0)
    #: training seeds per population draw, and the draws (D >= 16, S >= 4)
    seeds: int = 4
    population_seeds: tuple[int, ...] = tuple(range(16))
    snr_draws: int = 200
    compute_budget: int = 256  # rows with B = -256: compute-matched, B = 256 // N


PARAMS = Params()
#: worker processes over draws (the rows do not depend on it, so it is not a parameter)
WORKERS = 2


def compute(params: Params = PARAMS, fast: bool = False) -> pd.DataFrame:
    """Last-step metrics per (sharing, optimizer, B, arm, N, gamma, draw, seed, split, bucket);
    the start-state SNR per draw."""
    from fgrpo_theory.population.analysis import batch_gradient_snr, group_size_sweep
    from fgrpo_theory.population.draws import map_configs
    from fgrpo_theory.population.presets import preset

    draws = params.population_seeds[:2] if fast else params.population_seeds
    Ns = (2, params.focal_N, 32) if fast else params.Ns
    kw = dict(seeds=2, steps=30) if fast else dict(seeds=params.seeds)

    settings = []  # (base config, its columns), in the table's order
    for sh in params.sharings:
        for opt in params.optimizers if not fast else params.optimizers[:1]:
            for B in params.batch_sizes if not fast else params.batch_sizes[:1]:
                name = f"{sh}-{opt}" + ("" if B == 32 else f"-B{B}")
                settings.append((preset(name, **kw), dict(sharing=sh, optimizer=opt, B=B)))
    if not fast:  # compute-matched: B x N = compute_budget rollouts per step at every N
        for opt in params.optimizers:
            base = preset(f"shared-{opt}", **kw, compute_budget=params.compute_budget)
            settings.append((base, dict(sharing="shared", optimizer=opt,
                                        B=-params.compute_budget)))  # fmt: skip
    # every draw of every setting in one pool (as map_draws per setting would, row for row): the
    # workers start once, not once per setting, and idle only after the last task
    configs = [base.replace(population_seed=d) for base, _ in settings for d in draws]
    out = map_configs(group_size_sweep, configs, workers=1 if fast else WORKERS, Ns=Ns,
                      focal_N=params.focal_N, gammas=params.gammas)  # fmt: skip
    frames = []
    for i, (_, cols) in enumerate(settings):
        part = out[i * len(draws) : (i + 1) * len(draws)]
        df = pd.concat(
            [f.assign(population_seed=d) for d, f in zip(draws, part, strict=True)],
            ignore_index=True,
        )
        df = df[[*_KEEP, *_METRICS, "population_seed"]].rename(columns={"gamma_arm": "gamma"})
        frames.append(df.assign(**cols))
    for B in params.batch_sizes if not fast else params.batch_sizes[:1]:
        for n in params.Ns:
            for d in draws:
                snr = batch_gradient_snr(preset("shared-adam", N=n, B=B, population_seed=d),
                                         20 if fast else params.snr_draws)  # fmt: skip
                row = dict(arm="snr", N=n, gamma=0.0, sharing="start", optimizer="-", B=B,
                           population_seed=d)  # fmt: skip
                frames.append(pd.DataFrame([{**row, **{k: float(v) for k, v in snr.items()}}]))
    return pd.concat(frames, ignore_index=True)


def summary(df: pd.DataFrame) -> pd.DataFrame:
    """Median over draws x seeds of the metrics (bucket "all") per arm and split, with its 95 %
    two-level bootstrap interval (``_lo``, ``_hi``) and the per-draw medians (``_draws``)."""
    from fgrpo_theory.fair import metric_grid, two_level_interval

    d = df[(df["arm"] != "snr") & (df["bucket"] == "all")]
    keys = ["sharing", "optimizer", "B", "split", "arm", "N", "gamma"]
    rows = []
    for k, e in d.groupby(keys, sort=True):
        r = dict(zip(keys, k, strict=True))
        for m in ("pass_at_1", "pass_at_256", "rare_nll_rise"):
            g = metric_grid(e, m)
            if g.shape[0] >= 2:
                r[m], r[f"{m}_lo"], r[f"{m}_hi"] = two_level_interval(g, np.zeros_like(g))
            else:
                r[m] = r[f"{m}_lo"] = r[f"{m}_hi"] = float(np.median(g))
            r[f"{m}_draws"] = np.median(g, axis=1)
        rows.append(r)
    return pd.DataFrame(rows)


#: (sharing, optimizer, B, split) of the paired focal-minus-control comparisons
PAIRED = (("shared", "sgd", 32, "test"), ("shared", "sgd", 8, "test"),
          ("shared", "adam", 32, "test"), ("tabular", "sgd", 32, "train"),
          ("tabular", "adam", 32, "train"))  # fmt: skip
_PAIRED_METRICS = (("pass_at_1", 100.0), ("pass_at_256", 100.0), ("rare_nll_rise", 1.0))


def paired(df: pd.DataFrame, params: Params = PARAMS) -> pd.DataFrame:
    """Focal minus its matched control at ``focal_N``, per draw and pooled (two-level).

    One row per setting of :data:`PAIRED`, gamma, control and metric (pass@k in points):
    ``draw_diffs`` (each draw's difference of medians over its seeds, draw order), ``median``
    (difference of the pooled medians over draws x seeds) and its 95 % two-level paired
    bootstrap interval ``lo``, ``hi``; ``draws_up`` (draws with a positive difference);
    ``lr_factor`` (the control's factor, median over draws); the variance components of the
    per-seed difference (:func:`fgrpo_theory.population.draws.variance_components`); and
    ``bimodal_draws``: draws whose focal or control train pass@1 over seeds has Sarle's
    coefficient > 5/9 (a weak screen at 4 seeds).
    """
    from fgrpo_theory.fair.twolevel import (
        BIMODAL_THRESHOLD,
        bimodality_coefficient,
        metric_grid,
        per_draw_differences,
        two_level_interval,
    )
    from fgrpo_theory.population.draws import variance_components

    d = df[(df["arm"] != "snr") & (df["bucket"] == "all")]
    rows = []

    def bim(x):
        return len(x) >= 4 and bimodality_coefficient(x) > BIMODAL_THRESHOLD

    for sh, opt, B, split in PAIRED:
        e = d[(d.sharing == sh) & (d.optimizer == opt) & (d.B == B)]
        for g in params.gammas:
            f = e[(e.arm == "focal") & (e.gamma == g)]
            for arm, *_ in _CONTROLS:
                c = e[(e.arm == arm) & (e.gamma == g)]
                if len(f) == 0 or len(f) != len(c) or f.population_seed.nunique() < 2:
                    continue
                ft = metric_grid(f[f.split == "train"], "pass_at_1")
                ct = metric_grid(c[c.split == "train"], "pass_at_1")
                nb = int(sum(bim(ft[i]) or bim(ct[i]) for i in range(len(ft))))
                for m, scale in _PAIRED_METRICS:
                    a = metric_grid(f[f.split == split], m) * scale
                    b = metric_grid(c[c.split == split], m) * scale
                    med, lo, hi = two_level_interval(a, b)
                    dd = per_draw_differences(a, b)
                    vc = variance_components(a, b) if a.shape[1] >= 2 else {}
                    fac = c.groupby("population_seed")["lr_factor"].first()
                    rows.append(dict(sharing=sh, optimizer=opt, B=B, split=split, gamma=g,
                                     control=arm, lr_factor=float(fac.median()),
                                     lr_factor_min=float(fac.min()),
                                     lr_factor_max=float(fac.max()), metric=m,
                                     draws=a.shape[0], seeds=a.shape[1], median=med, lo=lo,
                                     hi=hi, draw_diffs=dd, draws_up=int((dd > 0).sum()),
                                     bimodal_draws=nb,
                                     var_between=vc.get("between", np.nan),
                                     var_within=vc.get("within", np.nan),
                                     share_between=vc.get("share_between", np.nan)))  # fmt: skip
    return pd.DataFrame(rows)


def plot(df: pd.DataFrame, params: Params = PARAMS) -> Figure:
    """Published sweep (top row) beside the model at three settings."""
    s = summary(df)
    # the tabular end moves no held-out prompt (theta frozen), so its row shows train prompts
    rows = [("shared", "adam", 32, "test"), ("tabular", "adam", 32, "train"),
            ("shared", "sgd", 32, "test"), ("shared", "adam", -256, "test")]  # fmt: skip
    rows = [r for r in rows if ((s.sharing == r[0]) & (s.optimizer == r[1]) & (s.B == r[2])).any()]
    pr = paired(df, params)
    n_rows = 1 + len(rows) + (1 if len(pr) else 0)
    fig = Figure(figsize=(10, 2.4 * n_rows))
    axes = fig.subplots(n_rows, 3, squeeze=False)
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
            for _, r in gr.iterrows():  # every draw's median
                ax.plot(np.full(len(r[f"{c}_draws"]), r.N), r[f"{c}_draws"], ".", ms=2,
                        color="0.55", zorder=1)  # fmt: skip
            err = [gr[c] - gr[f"{c}_lo"], gr[f"{c}_hi"] - gr[c]]
            ax.errorbar(gr.N, gr[c], err, fmt="o-", color="k", capsize=2)
            marks = (("focal", "*", "C3"),) + tuple((a, mk, c) for a, _, mk, c in _CONTROLS)
            for arm, mk, colr in marks:
                a = d[d.arm == arm]
                for k, (_, r) in enumerate(a.iterrows()):
                    x = r.N * (1.06 + 0.06 * k)
                    dr = r[f"{c}_draws"]
                    ax.plot(np.full(len(dr), x), dr, ".", ms=2, color=colr, alpha=0.5, zorder=1)
                    ax.errorbar([x], [r[c]], [[r[c] - r[f"{c}_lo"]], [r[f"{c}_hi"] - r[c]]],
                                fmt=mk, ms=10 if mk == "*" else 7, color=colr, capsize=2,
                                label=f"{arm} gamma={r.gamma:g}" if j == 0 else None)  # fmt: skip
            bs = f"B={B}" if B > 0 else f"BxN={-B}"
            ax.set_title(f"{sh}, {opt}, {bs}: {split} {c.replace('_', ' ')}", fontsize=9)
        if i == 1:  # one legend: the arms are the same in every row
            axes[i, 0].legend(fontsize=6)
    for ax in axes[: 1 + len(rows)].flat:
        ax.set_xscale("log", base=2)
        ax.set_xlabel("N", fontsize=8)
        ax.tick_params(labelsize=7)
    if len(pr):
        _plot_paired(axes[-1], pr)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    note = (
        f"Top: {PAPER}, Qwen2.5-7B math average and rare-solution NLL. Below: the population "
        f"model (not fitted), {df.population_seed.nunique()} population draws x "
        f"{params.seeds} seeds; dots = each draw's median, bars = 95% two-level intervals "
        f"(draws, then seeds); star = F-GRPO N={params.focal_N}, cross = vanilla at lr x c, "
        "plus = progress-matched vanilla (both matched per draw). Last row: focal (gamma 1) "
        "minus each control, each draw's difference of medians (dots), pooled difference of "
        "medians with its 95% two-level paired interval."
    )
    footnote(fig, note)
    return fig


def _plot_paired(axes, pr: pd.DataFrame) -> None:
    """Per-draw focal-minus-control differences at gamma = 1, one x position per setting and
    control (colour and marker of the control)."""
    style = {a: (lab, mk, c) for a, lab, mk, c in _CONTROLS}
    pr = pr[pr.gamma == 1.0]
    for j, (m, _) in enumerate(_PAIRED_METRICS):
        ax = axes[j]
        d = pr[pr.metric == m].reset_index(drop=True)
        for i, r in d.iterrows():
            _, mk, colr = style[r.control]
            ax.plot(np.full(len(r.draw_diffs), i), r.draw_diffs, ".", ms=3, color=colr, alpha=0.5)
            ax.errorbar([i + 0.25], [r["median"]], [[r["median"] - r.lo], [r.hi - r["median"]]],
                        fmt=mk, ms=5, color=colr, capsize=2)  # fmt: skip
        ax.axhline(0.0, color="0.5", lw=0.8)
        labels = [f"{r.sharing} {r.optimizer} B={r.B}\n{style[r.control][0]}"
                  for _, r in d.iterrows()]  # fmt: skip
        ax.set_xticks(range(len(d)), labels, fontsize=5, rotation=90)
        unit = " (points)" if m.startswith("pass") else ""
        ax.set_ylabel(f"focal - control{unit}", fontsize=7)
        ax.set_title(f"per draw, gamma = 1: {m.replace('_', ' ')}", fontsize=9)
        ax.tick_params(axis="y", labelsize=7)
