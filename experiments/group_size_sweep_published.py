"""The published group-size sweep (Qwen2.5-7B, GRPO at N = 2..32, F-GRPO at N = 8) beside Lemma 3.1.

Panels: pass@1 and pass@256 (Math avg and OOD avg) against N, the rise in NLL of rare correct
base-model solutions against N, and the closed-form tail-miss probability Pr(B) against N for the
Fig. 1a parameters (mu = 0.3, rho in {0.05, 0.1, 0.2}). The paper draws this comparison in words:
pass@256 and rare-solution retention are worst at an intermediate N, as Pr(B) peaks at an
intermediate N. The closed-form curves are illustrative (mu, rho are not fitted to the LLM runs).
Sources: arXiv 2602.06717, Table 1 (N = 8 rows), Table 10 (the sweep) and the sweep's NLL numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ._common import PAPER, footnote, published_tables, rare_solution_nll
from ._tables import tail_miss_table

__all__ = ["TITLE", "IN_PAPER", "COST_SECONDS", "Params", "PARAMS", "compute", "plot"]

TITLE = "Published group-size sweep beside the closed-form tail miss"
IN_PAPER = False
COST_SECONDS = 2.0  # estimated, full settings, 2 cores


@dataclass(frozen=True)
class Params:
    model: str = "Qwen2.5-7B"
    benchmarks: tuple[str, ...] = ("Math avg", "OOD avg")
    group_sizes: tuple[int, ...] = (2, 4, 8, 16, 32)
    mu: float = 0.3
    rho: tuple[float, ...] = (0.05, 0.1, 0.2)
    n_max: int = 64


PARAMS = Params()


def compute(params: Params = PARAMS, fast: bool = False) -> pd.DataFrame:
    """Long table: ``quantity`` in {pass_at_1, pass_at_256, rare_nll, p_tail_miss}."""
    t = published_tables()
    t = t[
        (t["model"] == params.model)
        & t["benchmark"].isin(params.benchmarks)
        & t["group_size"].isin(params.group_sizes)
        & t["method"].isin(["GRPO", "F-GRPO"])
    ]
    frames = []
    for q in ("pass_at_1", "pass_at_256"):
        d = t[["table", "method", "group_size", "gamma", "benchmark", q]].rename(
            columns={q: "value", "group_size": "N"}
        )
        d["quantity"] = q
        frames.append(d)
    nll = rare_solution_nll()
    nll = nll[nll["model"] == params.model].rename(
        columns={"nll_increase": "value", "group_size": "N"}
    )
    nll = nll[["table", "method", "N", "gamma", "value"]].assign(
        benchmark="rare solutions", quantity="rare_nll"
    )
    frames.append(nll)
    pub = pd.concat(frames, ignore_index=True)
    pub["source"] = "published"
    pub["mu"] = np.nan
    pub["rho"] = np.nan
    tm = tail_miss_table((params.mu,), params.rho, np.arange(1, params.n_max + 1))
    tm = pd.DataFrame(
        {
            "table": "lemma_3_1",
            "method": "closed form",
            "N": tm["N"],
            "gamma": 0.0,
            "value": tm["p_tail_miss"],
            "benchmark": "",
            "quantity": "p_tail_miss",
            "source": "closed_form",
            "mu": tm["mu"],
            "rho": tm["rho"],
        }
    )
    df = pd.concat([pub, tm], ignore_index=True)
    df["N"] = df["N"].astype(np.int64)
    df["fast"] = fast
    return df.sort_values(["quantity", "benchmark", "method", "N", "rho"]).reset_index(drop=True)


def plot(df: pd.DataFrame, params: Params = PARAMS) -> Figure:
    """Four panels sharing a log2 N axis; F-GRPO at N = 8 drawn as a star."""
    from fgrpo_theory.plotting import DOUBLE_COLUMN, OKABE_ITO, PALETTE, new_figure

    fig = new_figure(DOUBLE_COLUMN, 2.3)
    axes = fig.subplots(1, 4)
    star = dict(marker="*", markersize=9, markeredgecolor="black", markeredgewidth=0.4, ls="none")
    panels = [
        ("pass_at_1", "(a) pass@1 (%)"),
        ("pass_at_256", "(b) pass@256 (%)"),
        ("rare_nll", "(c) rise in NLL of rare\nsolutions (lower = kept)"),
    ]
    for ax, (q, title) in zip(axes[:3], panels, strict=True):
        d = df[df["quantity"] == q]
        for k, (bench, db) in enumerate(d.groupby("benchmark", sort=True)):
            color = PALETTE[k] if q != "rare_nll" else OKABE_ITO["black"]
            g = db[db["method"] == "GRPO"].sort_values("N")
            f = db[db["method"] == "F-GRPO"]
            ax.plot(g["N"], g["value"], "-o", color=color, label=f"GRPO, {bench}")
            ax.plot(f["N"], f["value"], color=color, **star)
        ax.set_title(title)
        ax.set_xscale("log", base=2)
        ax.set_xticks(list(params.group_sizes), [str(n) for n in params.group_sizes])
        ax.set_xlabel("group size N")
        ax.margins(x=0.1, y=0.15)
        star_color = "0.5" if q != "rare_nll" else OKABE_ITO["black"]
        ax.plot([], [], color=star_color, **star, label=r"F-GRPO, N=8, $\gamma$=0.5")
        ax.legend(loc="best" if q != "rare_nll" else "lower center", fontsize=5.5)
    ax = axes[3]
    tm = df[df["quantity"] == "p_tail_miss"]
    for k, (rho, d) in enumerate(tm.groupby("rho", sort=True)):
        d = d.sort_values("N")
        ax.plot(d["N"], d["value"], color=PALETTE[k], label=rf"$\rho$ = {rho:g}")
        i = int(np.argmax(d["value"].to_numpy()))
        ax.plot([d["N"].iloc[i]], [d["value"].iloc[i]], color=PALETTE[k], **star)
    ax.set_xscale("log", base=2)
    ax.set_xlim(1.6, 40)
    ax.set_xticks(list(params.group_sizes), [str(n) for n in params.group_sizes])
    ax.set_ylim(0, None)
    ax.set_xlabel("group size N")
    ax.set_title(rf"(d) closed form Pr(B), $\mu$ = {params.mu:g}")
    ax.legend(loc="lower center", fontsize=5.5)
    footnote(
        fig,
        f"(a)-(c): published numbers for {params.model}, {PAPER}: GRPO at N = 2, 4, 16, 32 from "
        "Table 10, N = 8 and F-GRPO (star, N = 8, gamma = 0.5) from Table 1; (c) is the sweep's "
        "rare-solution NLL. (d): Lemma 3.1 with the Fig. 1a parameters, illustrative only (not "
        "fitted); stars at the integer argmax over N = 1..64.",
        width=170,
    )
    return fig
