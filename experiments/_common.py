"""Small helpers shared by the experiment modules (layout and data loading, no formulas)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

__all__ = ["PUBLISHED_DIR", "PAPER", "footnote", "published_tables", "rare_solution_nll"]

#: Committed published numbers (see data_published/SOURCE.md).
PUBLISHED_DIR = Path(__file__).resolve().parent / "data_published"

#: How figures cite the paper.
PAPER = "arXiv 2602.06717"


def footnote(fig: Figure, text: str, width: int = 95) -> None:
    """Write a small caption under the figure (kept inside the saved file by the tight bbox)."""
    wrapped = "\n".join(textwrap.wrap(" ".join(text.split()), width=width))
    fig.text(0.0, -0.01, wrapped, ha="left", va="top", fontsize=5.8, color="#333333")


def published_tables() -> pd.DataFrame:
    """The paper's Table 1 and Table 10 (percent), long format (data_published/paper_tables.csv)."""
    return pd.read_csv(PUBLISHED_DIR / "paper_tables.csv")


def rare_solution_nll() -> pd.DataFrame:
    """Rise in NLL of rare correct base-model solutions, Qwen2.5-7B group-size sweep."""
    return pd.read_csv(PUBLISHED_DIR / "rare_solution_nll.csv")
