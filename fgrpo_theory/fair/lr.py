"""One learning-rate answer: at what lr to run focal weighting, coming from a vanilla setting.

The user has a vanilla GRPO run (learning rate, optimizer, group size N and, optionally, a fit of
their prompts' difficulty from a log). :func:`lr_advice` says at what learning rate to run the
focal variant (gamma > 0) for a fair comparison, and why.

The quantity behind every multiplier of the toolkit is one ratio (docs/learning-rates.md).
docs/theory.md section 15 (the general form of section 6): for any binary group scheme with
advantage tables a_c(X), a_w(X) (the advantage of a correct / an incorrect rollout in a group with X
correct of N), the expected log-prob gradient on a prompt of success rate mu is
H(mu; N) grad mu with

    H(mu; N) = E[a_c(1 + Y)] - E[a_w(Y)],   Y ~ Binomial(N - 1, mu),

and the expected logit step has size h(mu) = mu (1 - mu) H(mu; N) (docs/theory.md section 6:
h = E[g sqrt(X (N - X))] / N for GRPO with focal weight g). Over a difficulty distribution
w(mu), focal's expected step is vanilla's times the **step ratio**

    r = sum_j w_j h_focal(mu_j) / sum_j w_j h_vanilla(mu_j)        (:func:`step_ratio`).

For zero-sum advantages this is E[g |A|] / E[|A|] (docs/theory.md section 13,
:func:`fgrpo_theory.advantages.effective_lr_multiplier`), appendix N's m_gamma in the limit of
mu ~ Uniform(0, 1) and large N, and h_gamma / h_0 for a single prompt. A scheme other than focal
plugs in through ``tables`` (a callable N -> (a_c, a_w) over X = 0..N), which is what a scheme
registry's ``tables(N)`` gives.

What to do with r depends on the optimizer. SGD-like updates scale with the loss, so focal at
lr / r takes vanilla's step size on average (step-size matched a priori). Adam and AdamW divide
by a running gradient scale, so a constant factor is normalized away: run focal at the vanilla
lr and compare against a progress-matched vanilla control, which is what the toolkit measured.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._validate import check_scalar, fail

__all__ = [
    "OPTIMIZERS",
    "LrAdvice",
    "h_profile",
    "step_ratio",
    "lr_advice",
    "lr_advice_table",
]

#: Optimizers :func:`lr_advice` knows, and how each treats a constant factor on the loss.
OPTIMIZERS = {
    "sgd": "step-size",  # the update scales with the loss: match the expected step a priori
    "adam": "progress",  # a constant factor is normalized away: match progress instead
    "adamw": "progress",
}
_NAMES = {"sgd": "SGD", "adam": "Adam", "adamw": "AdamW"}
#: Largest number of (mu, Y) terms summed by :func:`step_ratio` (len(mu) * N).
MAX_TERMS = 50_000_000
#: Gauss-Jacobi atoms used for a Beta difficulty (exact for N below twice this).
_BETA_NODES = 200

Tables = Callable[[int], tuple[Any, Any]]

# The measured results the advice cites (docs/populations.md, docs/fair-comparison.md); the
# numbers are the ones stated there, nothing is recomputed here.
_EVIDENCE_SGD = (
    "Measured (populations of prompts, shared parameters, SGD, N = 8, 16 seeds, against the "
    "progress-matched control): focal gamma = 1 gains +0.67 points of test pass@256 "
    "[+0.60, +0.71] and lowers the rare-solution NLL rise by 0.32 [0.28, 0.37], at a pass@1 "
    "cost of -0.30 points [-0.38, -0.23] (docs/populations.md)."
)
_EVIDENCE_ADAM = (
    "Measured (populations of prompts under Adam, N = 8, 16 seeds): at equal progress focal and "
    "vanilla are indistinguishable (pass@1 -0.02 [-0.07, +0.01], pass@256 +0.07 [+0.05, +0.09] "
    "points, rare NLL +0.00 [-0.01, +0.01]); against the lr x c control focal seems to gain 2.1 "
    "points of pass@1, which is the unmatched step size, not focal weighting "
    "(docs/populations.md). One prompt, Fig. 2 setting: at equal Q_pos focal keeps no more "
    "retained mass (docs/fair-comparison.md)."
)


def _focal_tables(gamma: float, advantage: str) -> Tables:
    """a_c, a_w of GRPO under ``advantage`` times the focal weight (1 - X/N)^gamma (P-12)."""
    from ..advantages import binary_advantages, focal_weight

    def tables(N: int) -> tuple[np.ndarray, np.ndarray]:
        X = np.arange(N + 1)
        a_pos, a_neg = binary_advantages(X, N, advantage)
        g = np.asarray(focal_weight(X / N, gamma), dtype=float)
        return g * np.asarray(a_pos, dtype=float), g * np.asarray(a_neg, dtype=float)

    return tables


def _check_tables(tables: Tables, N: int, name: str) -> tuple[np.ndarray, np.ndarray]:
    a_c, a_w = tables(N)
    a_c = np.asarray(a_c, dtype=float)
    a_w = np.asarray(a_w, dtype=float)
    if a_c.shape != (N + 1,) or a_w.shape != (N + 1,):
        fail(name, f"shapes {a_c.shape}, {a_w.shape}", f"two tables of length N + 1 = {N + 1}")
    # a_c(0) and a_w(N) are never used (no such rollout); every used entry must be finite
    if not (np.isfinite(a_c[1:]).all() and np.isfinite(a_w[:-1]).all()):
        fail(name, "a non-finite entry", "finite advantage tables")
    return a_c, a_w


def h_profile(mu: Any, N: int, a_c: Any, a_w: Any) -> np.ndarray:
    """h(mu) = mu (1 - mu) H(mu; N), the size of the expected logit step (docs/theory.md sec. 6).

    H(mu; N) = E[a_c(1 + Y)] - E[a_w(Y)] with Y ~ Binomial(N - 1, mu) (section 6 for any
    scheme), for a binary group scheme whose rollout advantages are ``a_c[X]`` (correct) and
    ``a_w[X]`` (incorrect) in a group with X correct of N. Summed exactly over Y; ``mu`` is a
    1-D array.
    """
    from scipy.stats import binom

    m = np.asarray(mu, dtype=float).ravel()
    Y = np.arange(N)
    pmf = binom.pmf(Y[None, :], N - 1, m[:, None])  # [len(mu), N]
    diff = np.asarray(a_c, dtype=float)[1:] - np.asarray(a_w, dtype=float)[:-1]
    H = (pmf * diff[None, :]).sum(axis=1)  # explicit sum: no BLAS, thread-count independent
    return m * (1.0 - m) * H


def _difficulty(mu: Any, weights: Any, beta: Any) -> tuple[np.ndarray, np.ndarray, str]:
    """Atoms and weights of the difficulty distribution, and a one-line description."""
    from ..diagnose.fit import beta_atoms

    if mu is not None and beta is not None:
        fail("beta", beta, "not given together with mu (one difficulty distribution)")
    if mu is None:
        if weights is not None:
            fail("weights", "given", "used with mu (the weights of its atoms)")
        if beta is None:
            m, w = beta_atoms(1.0, 1.0, _BETA_NODES)
            return m, w, "mu ~ Uniform(0, 1) (appendix N's assumption)"
        b = np.asarray(beta, dtype=float).ravel()
        if b.size != 2:
            fail("beta", beta, "two numbers a, b")
        a_, b_ = (check_scalar("beta", float(v), lo=0, lo_open=True) for v in b)
        m, w = beta_atoms(a_, b_, _BETA_NODES)
        return m, w, f"mu ~ Beta({a_:.4g}, {b_:.4g})"
    from .._validate import check_array
    from ..advantages.closed_form import prompt_weights
    from ..advantages.group import as_real_array

    m = check_array("mu", as_real_array("mu", mu), lo=0, hi=1).ravel()
    if m.size == 0:
        fail("mu", "empty", "at least one success rate")
    w = prompt_weights(weights, m.size)
    what = f"mu = {m[0]:.4g}" if m.size == 1 else f"{m.size} success rates given"
    return m, w, what


def _check_N(N: Any) -> int:
    if isinstance(N, bool) or not isinstance(N, int | np.integer):
        if not (isinstance(N, float) and N.is_integer()):
            fail("N", N, "an integer >= 2")
    n = int(N)
    if n < 2:
        fail("N", n, ">= 2 (a group of one is never active)")
    return n


def step_ratio(
    N: int,
    gamma: float = 1.0,
    *,
    mu: Any = None,
    weights: Any = None,
    beta: Any = None,
    advantage: str = "grpo",
    tables: Tables | None = None,
) -> float:
    """Focal's expected step over vanilla's at the same lr, on a difficulty distribution.

        r = sum_j w_j h_s(mu_j) / sum_j w_j h_0(mu_j),   h = mu (1 - mu) H(mu; N),

    (h of :func:`h_profile`) with h_s the profile of the scheme (GRPO under ``advantage``
    with focal weight (1 - X/N)^gamma, or the tables ``tables(N) -> (a_c, a_w)`` of any binary
    group scheme) and h_0 that of GRPO under ``advantage`` (docs/theory.md sections 6 and 13).
    For zero-sum advantages it equals
    :func:`fgrpo_theory.advantages.effective_lr_multiplier`; with the default difficulty
    mu ~ Uniform(0, 1) it tends to appendix N's m_gamma as N grows.

    Parameters
    ----------
    N : int
        Group size, >= 2.
    gamma : float
        Focal exponent >= 0 (ignored when ``tables`` is given).
    mu, weights : array_like, optional
        Per-prompt success rates (or the atoms of a fitted mixture) and their weights.
    beta : (float, float), optional
        A Beta(a, b) difficulty fit (``diagnose``'s beta_a, beta_b) instead of ``mu``.
        Neither given: mu ~ Uniform(0, 1).
    advantage : str
        Advantage convention of the vanilla run (default ``"grpo"``).
    tables : callable, optional
        ``tables(N) -> (a_c, a_w)``, arrays over X = 0..N: a scheme to compare with GRPO.

    Returns
    -------
    float
        r > 0 (1 at gamma = 0).
    """
    n = _check_N(N)
    m, w, _ = _difficulty(mu, weights, beta)
    return _ratio(n, gamma, m, w, advantage, tables)


def _ratio(
    n: int, gamma: float, m: np.ndarray, w: np.ndarray, advantage: str, tables: Tables | None
) -> float:
    if m.size * n > MAX_TERMS:
        fail("N", n, f"such that len(mu) * N <= {MAX_TERMS} (got len(mu) = {m.size})")
    if tables is None:
        g = check_scalar("gamma", gamma, lo=0)
        tables = _focal_tables(g, advantage)
    a_c, a_w = _check_tables(tables, n, "tables")
    r_c, r_w = _check_tables(_focal_tables(0.0, advantage), n, "advantage")
    den = float((w * h_profile(m, n, r_c, r_w)).sum())
    if not den > 0:
        fail("mu", m[0] if m.size == 1 else "population", "giving some active group (0 < mu < 1)")
    r = float((w * h_profile(m, n, a_c, a_w)).sum()) / den
    if not (math.isfinite(r) and r > 0):
        fail("tables", f"step ratio {r!r}", "a scheme whose expected step is positive")
    return r


@dataclass(frozen=True)
class LrAdvice:
    """The learning rate to run focal weighting at, coming from a vanilla setting, and why.

    ``focal_lr`` is the answer. ``control_lr`` is the other direction: the vanilla control's lr
    for a focal run kept at ``vanilla_lr``. ``step_ratio`` is r of :func:`step_ratio`,
    ``m_gamma`` appendix N's large-N limit of it for mu ~ Uniform(0, 1).
    """

    optimizer: str
    N: int
    gamma: float
    step_ratio: float
    m_gamma: float
    vanilla_lr: float
    focal_lr: float
    control_lr: float
    matching: str
    difficulty: str
    why: str
    check: str

    def as_row(self) -> dict[str, Any]:
        """The advice as one row of a table (the CLI's columns)."""
        return dict(self.__dict__)


def lr_advice(
    lr: float,
    optimizer: str,
    N: int,
    gamma: float = 1.0,
    *,
    mu: Any = None,
    weights: Any = None,
    beta: Any = None,
    advantage: str = "grpo",
    tables: Tables | None = None,
) -> LrAdvice:
    """At what learning rate to run focal weighting (gamma), coming from a vanilla GRPO run.

    - **SGD** (any update that scales with the loss): focal at ``lr / r`` takes vanilla's
      expected step size on the given prompts (step-size matched a priori; r of
      :func:`step_ratio`), and a vanilla control for a focal run kept at ``lr`` is ``lr * r``.
    - **Adam, AdamW**: a constant factor on the loss is normalized away, so ``lr * r`` is not a
      matched control (docs/theory.md section 11). Run focal at the vanilla ``lr`` and compare
      with vanilla at ``lr`` and with a progress-matched vanilla control, which is what the
      toolkit measured (docs/populations.md).

    Parameters
    ----------
    lr : float
        The vanilla run's learning rate, > 0.
    optimizer : str
        ``"sgd"``, ``"adam"`` or ``"adamw"`` (:data:`OPTIMIZERS`).
    N : int
        Group size of the run, >= 2.
    gamma : float
        Focal exponent > 0 (default 1).
    mu, weights, beta, advantage, tables
        As in :func:`step_ratio` (the difficulty: per-prompt success rates, or a Beta(a, b) fit
        from ``diagnose``; default mu ~ Uniform(0, 1)).

    Returns
    -------
    LrAdvice
        The learning rates, the ratio behind them, and the reasons in words.

    Examples
    --------
    >>> a = lr_advice(1e-6, "sgd", 8, 1.0, beta=(2.0, 5.0))
    >>> round(a.step_ratio, 3), a.matching
    (0.642, 'step-size')
    """
    lr_v = check_scalar("lr", lr, lo=0, lo_open=True)
    if not isinstance(optimizer, str) or optimizer.lower() not in OPTIMIZERS:
        fail("optimizer", optimizer, "one of " + ", ".join(OPTIMIZERS))
    opt = optimizer.lower()
    n = _check_N(N)
    if tables is None:
        g = check_scalar("gamma", gamma, lo=0, lo_open=True)
    else:
        g = float("nan")
    m, w, what = _difficulty(mu, weights, beta)
    r = _ratio(n, g, m, w, advantage, tables)
    from ..advantages import lr_multiplier

    m_g = float(lr_multiplier(g)) if tables is None else float("nan")
    matching = OPTIMIZERS[opt]
    n2 = ""
    if n == 2 and tables is None:
        n2 = (
            f" At N = 2 every active group has g = 2^-gamma = {2.0**-g:.4g}: focal is vanilla at "
            "that constant factor exactly."
        )
    if matching == "step-size":
        focal_lr = lr_v / r
        why = (
            f"SGD scales the update with the loss. On {what} at N = {n}, focal's expected step is "
            f"r = {r:.4g} times vanilla's at the same lr (theory sections 6 and 13), so focal at "
            f"lr / r = {focal_lr:.4g} takes vanilla's step size on average; a vanilla control for "
            f"focal kept at {lr_v:.4g} runs at lr x r = {lr_v * r:.4g}.{n2} {_EVIDENCE_SGD}"
        )
        check = (
            "r is an average: on hard prompts (g near 1) focal at lr / r steps larger than "
            "vanilla, so watch stability; confirm with a progress-matched control (equal train "
            "pass@1) and compare at equal progress, several seeds, every seed shown."
        )
    else:
        focal_lr = lr_v
        why = (
            f"{_NAMES[opt]} divides each update by a running gradient scale, so a constant "
            f"factor on the loss is normalized away: the step ratio r = {r:.4g} (on {what} at "
            f"N = {n}) does not set the step size, and a control at lr x r = {lr_v * r:.4g} is "
            f"not matched. Run focal at your vanilla lr and compare with vanilla at the same lr "
            f"and with a progress-matched vanilla control (the lr at which vanilla reaches "
            f"focal's train pass@1).{n2} {_EVIDENCE_ADAM}"
        )
        check = (
            "Compare at equal progress (train pass@1 or Q_pos reached), not at equal steps; "
            "several seeds, every seed shown; look at pass@k for large k and the rare-solution "
            "NLL, where focal weighting is meant to act."
        )
    return LrAdvice(
        optimizer=opt,
        N=n,
        gamma=g,
        difficulty=what,
        step_ratio=r,
        m_gamma=m_g,
        vanilla_lr=lr_v,
        focal_lr=focal_lr,
        control_lr=lr_v * r,
        matching=matching,
        why=why,
        check=check,
    )


def lr_advice_table(
    lr: float,
    optimizer: str,
    N: Any,
    gamma: Any = (0.5, 1.0),
    *,
    mu: Any = None,
    weights: Any = None,
    beta: Any = None,
    advantage: str = "grpo",
):
    """:func:`lr_advice` over every N x gamma, one row each (a pandas DataFrame)."""
    import pandas as pd

    ns = np.atleast_1d(np.asarray(N)).ravel()
    gs = np.atleast_1d(np.asarray(gamma, dtype=float)).ravel()
    rows = [
        lr_advice(
            lr, optimizer, int(n), float(g), mu=mu, weights=weights, beta=beta, advantage=advantage
        ).as_row()
        for n in ns
        for g in gs
    ]
    return pd.DataFrame(rows)
