"""Check rows, pass rules and Monte Carlo helpers of :mod:`fgrpo_theory.validation`."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

#: Largest |z| a Monte Carlo check may show and still pass.
Z_CRIT = 4.0

#: Base seed of every Monte Carlo check (each check derives its own stream from it).
BASE_SEED = 2602_06717


@dataclass(frozen=True)
class CheckRow:
    """One line of the validation table."""

    quantity: str
    parameters: str
    method: str
    closed_form: float
    estimate: float
    stderr: float
    z: float
    tolerance: float
    passed: bool


def _mc_row(quantity: str, parameters: str, closed: float, est: float, se: float) -> CheckRow:
    closed, est, se = float(closed), float(est), float(se)
    diff = est - closed
    if se > 0:
        z = diff / se
        passed = abs(z) <= Z_CRIT
    else:
        passed = abs(diff) <= 1e-12
        z = 0.0 if passed else math.copysign(1e9, diff)
    return CheckRow(quantity, parameters, "monte_carlo", closed, est, se, z, Z_CRIT, passed)


def _mc_prop_row(quantity: str, parameters: str, closed: float, est: float, reps: int) -> CheckRow:
    """Monte Carlo check of a probability: standard error of the proportion under the closed form,
    sqrt(p0 (1 - p0) / reps), so an event too rare to be seen still gets a finite z."""
    p0 = min(max(float(closed), 0.0), 1.0)
    return _mc_row(quantity, parameters, closed, est, math.sqrt(p0 * (1.0 - p0) / reps))


def _exact_row(
    quantity: str, parameters: str, method: str, closed: float, est: float, rtol: float
) -> CheckRow:
    closed, est = float(closed), float(est)
    tol = rtol * max(1.0, abs(closed))
    diff = est - closed
    passed = bool(np.isfinite(closed) and np.isfinite(est) and abs(diff) <= tol)
    if tol > 0:
        z = diff / tol
    else:  # exact equality required (integers)
        z = 0.0 if passed else math.copysign(1e9, diff)
    return CheckRow(quantity, parameters, method, closed, est, 0.0, z, tol, passed)


def _rng(*key: int) -> np.random.Generator:
    return np.random.default_rng([BASE_SEED, *key])


def _mean_se(x: np.ndarray) -> tuple[float, float]:
    x = np.asarray(x, dtype=float)
    return float(x.mean()), float(x.std(ddof=1) / math.sqrt(x.size))


# ----------------------------------------------------------------------------- Monte Carlo helpers


def monte_carlo_region_counts(
    N: int, probs: Any, reps: int, rng: np.random.Generator
) -> np.ndarray:
    """Counts of a group of N i.i.d. draws over disjoint regions with the given probabilities.

    Returns an int array of shape ``(reps, len(probs))`` (one multinomial draw per group).
    """
    p = np.asarray(probs, dtype=float)
    return rng.multinomial(int(N), p / p.sum(), size=int(reps))


def monte_carlo_tail_miss(
    N: int, mu: float, tau: float, reps: int, seed: int | tuple[int, ...] = 0
) -> dict[str, float]:
    """Monte Carlo estimates of Pr(active), Pr(hit E) and Pr(B) (Lemma 3.1) for one (N, mu, tau).

    Each group is a multinomial draw over the three disjoint regions E (mass tau), C \\ E
    (mu - tau) and the incorrect set (1 - mu); B = {0 < X < N and no draw in E}.

    Returns
    -------
    dict
        ``p_active, p_hit, p_tail_miss`` and their standard errors ``se_*`` (binomial).
    """
    key = seed if isinstance(seed, tuple) else (seed,)
    counts = monte_carlo_region_counts(N, [tau, mu - tau, 1.0 - mu], reps, _rng(*key))
    n_e, n_w = counts[:, 0], counts[:, 2]
    active = (n_w > 0) & (n_w < N)
    events = {"p_active": active, "p_hit": n_e > 0, "p_tail_miss": active & (n_e == 0)}
    out: dict[str, float] = {}
    for k, ev in events.items():
        p = float(ev.mean())
        out[k] = p
        out["se_" + k] = math.sqrt(p * (1.0 - p) / reps)
    return out
