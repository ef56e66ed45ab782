"""Tables shared between figures (computed by the library; no formulas here).

Until ``fgrpo_theory.tables.tail_miss_table`` is available, the tail-miss table that Fig. 1a,
Fig. 3, Fig. 5 and the published group-size sweep share lives here, once.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["tail_miss_table"]


def tail_miss_table(
    mu: tuple[float, ...], rho: tuple[float, ...], n: np.ndarray, fast: bool = False
) -> pd.DataFrame:
    """Tidy table with the columns of the ``miss-prob`` command over a (mu, rho, N) grid."""
    from fgrpo_theory.tail_miss import active_probability, hit_probability, tail_miss_probability

    frames = []
    for m in mu:
        for r in rho:
            tau = r * m
            frames.append(
                pd.DataFrame(
                    {
                        "N": n.astype(np.int64),
                        "mu": m,
                        "tau": tau,
                        "rho": r,
                        "p_active": active_probability(n, m),
                        "p_tail_miss": tail_miss_probability(n, m, tau),
                        "p_hit": hit_probability(n, tau),
                    }
                )
            )
    df = pd.concat(frames, ignore_index=True)
    df["fast"] = fast
    return df
