"""Tidy-table companions of the closed forms: one DataFrame with exactly the CLI's columns.

Each ``*_table`` function is what the matching command prints (``miss-prob``, ``peak``, ``focal``,
``passk``), so a notebook needs no meshgrid::

    >>> from fgrpo_theory.tables import tail_miss_table
    >>> tail_miss_table([4, 8], 0.3, rho=0.05).shape
    (2, 7)

Inputs are scalars or 1-D lists. Without a pandas Series the rows are the grid (Cartesian product)
of the inputs, in the CLI's order (each function's docstring gives it, outermost first). If any
input is a pandas Series, the inputs are instead broadcast element by element (NumPy rules) and the
result keeps that Series' index, so a column of your own DataFrame gives one row per entry.

Errors are :class:`ValueError` naming the argument; ``names`` maps argument names to the names to
use in messages (the CLI passes its option names, e.g. ``{"mu": "--mu"}``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from ._validate import check_array, check_int_array, fail, format_value

__all__ = ["tail_miss_table", "peak_table", "focal_table", "passk_table", "MAX_TABLE_ROWS"]

#: Largest number of rows a table function builds (refused before computing).
MAX_TABLE_ROWS = 1_000_000


def _n(names: Mapping[str, str] | None, key: str) -> str:
    return (names or {}).get(key, key)


def _flat(name: str, x: Any) -> np.ndarray:
    """A scalar or 1-D input as a 1-D array (Series are handled by the caller)."""
    arr = np.asarray(x)
    if arr.ndim > 1:
        fail(name, f"an array of shape {arr.shape}", "a scalar or a 1-D list")
    return np.atleast_1d(arr)


def _index_of(*inputs: Any) -> pd.Index | None:
    """The index of the first pandas Series among ``inputs`` (``None`` if there is none)."""
    for x in inputs:
        if isinstance(x, pd.Series):
            return x.index
    return None


def _check_rows(name: str, value: Any, rows: int) -> None:
    if rows > MAX_TABLE_ROWS:
        fail(name, value, f"small enough for at most {MAX_TABLE_ROWS} rows ({rows} requested)")


def _combine(
    inputs: dict[str, Any], order: list[str], names: Mapping[str, str] | None
) -> tuple[dict[str, np.ndarray], pd.Index | None]:
    """Grid the inputs (``order``: outermost first) or, with a Series, broadcast them."""
    index = _index_of(*inputs.values())
    arrays = {
        k: np.asarray(v.to_numpy() if isinstance(v, pd.Series) else v) for k, v in inputs.items()
    }
    if index is not None:
        try:
            out = dict(zip(arrays, np.broadcast_arrays(*arrays.values()), strict=True))
        except ValueError:
            shapes = ", ".join(f"{_n(names, k)} {np.shape(v)}" for k, v in arrays.items())
            fail(_n(names, order[0]), shapes, "inputs of broadcastable shapes")
        flat = {k: np.ravel(v) for k, v in out.items()}
        if len(index) != len(next(iter(flat.values()))):
            fail(_n(names, order[0]), f"{len(index)} index entries", "one row per Series entry")
        return flat, index
    flat = {k: _flat(_n(names, k), v) for k, v in arrays.items()}
    rows = int(np.prod([flat[k].size for k in order], dtype=object))
    _check_rows(_n(names, order[-1]), f"{rows} combinations", rows)
    grids = np.meshgrid(*[flat[k] for k in order], indexing="ij")
    return {k: g.ravel() for k, g in zip(order, grids, strict=True)}, None


def _mu_rho_tau(mu: Any, rho: Any, tau: Any, names: Mapping[str, str] | None) -> tuple[str, Any]:
    if (rho is None) == (tau is None):
        both = f"{_n(names, 'rho')}/{_n(names, 'tau')}"
        fail(both, "both" if rho is not None else "neither", "given, exactly one of them")
    return ("rho", rho) if rho is not None else ("tau", tau)


def _validated_mu_tau(
    cols: dict[str, np.ndarray], which: str, names: Mapping[str, str] | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Checked (mu, tau, rho) columns; rho and tau are each named as the user gave them."""
    mu = check_array(_n(names, "mu"), cols["mu"], lo=0, hi=1, lo_open=True, hi_open=True)
    if which == "rho":
        rho = check_array(_n(names, "rho"), cols["rho"], lo=0, hi=1, lo_open=True, hi_open=True)
        tau = rho * mu
        bad = ~(tau > 0)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            fail(
                _n(names, "rho"),
                rho[i],
                f"such that tau = rho * mu > 0 in float64 (mu = {format_value(mu[i])})",
            )
    else:
        tau = check_array(_n(names, "tau"), cols["tau"], lo=0, lo_open=True)
        bad = tau >= mu
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            fail(_n(names, "tau"), tau[i], f"< {_n(names, 'mu')} (= {format_value(mu[i])})")
        rho = tau / mu
    return mu, tau, rho


