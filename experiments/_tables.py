"""Tables shared between figures: thin adapters over the library (no formulas here).

Fig. 1a, Fig. 3, Fig. 5 and the published group-size sweep share one tail-miss table, built by
:func:`fgrpo_theory.tables.tail_miss_table` (the ``miss-prob`` command's table), so the figure cache
key (the import closure of the figure's module) covers the library code that computes it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["tail_miss_table"]


def tail_miss_table(
    mu: tuple[float, ...], rho: tuple[float, ...], n: np.ndarray, fast: bool = False
) -> pd.DataFrame:
    """The ``miss-prob`` table over a (mu, rho, N) grid (mu outermost, then rho, then N)."""
    from fgrpo_theory.tables import tail_miss_table as table

    df = table(np.asarray(n, dtype=np.int64), list(mu), rho=list(rho))
    df["fast"] = fast
    return df.reset_index(drop=True)
