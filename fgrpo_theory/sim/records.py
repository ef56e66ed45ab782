"""Typed parameter records of the simulator's kernels and the per-run state they advance.

The kernels take a handful of typed records instead of ~27 positional scalars, so two parameters
of the same type cannot be swapped silently: the runner builds each record once, by field name,
from the SimConfig (``runner.build_records``). Numba compiles NamedTuples as heterogeneous tuples
with named fields (no overhead).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .kcore import KL_EXACT, KL_K3, KL_OFF, OPT_SGD, SCH_DS, SCH_TABLE, SCH_UNLIKELINESS


class Problem(NamedTuple):
    """The policy and the rewards of one prompt (shared by every run)."""

    z0: np.ndarray  # initial logits, float64[K] (float32[K]: the dense path in float32)
    correct: np.ndarray  # uint8[K], 1 = correct action
    p0: np.ndarray  # softmax(z0), float64[K] (for M_ret, P-26)
    sum_p0c: float  # initial correct mass
    adv_c: np.ndarray  # float64[N + 1]: focal advantage of a correct sample given X correct
    adv_w: np.ndarray  # float64[N + 1]: same for an incorrect sample


class Algorithm(NamedTuple):
    """What one step does: group size, surrogate, clipping, inner updates, resampling."""

    N: int
    rule: int  # RULE_*
    algo: int  # ALGO_*
    inner: int  # optimizer steps per sampled group
    clip_lo: float  # eps_low: ratios below 1 - clip_lo are clipped
    clip_hi: float  # eps_high: ratios above 1 + clip_hi are clipped
    dyn: bool  # dynamic sampling
    max_res: int  # cap on redraws per step
    sampler: int  # SAMPLER_*
    zero_sum: bool  # sum_k n_k A_k = 0 for every X (see _coefficients)
    keep: np.ndarray  # uint8[N + 1]: 1 if dynamic sampling keeps a group with X correct draws
    dual_c: float  # dual-clip PPO: no gradient where A < 0 and r > dual_c (inf = off)


class Optimizer(NamedTuple):
    """Optimizer kind and hyperparameters (``b1``/``b2``/``eps`` unused by SGD)."""

    kind: int  # OPT_*
    lr: float
    wd: float
    b1: float
    b2: float
    eps: float


class Logging(NamedTuple):
    """Which steps are logged, which subsets are measured, which Q_pos thresholds are tracked."""

    log_steps: np.ndarray  # int64[n_log], sorted
    submask: np.ndarray  # uint8[n_sub, K]
    thresholds: np.ndarray  # float64[n_thr], sorted ascending, each in (0, 1)
    n_steps: int  # total steps of a run (the last state is checked against the thresholds)


class Tree(NamedTuple):
    """Sum-tree path settings: rebuild period and the tabulated ``exp(dz)`` (1x1 = off)."""

    renorm_every: int
    etab_c: np.ndarray  # float64[N + 1, N + 1] or [1, 1]
    etab_w: np.ndarray


class SchemeTerms(NamedTuple):
    """What a scheme adds beyond per-X tables (``None`` in the kernels' ``sr`` argument when
    nothing: then the tables path compiles exactly as before): a likelihood-aware advantage
    (``kind`` = ``SCH_*`` with its parameters and the focal weight per X) and the regularizers'
    coefficients with the reference policy's log-probabilities ``lq`` (one row per prompt)."""

    kind: int  # SCH_*
    penalty: float  # unlikeliness: rank penalty
    gamma_p: float  # ds: coefficient of -L on a correct rollout
    gamma_n: float  # ds: coefficient of +L on an incorrect rollout
    focal: np.ndarray  # float64[N + 1]: focal weight (1 - X/N)^gamma
    ent_coef: float  # entropy bonus coefficient (0 = off)
    kl_coef: float  # KL penalty coefficient (0 = off)
    kl_kind: int  # KL_*
    lq: np.ndarray  # float64[rows, K]: log softmax of the reference (initial) logits, or [1, 1]


