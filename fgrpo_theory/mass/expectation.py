"""Expectation of any one-step quantity over the group draw: enumeration or Monte Carlo.

:func:`expected_change` averages any per-group quantity of :data:`QUANTITIES` (first-order and
exact changes, statistics) or any function of the exact post-update probabilities, by exact
enumeration of all C(N+K-1, N) multinomial group outcomes when there are few
(:func:`count_outcomes`, :func:`log_count_outcomes`), or by Monte Carlo with a standard error
otherwise. Work is bounded before it starts: at most :data:`MAX_ENUMERATION` enumerated outcomes
and at most :data:`MAX_MONTE_CARLO_DRAWS` Monte Carlo draws (samples x N).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import betaln, gammaln, log1p, log_softmax, softmax

from .._validate import check_int_array, check_seed, fail
from ..advantages import AdvantageConvention
from ..policy import check_policy
from ._checks import check_N
from ._engine import BLOCK, evaluate, levels
from .groups import draw
from .softmax import exact_probs
from .step import QUANTITIES, StepSpec

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "MAX_ENUMERATION",
    "MAX_MONTE_CARLO_DRAWS",
    "MAX_OUTCOME_DIGITS",
    "count_outcomes",
    "log_count_outcomes",
    "ExpectationResult",
    "resolve_method",
    "expected_change",
]

#: Largest number of outcomes ``method="enumerate"`` accepts (a few seconds to a minute).
MAX_ENUMERATION = 5_000_000

#: Largest number of Monte Carlo draws (``samples * N``) :func:`expected_change` accepts. One draw
#: costs about 200-500 ns (the paper's 128,000-action policy, N from 8 to 131,072), so the bound
#: is about 10 to 20 minutes of work; memory stays bounded (blocks of about 10**6 elements).
MAX_MONTE_CARLO_DRAWS = 2**31

#: Largest number of decimal digits of an exact :func:`count_outcomes` (computing a larger binomial
#: coefficient exactly takes long; use :func:`log_count_outcomes`).
MAX_OUTCOME_DIGITS = 100_000

_LOG_COUNT_TERMS = 1_000_000  # log_count_outcomes sums at most this many logarithms


def _check_count_args(K: Any, N: Any) -> tuple[int, int]:
    out = []
    for name, v in (("K", K), ("N", N)):
        if v is None or isinstance(v, (bool, str)):
            fail(name, v, "a single integer >= 1")
        arr = check_int_array(name, v, lo=1)
        if arr.ndim != 0:
            fail(name, f"an array of shape {arr.shape}", "a single integer >= 1")
        out.append(int(arr))
    return out[0], out[1]


def log_count_outcomes(K: int, N: int) -> float:
    """Natural log of the number of group outcomes, ln C(N+K-1, N) (float, any size).

    Relative accuracy about 1e-13 when min(N, K - 1) <= 10**6 (an exact sum of logarithms,
    free of the cancellation of ``gammaln(N+K) - gammaln(N+1) - gammaln(K)``), about 1e-10
    beyond (``scipy.special.betaln``).

    Parameters
    ----------
    K : int
        Number of actions, 1 <= K <= 2**53.
    N : int
        Group size, 1 <= N <= 2**53.
    """
    K, N = _check_count_args(K, N)
    m = min(N, K - 1)  # C(N+K-1, N) = C(N+K-1, m)
    if m == 0:
        return 0.0
    big = max(N, K - 1)
    if m <= _LOG_COUNT_TERMS:  # ln C = sum_{i<=m} log1p(big / i): no cancellation
        i = np.arange(1, m + 1, dtype=float)
        return float(np.sum(log1p(big / i)))
    return float(-np.log(float(N + K)) - betaln(float(N + 1), float(K)))


def count_outcomes(K: int, N: int) -> int:
    """Number of distinct group outcomes (multisets of N draws from K actions): C(N+K-1, N).

    Parameters
    ----------
    K : int
        Number of actions >= 1.
    N : int
        Group size >= 1.

    Returns
    -------
    int
        Exact. Refused (ValueError) when it has more than :data:`MAX_OUTCOME_DIGITS` decimal
        digits; :func:`log_count_outcomes` gives its logarithm for any size.
    """
    log_count = log_count_outcomes(K, N)
    K, N = int(K), int(N)
    if log_count / math.log(10) > MAX_OUTCOME_DIGITS:
        fail(
            "N",
            N,
            f"such that C(N+K-1, N) has at most {MAX_OUTCOME_DIGITS} digits (K = {K}: about "
            f"10^{log_count / math.log(10):.4g}); use log_count_outcomes",
        )
    return math.comb(N + K - 1, N)


@dataclass(frozen=True)
class ExpectationResult:
    """Expected values of one-step quantities over the group draw.

    Attributes
    ----------
    method : {"enumeration", "monte-carlo"}
        How the expectation was computed.
    n_outcomes : int or None
        Number of enumerated group outcomes (enumeration).
    n_samples : int or None
        Number of sampled groups (Monte Carlo).
    mean, stderr : dict[str, float]
        Expected value and its standard error (0 for enumeration) per quantity.
    """

    method: str
    n_outcomes: int | None
    n_samples: int | None
    mean: dict[str, float]
    stderr: dict[str, float]

    def __getitem__(self, name: str) -> float:
        return self.mean[name]

    def to_frame(self) -> pd.DataFrame:
        """DataFrame with one row per quantity: quantity, mean, stderr, method, n."""
        import pandas as pd

        n = self.n_outcomes if self.method == "enumeration" else self.n_samples
        return pd.DataFrame(
            {
                "quantity": list(self.mean),
                "mean": list(self.mean.values()),
                "stderr": [self.stderr[k] for k in self.mean],
                "method": self.method,
                "n": n,
            }
        )


def _quantity_names(quantities: Sequence[str | Callable[[np.ndarray], float]]) -> list[str]:
    names = []
    for i, q in enumerate(quantities):
        if callable(q):
            names.append(getattr(q, "__name__", f"quantity_{i}"))
        elif q in QUANTITIES:
            names.append(q)
        else:
            fail("quantities", q, "names from QUANTITIES or callables of the new probabilities")
    if len(set(names)) != len(names):
        fail("quantities", ",".join(names), "a list without repeated names")
    return names


def _compositions(K: int, N: int, rows: int) -> Iterator[np.ndarray]:
    """All compositions of N into K non-negative parts, as (rows, K) blocks (stars and bars)."""
    bars = itertools.combinations(range(N + K - 1), K - 1)
    while True:
        block = list(itertools.islice(bars, rows))
        if not block:
            return
        b = np.asarray(block, dtype=np.int64).reshape(len(block), K - 1)
        edges = np.concatenate(
            [np.full((len(block), 1), -1), b, np.full((len(block), 1), N + K - 1)], axis=1
        )
        yield np.diff(edges, axis=1) - 1


def resolve_method(K: int, N: int, method: str, samples: int, max_outcomes: int = 20_000) -> str:
    """Check the work of an expectation and return "enumerate" or "monte-carlo".

    "auto" enumerates when there are at most ``max_outcomes`` outcomes. Refused before any work:
    enumeration of more than :data:`MAX_ENUMERATION` outcomes (names ``method``) and Monte Carlo
    with ``samples * N`` above :data:`MAX_MONTE_CARLO_DRAWS` (names ``samples``).
    """
    if method not in ("auto", "enumerate", "monte-carlo"):
        fail("method", method, "one of 'auto', 'enumerate', 'monte-carlo'")
    log_count = log_count_outcomes(K, N)
    if method == "auto":
        small = log_count <= math.log(max_outcomes) + 1e-9
        method = "enumerate" if small and count_outcomes(K, N) <= max_outcomes else "monte-carlo"
    if method == "enumerate" and (
        log_count > math.log(MAX_ENUMERATION) + 1e-9 or count_outcomes(K, N) > MAX_ENUMERATION
    ):
        fail(
            "method",
            "enumerate",
            f"used with at most {MAX_ENUMERATION} outcomes (K = {K}, N = {N} has "
            f"about 10^{log_count / math.log(10):.1f}); use 'monte-carlo'",
        )
    if method == "monte-carlo" and samples * N > MAX_MONTE_CARLO_DRAWS:
        fail(
            "samples",
            samples,
            f"<= {MAX_MONTE_CARLO_DRAWS // N} for N = {N} (Monte Carlo draws samples * N are "
            f"limited to 2**31 = {MAX_MONTE_CARLO_DRAWS}, about 10 minutes of work)",
        )
    return method


def expected_change(
    logits: ArrayLike,
    correct: ArrayLike,
    N: int,
    lr: float,
    quantities: Sequence[str | Callable[[np.ndarray], float]] = (
        "dq_pos_first_order",
        "dq_pos_exact",
        "dq_unsampled_correct_first_order",
        "dq_unsampled_correct_exact",
    ),
    *,
    rule: str = "theory",
    r_correct: float = 1.0,
    r_incorrect: float = -1.0,
    gamma: float = 0.0,
    advantage: str | AdvantageConvention | None = None,
    method: str = "auto",
    samples: int = 10_000,
    seed: int | np.random.Generator | None = 0,
    max_outcomes: int = 20_000,
) -> ExpectationResult:
    """Expected one-step change (or any per-group quantity) over the draw of the group.

    Parameters
    ----------
    logits : array_like, shape (K,)
    correct : array_like of bool, shape (K,)
    N : int
        Group size in [1, 2**20] (:data:`~fgrpo_theory.mass.MAX_GROUP_SIZE`).
    lr : float
        Step size lr (eta in the paper), > 0.
    quantities : sequence of str or callable
        Names from :data:`QUANTITIES` (first-order and exact changes, statistics), or callables
        ``f(new_probs) -> float`` of the exact post-update probabilities (shape (K,); these cost
        O(K) per outcome).
    rule, r_correct, r_incorrect, gamma, advantage
        See :class:`~fgrpo_theory.mass.StepSpec`.
    method : {"auto", "enumerate", "monte-carlo"}
        "enumerate" sums over all C(N+K-1, N) multinomial outcomes with their probabilities (at
        most :data:`MAX_ENUMERATION`); "monte-carlo" averages ``samples`` sampled groups and
        reports the standard error; "auto" enumerates when there are at most ``max_outcomes``
        outcomes.
    samples : int
        Number of Monte Carlo groups, >= 2 and with samples * N <= 2**31
        (:data:`MAX_MONTE_CARLO_DRAWS`, about 10 minutes of work).
    seed : int, numpy.random.Generator or None
        Monte Carlo seed; the same seed gives the same numbers.
    max_outcomes : int
        Enumeration limit of "auto".

    Returns
    -------
    ExpectationResult
    """
    z, corr = check_policy(logits, correct)
    N = check_N(N)
    spec = StepSpec(rule, lr, gamma, r_correct, r_incorrect, advantage)
    names = _quantity_names(quantities)
    samples = int(check_int_array("samples", samples, lo=2))
    max_outcomes = int(check_int_array("max_outcomes", max_outcomes, lo=1))
    method = resolve_method(z.size, N, method, samples, max_outcomes)
    task = _Task(z, softmax(z), corr, quantities, names, N, spec)
    if method == "enumerate":
        return _enumerate(task)
    return _monte_carlo(task, samples, seed)


class _Task(NamedTuple):
    """What both engines average over the group draw: the policy, the quantities, the update."""

    z: np.ndarray
    p: np.ndarray
    corr: np.ndarray
    quantities: Sequence[str | Callable[[np.ndarray], float]]
    names: list[str]
    N: int
    spec: StepSpec


def _collect(
    values: dict[str, np.ndarray],
    dz: np.ndarray,
    new_probs: Callable[[int], np.ndarray],
    quantities: Sequence[str | Callable[[np.ndarray], float]],
    names: list[str],
) -> dict[str, np.ndarray]:
    out = {}
    for q, name in zip(quantities, names, strict=True):
        if callable(q):
            out[name] = np.asarray([float(q(new_probs(i))) for i in range(dz.shape[0])])
        else:
            out[name] = values[q]
    return out


def _enumerate(task: _Task) -> ExpectationResult:
    z, p, corr, quantities, names, N, spec = task
    K = z.size
    logp = log_softmax(z)
    total = dict.fromkeys(names, 0.0)
    prob_sum, n_out = 0.0, 0
    ones = np.ones(K)
    for counts in _compositions(K, N, max(1, BLOCK // K)):
        logw = gammaln(N + 1) - np.sum(gammaln(counts + 1), axis=-1)
        logw = logw + np.sum(np.where(counts > 0, counts * logp, 0.0), axis=-1)
        prob = np.exp(logw)
        values, _, dz = evaluate(p, ones, counts, corr, N, spec)

        def new_probs(i: int, dz: np.ndarray = dz) -> np.ndarray:
            return p + exact_probs(p, dz[i])

        for name, v in _collect(values, dz, new_probs, quantities, names).items():
            total[name] += float(np.sum(prob * v))
        prob_sum += float(np.sum(prob))
        n_out += counts.shape[0]
    if abs(prob_sum - 1.0) > 1e-9:  # pragma: no cover - a defect, not a user error
        raise RuntimeError(f"outcome probabilities sum to {prob_sum!r}, not 1")
    return ExpectationResult(
        method="enumeration",
        n_outcomes=n_out,
        n_samples=None,
        mean=total,
        stderr=dict.fromkeys(names, 0.0),
    )


def _monte_carlo(
    task: _Task, samples: int, seed: int | np.random.Generator | None
) -> ExpectationResult:
    z, p, corr, quantities, names, N, spec = task
    rng = np.random.default_rng(check_seed(seed))
    lv = levels(z, corr, p)
    L = lv.p.size
    cdf = np.cumsum(p)
    chunk = max(1, min(samples, BLOCK // (L + N)))
    acc: dict[str, list[np.ndarray]] = {name: [] for name in names}
    done = 0
    while done < samples:
        S = min(chunk, samples - done)
        idx = np.sort(draw(cdf, rng, (S, N)), axis=1)
        start = np.ones((S, N), dtype=bool)
        start[:, 1:] = idx[:, 1:] != idx[:, :-1]
        run = np.cumsum(start, axis=1) - 1
        rows = np.broadcast_to(np.arange(S)[:, None], (S, N))
        counts = np.bincount((rows * N + run).ravel(), minlength=S * N).reshape(S, N)
        actions = np.zeros((S, N), dtype=np.int64)
        actions[rows[start], run[start]] = idx[start]
        valid = counts > 0
        lv_act = lv.of_action[actions]
        taken = np.bincount((rows * L + lv_act)[valid], minlength=S * L).reshape(S, L)
        pa = np.concatenate([p[actions], np.broadcast_to(lv.p, (S, L))], axis=1)
        wa = np.concatenate([valid.astype(float), (lv.m - taken).astype(float)], axis=1)
        na = np.concatenate([counts, np.zeros((S, L), dtype=np.int64)], axis=1)
        ca = np.concatenate([corr[actions], np.broadcast_to(lv.correct, (S, L))], axis=1)
        values, _, dz = evaluate(pa, wa, na, ca, N, spec)

        def new_probs(i: int, dz=dz, actions=actions, valid=valid) -> np.ndarray:
            dense = dz[i, N:][lv.of_action]  # unsampled actions move like their level
            dense[actions[i][valid[i]]] = dz[i, :N][valid[i]]
            return p + exact_probs(p, dense)

        for name, v in _collect(values, dz, new_probs, quantities, names).items():
            acc[name].append(v)
        done += S
    mean, stderr = {}, {}
    for name in names:
        v = np.concatenate(acc[name])
        mean[name] = float(np.mean(v))
        stderr[name] = float(np.std(v, ddof=1) / math.sqrt(v.size))
    return ExpectationResult(
        method="monte-carlo", n_outcomes=None, n_samples=samples, mean=mean, stderr=stderr
    )