def _given_active(n: np.ndarray, mu: np.ndarray, tau: np.ndarray) -> np.ndarray:
    """Pr(B | A_N), with 0 at N = 1 (no active group, and B is empty)."""
    from .tail_miss import tail_miss_probability_given_active

    out = tail_miss_probability_given_active(np.maximum(n, 2), mu, tau)
    return np.where(n >= 2, out, 0.0)


def tail_miss_table(
    N: Any,
    mu: Any,
    *,
    rho: Any = None,
    tau: Any = None,
    names: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    """Tail-miss probability of Lemma 3.1 with Pr(active) (P-7) and Pr(hit), as a table.

    Columns ``N, mu, tau, rho, p_active, p_tail_miss, p_tail_miss_given_active, p_hit`` (what
    ``miss-prob`` prints; the conditional column is Pr(B | A_N) of docs/theory.md section 12, the
    share of active groups that miss, what dynamic sampling trains on; no group of one is active,
    so it is 0 at N = 1, where B is empty too). Give
    exactly one of ``rho`` (rarity, tau = rho * mu) and ``tau`` (rare mass, < mu). Grid order:
    mu outermost, then rho/tau, then N.

    The formulas live in :mod:`fgrpo_theory.tail_miss` (:func:`active_probability`,
    :func:`tail_miss_probability`, :func:`hit_probability`).

    Examples
    --------
    >>> df = tail_miss_table([1, 2, 3], 0.5, rho=0.5)
    >>> df["p_tail_miss"].tolist()  # hand-computed: 0, 1/4, 18/64
    [0.0, 0.25, 0.28125]
    """
    from .tail_miss import active_probability, hit_probability, tail_miss_probability

    which, value = _mu_rho_tau(mu, rho, tau, names)
    cols, index = _combine({"mu": mu, which: value, "N": N}, ["mu", which, "N"], names)
    n = check_int_array(_n(names, "N"), cols["N"], lo=1)
    mu_c, tau_c, rho_c = _validated_mu_tau(cols, which, names)
    df = pd.DataFrame(
        {
            "N": n,
            "mu": mu_c,
            "tau": tau_c,
            "rho": rho_c,
            "p_active": active_probability(n, mu_c),
            "p_tail_miss": tail_miss_probability(n, mu_c, tau_c),
            "p_tail_miss_given_active": _given_active(n, mu_c, tau_c),
            "p_hit": hit_probability(n, tau_c),
        },
        index=index,
    )
    return df


def peak_table(
    mu: Any, *, rho: Any = None, tau: Any = None, names: Mapping[str, str] | None = None
) -> pd.DataFrame:
    """Group size N* maximizing the tail-miss probability (Lemma 3.1), as a table.

    Columns ``mu, tau, rho, n_star, n_star_continuous, p_peak`` (what ``peak`` prints), computed
    by :func:`fgrpo_theory.tail_miss.peak_group_size`. Grid order: mu outermost, then rho/tau.
    A peak beyond int64 is refused naming the argument the user gave (``rho`` or ``tau``).

    Examples
    --------
    >>> peak_table(0.3, rho=0.05)[["n_star", "p_peak"]].round(6).values.tolist()
    [[9.0, 0.832457]]
    """
    from .tail_miss import peak_group_size

    which, value = _mu_rho_tau(mu, rho, tau, names)
    cols, index = _combine({"mu": mu, which: value}, ["mu", which], names)
    mu_c, tau_c, rho_c = _validated_mu_tau(cols, which, names)
    try:
        res = peak_group_size(mu_c, tau_c)
    except ValueError as e:
        if which != "rho" or not str(e).startswith("tau "):
            raise
        i = int(np.argmin(tau_c))  # the peak grows as tau shrinks
        fail(
            _n(names, "rho"),
            rho_c[i],
            f"such that the peak group size is below 2**53 (tau = rho * mu = "
            f"{format_value(tau_c[i])} with mu = {format_value(mu_c[i])} is too small)",
        )
    return pd.DataFrame(
        {
            "mu": mu_c,
            "tau": tau_c,
            "rho": rho_c,
            "n_star": np.asarray(res.n_star, dtype=np.int64).reshape(-1),
            "n_star_continuous": np.asarray(res.n_star_continuous, dtype=float).reshape(-1),
            "p_peak": np.asarray(res.p_peak, dtype=float).reshape(-1),
        },
        index=index,
    )


def _binary_focal_advantages(
    X: np.ndarray, N: np.ndarray, gamma: np.ndarray, conv: Any, r_correct: float, r_incorrect: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(mu_hat, g, g*A+, g*A-) of binary groups, from :mod:`fgrpo_theory.advantages`.

    mu_hat = X/N (P-11), g from :func:`~fgrpo_theory.advantages.focal_weight` (P-12), the
    advantages from :func:`~fgrpo_theory.advantages.binary_advantages`; their product is P-13.
    (To be replaced by a closed-form binary focal-advantage function of ``advantages`` if one is
    added there, so that P-13 has one home.)
    """
    from .advantages import binary_advantages, focal_weight

    adv_pos, adv_neg = binary_advantages(X, N, conv, r_correct=r_correct, r_incorrect=r_incorrect)
    mu_hat = X / N
    g = np.asarray(focal_weight(mu_hat, gamma), dtype=float)
    return mu_hat, g, g * adv_pos + 0.0, g * adv_neg + 0.0


def focal_table(
    N: Any,
    gamma: Any,
    *,
    advantage: Any = "grpo",
    r_correct: float = 1.0,
    r_incorrect: float = -1.0,
    names: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    """Focal weight g (P-12) and focal advantages g*A (P-13) of binary groups, X = 0..N.

    Columns ``gamma, N, X, mu_hat, g, adv_pos, adv_neg`` (what ``focal`` prints): one row per
    gamma (outermost), group size N and number of correct rollouts X = 0..N. ``adv_pos`` /
    ``adv_neg`` are the focal-weighted advantages of a correct / incorrect rollout under
    ``advantage`` (a preset name or convention); a column for a rollout the group does not have
    is 0, never NaN. A pandas Series is not accepted here (each N expands to N + 1 rows).

    Examples
    --------
    >>> focal_table(2, 1.0)[["X", "g", "adv_pos", "adv_neg"]].values.tolist()
    [[0.0, 1.0, 0.0, 0.0], [1.0, 0.5, 0.5, -0.5], [2.0, 0.0, 0.0, 0.0]]
    """
    from ._validate import check_scalar
    from .advantages import get_convention

    ns = check_int_array(_n(names, "N"), _flat(_n(names, "N"), N), lo=1)
    gammas = check_array(_n(names, "gamma"), _flat(_n(names, "gamma"), gamma), lo=0)
    rc = check_scalar(_n(names, "r_correct"), r_correct)
    rw = check_scalar(_n(names, "r_incorrect"), r_incorrect)
    if not rc > rw:
        fail(_n(names, "r_correct"), rc, f"> {_n(names, 'r_incorrect')} = {format_value(rw)}")
    if not np.isfinite(rc - rw):
        fail(_n(names, "r_correct"), rc, "such that r_correct - r_incorrect is finite")
    try:
        conv = get_convention(advantage)
    except ValueError as e:
        prefix = "advantage must be"
        if not str(e).startswith(prefix):
            raise
        raise ValueError(f"{_n(names, 'advantage')} must be{str(e)[len(prefix) :]}") from None
    rows = len(gammas) * int(sum(int(k) + 1 for k in ns))
    _check_rows(
        _n(names, "N"), format_value(ns.tolist() if ns.size < 8 else f"{ns.size} values"), rows
    )
    if getattr(conv, "group_of_one", None) == "raise" and (ns == 1).any():
        fail(_n(names, "N"), 1, f">= 2 for advantage {conv.name!r} (it refuses groups of one)")
    n_col = np.concatenate([np.full(int(k) + 1, k, dtype=np.int64) for k in ns])
    x_col = np.concatenate([np.arange(int(k) + 1, dtype=np.int64) for k in ns])
    m = n_col.size
    g_col = np.repeat(gammas, m)
    n_all, x_all = np.tile(n_col, len(gammas)), np.tile(x_col, len(gammas))
    mu_hat, g, pos, neg = _binary_focal_advantages(x_all, n_all, g_col, conv, rc, rw)
    return pd.DataFrame(
        {
            "gamma": g_col,
            "N": n_all,
            "X": x_all,
            "mu_hat": mu_hat,
            "g": g,
            "adv_pos": pos,
            "adv_neg": neg,
        }
    )


def passk_table(n: Any, c: Any, k: Any, *, names: Mapping[str, str] | None = None) -> pd.DataFrame:
    """Unbiased pass@k estimate 1 - C(n-c, k)/C(n, k) (theory.md sec. 7), as a table.

    Columns ``n, c, k, pass_at_k`` (what ``passk`` prints). Grid order: n outermost, then c, then
    k; with a pandas Series the inputs broadcast element by element and its index is kept. Any
    n up to 2**53 costs O(1) per row (:func:`fgrpo_theory.passk.pass_at_k`).

    Examples
    --------
    >>> passk_table(4, 1, [1, 2])["pass_at_k"].tolist()
    [0.25, 0.5]
    """
    from .passk import pass_at_k

    cols, index = _combine({"n": n, "c": c, "k": k}, ["n", "c", "k"], names)
    n_c = check_int_array(_n(names, "n"), cols["n"], lo=1)
    c_c = check_int_array(_n(names, "c"), cols["c"], lo=0)
    k_c = check_int_array(_n(names, "k"), cols["k"], lo=1)
    for key, col in (("c", c_c), ("k", k_c)):
        bad = col > n_c
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            fail(_n(names, key), int(col[i]), f"<= n = {int(n_c[i])}")
    out = pass_at_k(n_c, c_c, k_c) if n_c.size else np.zeros(0)
    return pd.DataFrame(
        {"n": n_c, "c": c_c, "k": k_c, "pass_at_k": np.asarray(out, dtype=float).reshape(-1)},
        index=index,
    )
