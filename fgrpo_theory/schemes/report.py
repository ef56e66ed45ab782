"""Tidy tables of the schemes registry and of section 15's closed forms (what ``fgrpo-theory
scheme`` prints; docs/theory.md section 15)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .base import Scheme, _fmt, parse_scheme

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["scheme_catalog", "scheme_profile_table"]


def scheme_catalog() -> pd.DataFrame:
    """The registry, one row per entry in ``scheme list`` order: ``name, role, parameters``
    (``name=default (valid values)``, ``; ``-separated), ``binary`` (needs 0/1 correctness),
    ``table`` (has per-X tables, so section 15 applies), ``summary, paper``."""
    import pandas as pd

    from .catalog import SCHEMES

    rows = []
    for d in SCHEMES.values():
        params = "; ".join(f"{p.name}={_fmt(p.default)} ({p.requirement()})" for p in d.params)
        rows.append(
            {
                "name": d.name,
                "role": d.role,
                "parameters": params or "-",
                "binary": d.binary,
                "table": d.table is not None and not d.needs_logprobs,
                "summary": d.summary,
                "paper": d.paper,
            }
        )
    return pd.DataFrame(rows)


def scheme_profile_table(
    scheme: str | Scheme,
    N: int,
    mu: Any,
    r_correct: float = 1.0,
    r_incorrect: float = 0.0,
) -> pd.DataFrame:
    """One row per mu: ``scheme`` (canonical spec), ``N, mu, H`` (difficulty profile), ``F``
    (implied objective) and the pass@k weights ``c_1..c_N`` (the same in every row: they do not
    depend on mu). docs/theory.md section 15."""
    import pandas as pd

    from .theory import difficulty_profile, implied_objective, passk_weights

    s = parse_scheme(scheme)
    m = np.atleast_1d(np.asarray(mu, dtype=float)).ravel()
    H = np.atleast_1d(difficulty_profile(s, N, m, r_correct, r_incorrect))
    F = np.atleast_1d(implied_objective(s, N, m, r_correct, r_incorrect))
    c = passk_weights(s, N, r_correct, r_incorrect)
    df = pd.DataFrame({"scheme": s.spec, "N": int(N), "mu": m, "H": H, "F": F})
    for k in range(len(c)):
        df[f"c_{k + 1}"] = c[k]
    return df
