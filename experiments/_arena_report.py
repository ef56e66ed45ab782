"""docs/arena.md's full tables from the arena's cached table (reporting only; the figure module
``arena_population`` does not import this, so editing it never invalidates the arena's cache)."""

from __future__ import annotations

import pandas as pd

from .arena_population import METRICS, _cell, summary, table

__all__ = ["full_markdown"]


def full_markdown(df: pd.DataFrame) -> str:
    """docs/arena.md's tables: per setting, one row per arm (sorted as :func:`table`), every
    metric's difference [95 % two-level interval], draws with a positive pass@256 difference,
    the matched factor range, bimodal draws."""
    s = summary(df)
    order = list(table(df, s)["arm"])
    runs = df[(df["table"] == "runs") & (df["role"] == "control") & (df["split"] == "train")]
    out = []
    for st in dict.fromkeys(s["setting"]):
        e = s[s.setting == st]
        c = runs[runs.setting == st]
        out.append(f"**{st}** (test prompts; arm minus progress-matched GRPO; pass@k in points)\n")
        out.append("| arm | pass@1 | pass@16 | pass@256 | coverage@256 | rare-NLL rise | entropy "
                   "| draws up (p@256) | GRPO factor | bimodal draws |")  # fmt: skip
        out.append("|---" * 10 + "|")
        for a in order:
            r = e[e.arm == a].set_index("metric")
            if len(r) == 0:
                continue
            f = c[c.arm == a].groupby("population_seed")["lr_factor"].first()
            cells = [_cell(r.loc[m]) for m in METRICS]
            p1 = r.loc["pass_at_1"]
            name = a + (" (-p1)" if p1.hi < 0 else "")
            out.append(f"| {name} | " + " | ".join(cells) + f" | {r.loc['pass_at_256'].draws_up}"
                       f"/{r.loc['pass_at_256'].draws} | {f.min():.3g}-{f.max():.3g} | "
                       f"{r.loc['pass_at_1'].bimodal_draws} |")  # fmt: skip
        out.append("")
    return "\n".join(out)