def scheme_terms(sch, N: int, lq_of) -> SchemeTerms | None:
    """The :class:`SchemeTerms` of a :class:`~fgrpo_theory.schemes.Scheme` for group size
    ``N``, or ``None`` for a scheme that is tables only; ``lq_of()`` returns the reference
    log-probabilities ``[rows, K]`` (called only when a KL term needs them)."""
    from ..advantages import focal_weight

    kind = {"unlikeliness": SCH_UNLIKELINESS, "ds": SCH_DS}.get(sch.base.name, SCH_TABLE)
    ent = sch.regularizer("entropy")
    kl = sch.regularizer("kl")
    if kind == SCH_TABLE and ent is None and kl is None:
        return None
    kw = sch.base.kw
    kl_kind = KL_OFF if kl is None else (KL_EXACT if kl["estimator"] == "exact" else KL_K3)
    kl_coef = 0.0 if kl is None else float(kl["coef"])
    need_lq = kl_kind != KL_OFF and kl_coef > 0.0
    lq = np.ascontiguousarray(lq_of(), dtype=np.float64) if need_lq else np.zeros((1, 1))
    focal = np.asarray(focal_weight(np.arange(N + 1) / N, sch.gamma), dtype=np.float64)
    return SchemeTerms(
        kind=kind,
        penalty=float(kw.get("penalty", 0.0)),
        gamma_p=float(kw.get("gamma_p", 0.0)),
        gamma_n=float(kw.get("gamma_n", 0.0)),
        focal=np.ascontiguousarray(focal.reshape(N + 1)),
        ent_coef=0.0 if ent is None else float(ent["coef"]),
        kl_coef=kl_coef if need_lq else 0.0,
        kl_kind=kl_kind if need_lq else KL_OFF,
        lq=lq,
    )


def dense_scheme(sch) -> bool:
    """Whether a scheme needs the simulators' per-rollout path (likelihood-aware advantages or
    a regularizer): dense path, float64 only."""
    return bool(sch.needs_logprobs or sch.regularizers)


#: Slots of the per-run integer state ``State.ints[r]`` carried between chunks of steps.
I_TOPT, I_LOG, I_GROUPS, I_ACTIVE, I_RESAMPLES, I_COUNTDOWN = 0, 1, 2, 3, 4, 5
N_INTS = 6


class State(NamedTuple):
    """Everything a run carries from one chunk of steps to the next (one row per run).

    ``z`` logits; ``mm``/``vv`` Adam moments (width 1 for SGD); ``rng`` the random stream
    ``[key, counter]``; ``ints`` the slots ``I_*``; ``tails`` the counters since the last logged
    step (``n_sub`` first-draw tail misses, ``n_sub`` tail misses among kept active groups, then
    the kept active groups); ``tree``/``shift`` the sum tree and its shift (width 1 on the dense
    path).
    """

    z: np.ndarray
    mm: np.ndarray
    vv: np.ndarray
    rng: np.ndarray
    ints: np.ndarray
    tails: np.ndarray
    tree: np.ndarray
    shift: np.ndarray


def new_state(prob: Problem, log: Logging, opt: Optimizer, keys: np.ndarray, tree: bool) -> State:
    """Fresh state of ``len(keys)`` runs at step 0 (the tree itself is built by the kernel).

    Logits and Adam moments take the dtype of ``prob.z0`` (float64, or float32 for
    ``precision = "float32"``); everything else is the same in both precisions.
    """
    R = keys.shape[0]
    K = prob.z0.shape[0]
    P = 1
    while P < K:
        P *= 2
    width = K if opt.kind != OPT_SGD else 1
    rng = np.zeros((R, 2), np.uint64)
    rng[:, 0] = keys
    return State(
        z=np.tile(prob.z0, (R, 1)),
        mm=np.zeros((R, width), prob.z0.dtype),
        vv=np.zeros((R, width), prob.z0.dtype),
        rng=rng,
        ints=np.zeros((R, N_INTS), np.int64),
        tails=np.zeros((R, 2 * log.submask.shape[0] + 1), np.int64),
        tree=np.zeros((R, 2 * P if tree else 1)),
        shift=np.zeros(R),
    )
