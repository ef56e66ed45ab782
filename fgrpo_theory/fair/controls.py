"""Matched vanilla controls of a focal run (theory.md section 11).

A focal weight g <= 1 shrinks every update, so a focal run must be compared with vanilla runs on
an equal footing. For a focal config (gamma > 0) the arms are, with these fixed names:

========================  ====================================================================
arm                       config
========================  ====================================================================
``focal``                 the config as given
``vanilla``               gamma = 0, same lr
``vanilla-m``             gamma = 0, lr x m_gamma (appendix N, :func:`m_multiplier`)
``vanilla-h``             gamma = 0, lr x h_gamma / h_0 at the start state (:func:`h_multiplier`)
``vanilla-progress``      gamma = 0, the lr whose median final Q_pos equals the focal run's
                          (:func:`match_progress`)
========================  ====================================================================

Every arm uses the same seeds, so seed s of every arm shares its random numbers (pairing for
:func:`fgrpo_theory.fair.stats.paired_bootstrap_interval`). The config option naming the controls
is ``controls = ["m", "h", "progress"]`` (:data:`CONTROLS`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._validate import check_scalar, fail

__all__ = [
    "CONTROLS",
    "ARM_NAMES",
    "H_MAX_N",
    "m_multiplier",
    "h_value",
    "h_multiplier",
    "start_success_rate",
    "check_controls",
    "ProgressMatch",
    "match_progress",
    "match_factor",
    "arm_configs",
]

#: Control names of the ``controls`` option and the arm each produces.
CONTROLS = {"m": "vanilla-m", "h": "vanilla-h", "progress": "vanilla-progress"}
#: Every arm name, in output order.
ARM_NAMES = ("focal", "vanilla", "vanilla-m", "vanilla-h", "vanilla-progress")
#: Largest N for which h is summed exactly (O(N) memory and time).
H_MAX_N = 10_000_000


def check_controls(controls: Any) -> tuple[str, ...]:
    """Validate a controls list (names of :data:`CONTROLS`, or a comma-separated string)."""
    if isinstance(controls, str):
        controls = [c.strip() for c in controls.split(",") if c.strip()]
    if controls is None:
        return ()
    out = []
    for c in controls:
        if c not in CONTROLS:
            fail("controls", c, "a list of " + ", ".join(CONTROLS))
        if c not in out:
            out.append(c)
    return tuple(c for c in CONTROLS if c in out)


def _check_focal(cfg: Any) -> None:
    from ..sim import SimConfig

    if not isinstance(cfg, SimConfig):
        fail("config", cfg, "a SimConfig")
    if not cfg.gamma > 0:
        fail("gamma", cfg.gamma, "> 0 for a focal config (controls compare it with gamma = 0)")


def m_multiplier(gamma: float) -> float:
    """m_gamma = B(3/2, gamma + 3/2) / B(3/2, 3/2) (appendix N), the a-priori step-size match."""
    from ..advantages import lr_multiplier

    return float(lr_multiplier(gamma))


def start_success_rate(cfg: Any) -> float:
    """mu = Q_pos of the config's initial policy (sum of the correct actions' probabilities)."""
    from ..policy import probabilities
    from ..sim.config import parse_index_set, parse_logits

    p = probabilities(parse_logits(cfg.logits, cfg.K))
    if isinstance(cfg.correct, str):
        idx = parse_index_set(cfg.correct, cfg.K, "correct")
    else:
        idx = np.arange(cfg.correct)
    return float(p[idx].sum())


def h_value(
    N: int,
    mu: float,
    gamma: float,
    advantage: str = "grpo",
    r_correct: float = 1.0,
    r_incorrect: float = -1.0,
) -> float:
    """h = E[g(X/N) X A+(X)] / N, X ~ Binomial(N, mu), summed exactly (theory.md section 6).

    With GRPO population-std advantages X A+ = sqrt(X (N - X)), so h = E[g sqrt(X(N-X))]/N; other
    zero-sum conventions (e.g. dr-grpo's R - mean R) use their own A+. By section 6 the expected
    first logit step of the log-prob update is h times a vector that does not depend on gamma, so
    h_gamma / h_0 is the lr multiplier that makes vanilla's expected first step equal the focal
    one (exact for SGD at the start state; under Adam the step is rescaled by the moments).
    """
    from scipy.stats import binom

    from ..advantages import binary_advantages, focal_weight

    if isinstance(N, bool) or not isinstance(N, int | np.integer) or not 1 <= N <= H_MAX_N:
        fail("N", N, f"an integer in [1, {H_MAX_N}] for the exact h sum")
    N = int(N)
    mu = check_scalar("mu", mu, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    gamma = check_scalar("gamma", gamma, lo=0.0)
    x = np.arange(N + 1)
    pmf = binom.pmf(x, N, mu)
    g = np.asarray(focal_weight(x / N, gamma), dtype=float)
    adv_c, _ = binary_advantages(x, N, advantage, r_correct=r_correct, r_incorrect=r_incorrect)
    adv_c = np.nan_to_num(np.asarray(adv_c, dtype=float))  # X = 0 has no correct sample
    return float(np.sum(pmf * g * x * adv_c) / N)


def h_multiplier(cfg: Any) -> float:
    """h_gamma / h_0 at the config's start state mu, N and advantage convention."""
    _check_focal(cfg)
    mu = start_success_rate(cfg)
    args = (cfg.N, mu)
    kw = dict(advantage=cfg.advantage, r_correct=cfg.r_correct, r_incorrect=cfg.r_incorrect)
    h0 = h_value(*args, 0.0, **kw)
    if not h0 > 0:
        fail("N", cfg.N, f"a group size with h_0 > 0 at mu = {mu:.6g} (got h_0 = {h0:g})")
    return h_value(*args, cfg.gamma, **kw) / h0


@dataclass(frozen=True)
class ProgressMatch:
    """Result of :func:`match_progress`.

    ``lr`` is the matched vanilla lr, ``multiplier = lr / focal lr``; ``target`` the focal run's
    median final Q_pos; ``achieved`` vanilla's median final Q_pos at ``lr``; ``matched`` whether
    ``|achieved - target| <= q_tol``; ``monotone`` whether the evaluated (lr, Q_pos) points are
    non-decreasing in lr (checked on every evaluation, the bracket included); ``evaluations``
    the (lr, median final Q_pos) pairs in evaluation order.
    """

    lr: float
    multiplier: float
    target: float
    achieved: float
    q_tol: float
    matched: bool
    monotone: bool
    evaluations: tuple[tuple[float, float], ...] = field(default_factory=tuple)

    @property
    def error(self) -> float:
        return self.achieved - self.target


def _median_final_q(df: Any) -> float:
    last = df[df["step"] == df["step"].max()]
    return float(np.median(last["q_pos"].to_numpy()))


def match_progress(
    cfg: Any,
    *,
    q_tol: float = 2e-3,
    max_evals: int = 14,
    factor: float = 4.0,
    focal_final: float | None = None,
    simulate_fn: Any = None,
) -> ProgressMatch:
    """Vanilla lr whose median final Q_pos (over the config's seeds) equals the focal run's.

    Root finding over log lr (:func:`match_factor`): start at the focal lr (vanilla then usually
    overshoots), step down (or up) by ``factor`` until the target is bracketed, then the Illinois
    variant of regula falsi on log lr, until ``|achieved - target| <= q_tol`` or ``max_evals``
    simulations. Each evaluation is one :func:`fgrpo_theory.sim.simulate` call with only the last
    step logged. Monotonicity in lr is assumed by the method and checked on all evaluated points.

    Parameters
    ----------
    cfg : SimConfig
        The focal config (gamma > 0); its seeds are used for every evaluation.
    q_tol : float
        Tolerance on the median final Q_pos, > 0 (default 2e-3: below the seed-to-seed spread
        of final Q_pos at 16 seeds in the Fig. 2 setting, and above float noise).
    max_evals : int
        Simulation budget (bracket + refinement), >= 3.
    factor : float
        Bracketing step in lr, > 1.
    focal_final : float, optional
        The focal run's median final Q_pos if already known (else it is simulated).
    simulate_fn : callable, optional
        Replacement for :func:`fgrpo_theory.sim.simulate` (tests).
    """
    from ..sim import simulate

    _check_focal(cfg)
    sim = simulate if simulate_fn is None else simulate_fn
    last_only = dict(log_steps=(cfg.steps,))
    if focal_final is None:
        focal_final = _median_final_q(sim(cfg.replace(**last_only)))

    def progress(lr: float) -> float:
        return _median_final_q(sim(cfg.replace(gamma=0.0, lr=lr, controls=(), **last_only)))

    m = match_factor(progress, float(focal_final), start=cfg.lr, tol=q_tol,
                     max_evals=max_evals, factor=factor, exact_start=True)  # fmt: skip
    return dataclasses.replace(m, multiplier=m.lr / cfg.lr)


def match_factor(
    progress: Callable[[float], float],
    target: float,
    *,
    start: float = 1.0,
    tol: float = 2e-3,
    max_evals: int = 14,
    factor: float = 4.0,
    exact_start: bool = False,
) -> ProgressMatch:
    """The x > 0 at which ``progress(x)`` equals ``target`` within ``tol`` (theory.md section 11).

    ``progress`` is a control's progress (a median over seeds) at step size x (a learning rate,
    or a factor on the learning rates), assumed non-decreasing in x; that is checked on every
    evaluated point (``monotone``). Root finding over log x: evaluate at ``start``, step down
    (or up) by ``factor`` until the target is bracketed, then the Illinois variant of regula
    falsi, until ``|progress(x) - target| <= tol`` or ``max_evals`` evaluations; the best point
    evaluated is returned as ``lr`` (and ``multiplier`` = x / start). Points are x = exp(log x);
    with ``exact_start`` the first is ``start`` itself (exp(log start) can differ from it in the
    last bit), so a caller that memoizes runs by config meets the run at ``start`` again.
    """
    tol = check_scalar("q_tol", tol, lo=0.0, lo_open=True)
    if isinstance(max_evals, bool) or not isinstance(max_evals, int) or not 3 <= max_evals <= 100:
        fail("max_evals", max_evals, "an integer in [3, 100]")
    factor = check_scalar("factor", factor, lo=1.0, lo_open=True)
    start = check_scalar("start", start, lo=0.0, lo_open=True)
    target = check_scalar("target", target)
    evals: list[tuple[float, float]] = []
    exact: dict[float, float] = {}  # log x -> the x evaluated, where it is not exp(log x)

    def f(log_x: float) -> float:
        x = exact.get(log_x, math.exp(log_x))
        q = float(progress(x))
        evals.append((x, q))
        return q - target

    def result(log_x: float, r: float) -> ProgressMatch:
        pts = sorted(evals)
        qs = [q for _, q in pts]
        mono = all(b >= a for a, b in zip(qs, qs[1:], strict=False))
        x = exact.get(log_x, math.exp(log_x))
        return ProgressMatch(
            lr=x,
            multiplier=x / start,
            target=target,
            achieved=r + target,
            q_tol=tol,
            matched=abs(r) <= tol,
            monotone=mono,
            evaluations=tuple(evals),
        )

    x0 = math.log(start)
    if exact_start:
        exact[x0] = start
    r0 = f(x0)
    best = (abs(r0), x0, r0)
    if abs(r0) <= tol:
        return result(x0, r0)
    step = math.log(factor) * (-1.0 if r0 > 0 else 1.0)
    xa, ra = x0, r0
    xb, rb = x0, r0
    while len(evals) < max_evals:
        xb = xa + step
        rb = f(xb)
        best = min(best, (abs(rb), xb, rb))
        if abs(rb) <= tol or (rb > 0) != (ra > 0):
            break
        xa, ra = xb, rb
    if abs(rb) <= tol or (rb > 0) == (ra > 0):
        return result(best[1], best[2])
    side = 0
    while len(evals) < max_evals:
        xc = (xa * rb - xb * ra) / (rb - ra)
        rc = f(xc)
        best = min(best, (abs(rc), xc, rc))
        if abs(rc) <= tol:
            break
        if (rc > 0) == (rb > 0):
            xb, rb = xc, rc
            if side == -1:
                ra /= 2.0
            side = -1
        else:
            xa, ra = xc, rc
            if side == 1:
                rb /= 2.0
            side = 1
    return result(best[1], best[2])


def arm_configs(
    cfg: Any,
    controls: Iterable[str] = ("m", "h", "progress"),
    *,
    progress: ProgressMatch | None = None,
) -> list[tuple[str, float, Any]]:
    """``(arm, lr_multiplier, config)`` for [focal, vanilla, then each requested control].

    The progress control needs ``progress`` (from :func:`match_progress`).
    """
    _check_focal(cfg)
    ctl = check_controls(controls)
    arms: list[tuple[str, float, Any]] = [  # config, matched lr or None
        ("focal", 1.0, cfg),
        ("vanilla", 1.0, None),
    ]
    for c in ctl:
        if c == "m":
            arms.append(("vanilla-m", m_multiplier(cfg.gamma), None))
        elif c == "h":
            arms.append(("vanilla-h", h_multiplier(cfg), None))
        else:
            if progress is None:
                fail("progress", None, "a ProgressMatch for the 'progress' control")
            arms.append(("vanilla-progress", progress.multiplier, progress.lr))
    out = []
    for name, mult, c in arms:
        if isinstance(c, float):  # the matched lr itself (not lr x multiplier: no round-off)
            c = cfg.replace(gamma=0.0, lr=c, controls=())
        if c is None:
            c = cfg.replace(gamma=0.0, lr=cfg.lr * mult, controls=())
        out.append((name, float(mult), c))
    return out
