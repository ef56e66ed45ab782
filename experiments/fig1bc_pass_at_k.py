"""Fig. 1b, 1c: published pass@256 against pass@1 on AIME 2025 and IFEval (Qwen2.5-7B).

Data, not simulation: GRPO at N = 2, 8, 32 and F-GRPO at N = 8 from the paper's Table 1 (N = 8 rows,
``table=main_n8``) and Table 10 (``table=group_size_sweep``), arXiv 2602.06717, committed in
``experiments/data_published/paper_tables.csv``.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
from matplotlib.figure import Figure

from ._common import PAPER, footnote, published_tables

__all__ = ["TITLE", "IN_PAPER", "COST_SECONDS", "Params", "PARAMS", "compute", "plot"]

TITLE = "Fig. 1b,c: published pass@256 vs pass@1, AIME 2025 and IFEval"
IN_PAPER = True
COST_SECONDS = 1.0  # estimated, full settings, 2 cores


@dataclass(frozen=True)
class Params:
    model: str = "Qwen2.5-7B"
    benchmarks: tuple[str, ...] = ("AIME25", "IFEval")
    grpo_group_sizes: tuple[int, ...] = (2, 8, 32)
    focal_group_size: int = 8


PARAMS = Params()


def compute(params: Params = PARAMS, fast: bool = False) -> pd.DataFrame:
    """Rows of the published tables for the selected model, benchmarks and runs."""
    t = published_tables()
    t = t[(t["model"] == params.model) & t["benchmark"].isin(params.benchmarks)]
    grpo = (t["method"] == "GRPO") & t["group_size"].isin(params.grpo_group_sizes)
    focal = (t["method"] == "F-GRPO") & (t["group_size"] == params.focal_group_size)
    df = t[grpo | focal].sort_values(["benchmark", "method", "group_size"]).reset_index(drop=True)
    df["fast"] = fast
    return df


def plot(df: pd.DataFrame, params: Params = PARAMS) -> Figure:
    """Two panels (one per benchmark): GRPO path over N, F-GRPO at N = 8 as a star."""
    from fgrpo_theory.plotting import DOUBLE_COLUMN, OKABE_ITO, new_figure

    fig = new_figure(DOUBLE_COLUMN * 0.75, 2.4)
    axes = fig.subplots(1, len(params.benchmarks))
    names = {"AIME25": "AIME 2025", "IFEval": "IFEval"}
    for ax, (letter, bench) in zip(axes, zip("bc", params.benchmarks, strict=True), strict=True):
        d = df[df["benchmark"] == bench]
        g = d[d["method"] == "GRPO"].sort_values("group_size")
        f = d[d["method"] == "F-GRPO"]
        ax.plot(
            g["pass_at_1"],
            g["pass_at_256"],
            "-o",
            color=OKABE_ITO["blue"],
            alpha=0.8,
            lw=0.8,
            label="GRPO",
        )
        for _, r in g.iterrows():
            ax.annotate(
                f"N={r['group_size']}",
                (r["pass_at_1"], r["pass_at_256"]),
                textcoords="offset points",
                xytext=(5, -2),
                va="center",
                fontsize=6.5,
                color=OKABE_ITO["blue"],
            )
        for _, r in f.iterrows():
            ax.plot(
                [r["pass_at_1"]],
                [r["pass_at_256"]],
                marker="*",
                markersize=10,
                color=OKABE_ITO["vermillion"],
                markeredgecolor="black",
                markeredgewidth=0.4,
                linestyle="none",
                label=rf"F-GRPO, N={r['group_size']}, $\gamma$={r['gamma']:g}",
            )
        ax.set_xlabel("pass@1 (%)")
        ax.set_ylabel("pass@256 (%)")
        ax.set_title(f"({letter}) {names.get(bench, bench)}, {params.model}")
        ax.margins(0.18)
    axes[0].legend(loc="lower right")
    footnote(
        fig,
        f"Published numbers, not simulated: {PAPER}, Table 1 (N = 8, GRPO and F-GRPO) and "
        "Table 10 (GRPO at N = 2, 32); estimated from n = 1024 samples per problem.",
        width=120,
    )
    return fig
