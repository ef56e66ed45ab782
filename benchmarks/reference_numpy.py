"""Straightforward NumPy implementations of the simulator's loops: the benchmarks' reference.

These are deliberately the obvious code a user would write - whole-array NumPy operations, a
Python loop over steps, vectorized over seeds where that is natural - and implement the SAME
algorithm as the simulator so that a speed ratio against them is honest:

* softmax policy over K actions, a group of N i.i.d. draws per step (``Generator.multinomial``),
  binary reward ``r_correct`` / ``r_incorrect``;
* advantages of the binary group (theory.md section 3): ``"grpo"`` (population std, P-3),
  ``"grpo-bessel"``, ``"mean"`` (mean-centred only: the paper's categorical simulation and
  Dr.GRPO), ``"rloo"``; focal weight ``g = (1 - X/N)**gamma`` (P-12) multiplies them (P-13);
* the log-prob rule (policy gradient of ``(1/N) sum_i A_i log p(a_i)``, theory.md section 6) and
  the linear surrogate of the paper's simulation (``(1/N) sum_i A_i p(a_i)``, appendix J);
* one update per sampled group (so PPO/DAPO clipping and the CISPO weight are inactive), optimizer
  SGD or Adam/AdamW with PyTorch's formulas (decoupled weight decay, bias correction).

Each function that takes ``counts`` is deterministic so that tests can drive it with fixed samples;
the ``run_*`` functions add sampling and the Python loop over steps.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "ADVANTAGES",
    "softmax",
    "binary_advantages",
    "logprob_gradient",
    "linear_gradient",
    "AdamState",
    "adam_update",
    "run_tabular_logprob",
    "run_linear",
]

ADVANTAGES = ("grpo", "grpo-bessel", "mean", "rloo")


def softmax(z: np.ndarray) -> np.ndarray:
    """Softmax over the last axis, shifted by the maximum."""
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def binary_advantages(
    X: np.ndarray,
    N: int,
    advantage: str = "grpo",
    r_correct: float = 1.0,
    r_incorrect: float = 0.0,
    eps: float = 0.0,
) -> tuple[np.ndarray, np.ndarray]:
    """Advantage of a correct and of an incorrect rollout in a group with ``X`` correct of ``N``.

    Same numbers as normalizing the group's reward vector (theory.md section 3); zero for a group
    whose rewards are all equal.
    """
    X = np.asarray(X, dtype=float)
    x = X / N
    mean = r_incorrect + (r_correct - r_incorrect) * x
    dc = r_correct - mean
    dw = r_incorrect - mean
    active = (X > 0) & (X < N)
    if advantage in ("grpo", "grpo-bessel"):
        std = (r_correct - r_incorrect) * np.sqrt(x * (1.0 - x))
        if advantage == "grpo-bessel" and N > 1:
            std = std * np.sqrt(N / (N - 1))
        with np.errstate(divide="ignore", invalid="ignore"):
            ac = np.where(active, dc / (std + eps), 0.0)
            aw = np.where(active, dw / (std + eps), 0.0)
    elif advantage == "mean":
        ac, aw = dc, dw
    elif advantage == "rloo":
        f = N / (N - 1) if N > 1 else 0.0
        ac, aw = f * dc, f * dw
    else:
        raise ValueError(f"advantage must be one of {ADVANTAGES}; got {advantage!r}")
    return ac, aw


def _per_action_advantage(
    counts: np.ndarray, correct: np.ndarray, gamma: float, advantage: str, r_c: float, r_w: float
) -> np.ndarray:
    """Focal-weighted advantage A(k) of every action, shape of ``counts``."""
    N = int(round(float(counts.sum(axis=-1).flat[0])))
    X = counts @ correct.astype(counts.dtype)
    ac, aw = binary_advantages(X, N, advantage, r_c, r_w)
    g = (1.0 - X / N) ** gamma
    return np.where(correct, (g * ac)[..., None], (g * aw)[..., None])


def logprob_gradient(
    p: np.ndarray,
    counts: np.ndarray,
    correct: np.ndarray,
    gamma: float = 0.0,
    advantage: str = "grpo",
    r_correct: float = 1.0,
    r_incorrect: float = 0.0,
) -> np.ndarray:
    """Gradient (ascent direction) of ``(1/N) sum_i g A_i log p(a_i)`` with respect to the logits.

    ``d/dz_k = (1/N) (n_k A(k) - p_k sum_i A_i)``; the second term is zero for every advantage
    here (they sum to zero in the group) but is computed, as autograd would.
    """
    N = counts.sum(axis=-1, keepdims=True)
    A = _per_action_advantage(counts, correct, gamma, advantage, r_correct, r_incorrect)
    nA = counts * A
    return (nA - p * nA.sum(axis=-1, keepdims=True)) / N


def linear_gradient(
    p: np.ndarray,
    counts: np.ndarray,
    correct: np.ndarray,
    gamma: float = 0.0,
    advantage: str = "mean",
    r_correct: float = 1.0,
    r_incorrect: float = -1.0,
) -> np.ndarray:
    """Gradient (ascent direction) of the linear surrogate ``(1/N) sum_i g A_i p(a_i)``.

    ``d/dz_k = (1/N) p_k (n_k A(k) - sum_j n_j A(j) p_j)`` (softmax Jacobian).
    """
    N = counts.sum(axis=-1, keepdims=True)
    A = _per_action_advantage(counts, correct, gamma, advantage, r_correct, r_incorrect)
    nAp = counts * A * p
    return (nAp - p * nAp.sum(axis=-1, keepdims=True)) / N


@dataclass
class AdamState:
    """First and second moments and the step counter of Adam."""

    m: np.ndarray
    v: np.ndarray
    t: int = 0

    @classmethod
    def zeros_like(cls, z: np.ndarray) -> AdamState:
        return cls(np.zeros_like(z), np.zeros_like(z), 0)


def adam_update(
    z: np.ndarray,
    ascent: np.ndarray,
    state: AdamState,
    lr: float,
    beta1: float = 0.9,
    beta2: float = 0.999,
    eps: float = 1e-8,
    weight_decay: float = 0.0,
) -> np.ndarray:
    """One AdamW step (PyTorch's formulas) MAXIMIZING the objective; updates ``state`` in place.

    The loss gradient is ``-ascent``; decoupled weight decay ``z <- z (1 - lr wd)`` comes first.
    """
    grad = -ascent
    state.t += 1
    state.m = beta1 * state.m + (1.0 - beta1) * grad
    state.v = beta2 * state.v + (1.0 - beta2) * grad * grad
    bc1 = 1.0 - beta1**state.t
    bc2 = 1.0 - beta2**state.t
    z = z * (1.0 - lr * weight_decay)
    return z - lr * (state.m / bc1) / (np.sqrt(state.v / bc2) + eps)


def _metrics(z: np.ndarray, correct: np.ndarray) -> np.ndarray:
    return softmax(z)[..., correct].sum(axis=-1)


def run_tabular_logprob(
    logits: np.ndarray,
    correct: np.ndarray,
    N: int,
    steps: int,
    seeds: int,
    lr: float,
    gamma: float = 0.0,
    advantage: str = "grpo",
    optimizer: str = "sgd",
    r_correct: float = 1.0,
    r_incorrect: float = 0.0,
    seed: int = 0,
    log_every: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Log-prob GRPO on one small tabular prompt, vectorized over ``seeds`` independent runs.

    Returns ``(final_logits[seeds, K], q_pos[n_logged, seeds])``; Q_pos is logged at step 0 and
    every ``log_every`` steps (only at the end when ``log_every`` is 0).
    """
    rng = np.random.default_rng(seed)
    correct = np.asarray(correct, dtype=bool)
    z = np.tile(np.asarray(logits, dtype=float), (seeds, 1))
    state = AdamState.zeros_like(z) if optimizer != "sgd" else None
    logged = [_metrics(z, correct)]
    for t in range(1, steps + 1):
        p = softmax(z)
        counts = rng.multinomial(N, p)
        grad = logprob_gradient(p, counts, correct, gamma, advantage, r_correct, r_incorrect)
        if state is None:
            z = z + lr * grad
        else:
            z = adam_update(z, grad, state, lr)
        if (log_every and t % log_every == 0) or t == steps:
            logged.append(_metrics(z, correct))
    return z, np.asarray(logged)


def run_linear(
    logits: np.ndarray,
    correct: np.ndarray,
    N: int,
    steps: int,
    lr: float,
    gamma: float = 0.0,
    advantage: str = "mean",
    optimizer: str = "adamw",
    weight_decay: float = 0.0,
    r_correct: float = 1.0,
    r_incorrect: float = -1.0,
    seed: int = 0,
    counts_fn=None,
) -> np.ndarray:
    """The paper's categorical simulation (appendix J) for one seed; returns the final logits.

    Linear surrogate with mean-centred advantages by default. Sampling draws ``N`` actions with
    ``Generator.choice`` and counts them with ``bincount``; ``counts_fn(t, p)``, if given, replaces
    it (tests drive two implementations with the same samples).
    """
    rng = np.random.default_rng(seed)
    correct = np.asarray(correct, dtype=bool)
    K = correct.size
    z = np.asarray(logits, dtype=float).copy()
    state = AdamState.zeros_like(z) if optimizer != "sgd" else None
    for t in range(1, steps + 1):
        p = softmax(z)
        if counts_fn is None:
            counts = np.bincount(rng.choice(K, size=N, p=p), minlength=K).astype(float)
        else:
            counts = np.asarray(counts_fn(t, p), dtype=float)
        grad = linear_gradient(p, counts, correct, gamma, advantage, r_correct, r_incorrect)
        if state is None:
            z = z + lr * grad
        else:
            z = adam_update(z, grad, state, lr, weight_decay=weight_decay)
    return z
