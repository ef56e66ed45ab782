"""Change of softmax probabilities after a logit step: first order (P-18, P-19) and exact.

The public functions validate their inputs (finite probabilities >= 0 summing to 1 over the last
axis within :data:`PROB_SUM_TOL`, finite logit changes of the same shape, a boolean mask); the
engine of :mod:`fgrpo_theory.mass` calls the unchecked private kernels on its own atoms.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import expm1

from .._validate import check_array, fail
from ._checks import out

__all__ = [
    "PROB_SUM_TOL",
    "prob_change_first_order",
    "subset_change_first_order",
    "exact_prob_change",
    "exact_subset_change",
]

#: Largest accepted |sum(weights * probs) - 1| over the last axis (float32-rounded
#: probabilities still pass; the formulas assume the sum is 1).
PROB_SUM_TOL = 1e-6


# --------------------------------------------------------------------------------------------
# validation
# --------------------------------------------------------------------------------------------


def _check(
    probs: ArrayLike, dz: ArrayLike, mask: ArrayLike | None = None, weights: ArrayLike | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray]:
    p = check_array("probs", probs, lo=0.0)
    if p.ndim == 0:
        fail("probs", "a scalar", "an array of shape (..., K)")
    d = check_array("dz", dz)
    if d.shape != p.shape:
        fail("dz", f"an array of shape {d.shape}", f"of the shape of probs {p.shape}")
    w = np.ones_like(p)
    if weights is not None:
        w = check_array("weights", weights, lo=0.0)
        if w.shape != p.shape:
            fail("weights", f"an array of shape {w.shape}", f"of the shape of probs {p.shape}")
    total = np.sum(p * w, axis=-1)
    off = np.abs(total - 1.0) > PROB_SUM_TOL
    if off.any():
        fail(
            "probs",
            f"an array summing to {float(total[off].flat[0])!r}",
            f"probabilities summing to 1 over the last axis (within {PROB_SUM_TOL:g})",
        )
    m = None
    if mask is not None:
        m = np.asarray(mask)
        if m.dtype != bool:
            vals = check_array("mask", m, allow_empty=True)
            bad = (vals != 0) & (vals != 1)
            if bad.any():
                fail("mask", vals[bad].flat[0], "a mask of booleans or 0/1 values")
            m = vals.astype(bool)
        if m.shape != p.shape:
            fail("mask", f"an array of shape {m.shape}", f"of the shape of probs {p.shape}")
    return p, d, m, w


# --------------------------------------------------------------------------------------------
# unchecked kernels (the engine's atoms: probabilities with multiplicities ``w``)
# --------------------------------------------------------------------------------------------


def first_order_subset(p: np.ndarray, dz: np.ndarray, m: np.ndarray, w: np.ndarray) -> np.ndarray:
    """P-19 without checks."""
    pw = p * w
    pdz = pw * dz
    q_s = np.sum(np.where(m, pw, 0.0), axis=-1)
    return np.sum(np.where(m, pdz, 0.0), axis=-1) - q_s * np.sum(pdz, axis=-1)


def _exact_parts(
    p: np.ndarray, dz: np.ndarray, w: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """expm1(dz - m), W = sum w p expm1(dz - m) and w p, with a shift m only for large steps.

    With sum w p = 1, p'_i = p_i (1 + em_i) / (1 + W) for any shift m, so
    p'_i - p_i = p_i (em_i - W) / (1 + W): no cancellation for small steps (m = 0).
    """
    pw = p * w
    top = np.max(np.where(w > 0, dz, -np.inf), axis=-1, keepdims=True)
    shift = np.where(top > 1.0, top, 0.0)
    em = expm1(dz - shift)
    W = np.sum(pw * em, axis=-1, keepdims=True)
    return em, W, pw


def exact_probs(p: np.ndarray, dz: np.ndarray) -> np.ndarray:
    """Exact change of every probability without checks."""
    em, W, _ = _exact_parts(p, dz, np.ones_like(p))
    return p * (em - W) / (1.0 + W)


def exact_subset(p: np.ndarray, dz: np.ndarray, m: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Exact subset change without checks."""
    em, W, pw = _exact_parts(p, dz, w)
    q_s = np.sum(np.where(m, pw, 0.0), axis=-1)
    e_s = np.sum(np.where(m, pw * em, 0.0), axis=-1)
    W = W[..., 0]
    return (e_s - q_s * W) / (1.0 + W)


# --------------------------------------------------------------------------------------------
# public, validated
# --------------------------------------------------------------------------------------------


def prob_change_first_order(probs: ArrayLike, dz: ArrayLike) -> np.ndarray:
    """First-order change of every probability after a logit step ``dz`` (P-18).

    dp_i = p_i (dz_i - sum_j p_j dz_j)

    Parameters
    ----------
    probs : array_like, shape (..., K)
        Probabilities: finite, >= 0, summing to 1 over the last axis (within 1e-6).
    dz : array_like, shape (..., K)
        Finite logit change, same shape as ``probs``.

    Returns
    -------
    numpy.ndarray, shape (..., K)
    """
    p, d, _, _ = _check(probs, dz)
    return p * (d - np.sum(p * d, axis=-1, keepdims=True))


def subset_change_first_order(
    probs: ArrayLike, dz: ArrayLike, mask: ArrayLike, weights: ArrayLike | None = None
) -> float | np.ndarray:
    """First-order change of the mass of a subset S after a logit step ``dz`` (P-19).

    dQ_S = sum_{i in S} p_i dz_i - Q_S sum_j p_j dz_j

    Parameters
    ----------
    probs, dz : array_like, shape (..., K)
        Probabilities (``sum weights * probs = 1`` over the last axis) and logit change.
    mask : array_like of bool, shape (..., K)
        Membership of S.
    weights : array_like, shape (..., K), optional
        Number of actions each entry stands for (entries with equal p and dz merged); default 1.

    Returns
    -------
    float or numpy.ndarray, shape (...)
    """
    p, d, m, w = _check(probs, dz, mask, weights)
    return out(first_order_subset(p, d, m, w))


def exact_prob_change(probs: ArrayLike, dz: ArrayLike) -> np.ndarray:
    """Exact change of every probability, ``softmax(z + dz) - softmax(z)``, without cancellation.

    With W = sum_j p_j expm1(dz_j): p'_i - p_i = p_i (expm1(dz_i) - W) / (1 + W).

    Parameters
    ----------
    probs, dz : array_like, shape (..., K)
        Probabilities p = softmax(z) and logit change, as in :func:`prob_change_first_order`.

    Returns
    -------
    numpy.ndarray, shape (..., K)
    """
    p, d, _, _ = _check(probs, dz)
    return exact_probs(p, d)


def exact_subset_change(
    probs: ArrayLike, dz: ArrayLike, mask: ArrayLike, weights: ArrayLike | None = None
) -> float | np.ndarray:
    """Exact change of the mass of a subset S after the softmax is recomputed.

    dQ_S = (sum_S p expm1(dz) - Q_S W) / (1 + W),  W = sum_j p_j expm1(dz_j).

    Parameters
    ----------
    probs, dz, mask, weights
        As in :func:`subset_change_first_order`.

    Returns
    -------
    float or numpy.ndarray, shape (...)
    """
    p, d, m, w = _check(probs, dz, mask, weights)
    return out(exact_subset(p, d, m, w))
