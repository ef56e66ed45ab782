"""Regularizers on a softmax policy: their exact value and logit gradient, and the sampled
estimators trainers use (theory.md section 15; the paper's Table 3 controls GRPO-H and GRPO-KL).

On a softmax policy p = softmax(z) (last axis) with reference q = softmax(z_ref):

- entropy bonus (GRPO-H), added to the objective with coefficient beta:
      H(p) = -sum_i p_i log p_i,          dH/dz_i = -p_i (log p_i + H);
- KL penalty to the reference (GRPO-KL; DeepSeekMath eq. (3)-(4)), subtracted with beta:
      KL(p || q) = sum_i p_i (log p_i - log q_i),   dKL/dz_i = p_i (log p_i - log q_i - KL);
- its k3 estimator on a sampled action a (Schulman 2020, "Approximating KL divergence"; the
  per-token KL of GRPO): with rho = q(a) / p(a),
      k3 = rho - log rho - 1 >= 0,  E_p[k3] = KL(p || q),  d k3 / d log p(a) = 1 - rho,
  so the loss beta * mean_j k3_j adds beta (rho_j - 1) to sample j's advantage (stop-gradient
  weight on dlog p(a_j)). Its expected gradient, E_p[(1 - rho) dlog p] = -sum_i q_i dlog p_i,
  is the gradient of the REVERSE divergence KL(q || p), not of KL(p || q) (both vanish at
  p = q); the simulators take either, by the ``estimator`` parameter of ``kl``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._validate import fail

__all__ = ["entropy_term", "kl_term", "k3_estimate", "k3_logp_gradient"]


def _log_softmax(z: np.ndarray) -> np.ndarray:
    m = np.max(z, axis=-1, keepdims=True)
    s = z - m
    return s - np.log(np.sum(np.exp(s), axis=-1, keepdims=True))


def _logits(name: str, z: Any) -> np.ndarray:
    arr = np.asarray(z, dtype=float)
    if arr.ndim == 0 or arr.shape[-1] < 1:
        fail(name, z, "an array of logits (last axis = actions)")
    if not np.all(np.isfinite(arr)):
        fail(name, arr[~np.isfinite(arr)].flat[0], "finite logits")
    return arr


def entropy_term(z: Any) -> tuple[Any, np.ndarray]:
    """Entropy H(softmax(z)) and its gradient dH/dz (last axis = actions).

    Returns ``(H, grad)``: H has the batch shape (a float for one policy), grad the shape of z.
    """
    z = _logits("logits", z)
    lp = _log_softmax(z)
    p = np.exp(lp)
    H = -np.sum(p * lp, axis=-1, keepdims=True)
    grad = -p * (lp + H)
    H = H[..., 0]
    return (float(H) if H.ndim == 0 else H), grad


def kl_term(z: Any, z_ref: Any) -> tuple[Any, np.ndarray]:
    """KL(softmax(z) || softmax(z_ref)) and its gradient with respect to z (last axis)."""
    z = _logits("logits", z)
    zr = _logits("reference logits", z_ref)
    if zr.shape[-1] != z.shape[-1]:
        fail("reference logits", f"{zr.shape[-1]} actions", f"{z.shape[-1]} actions like logits")
    lp = _log_softmax(z)
    lq = _log_softmax(zr)
    p = np.exp(lp)
    KL = np.sum(p * (lp - lq), axis=-1, keepdims=True)
    grad = p * (lp - lq - KL)
    KL = KL[..., 0]
    return (float(KL) if KL.ndim == 0 else KL), grad


def k3_estimate(logp: Any, logp_ref: Any) -> Any:
    """The k3 estimate rho - log rho - 1 (rho = p_ref / p) of KL(p || p_ref) per sample."""
    lr = np.asarray(logp_ref, dtype=float) - np.asarray(logp, dtype=float)
    return np.expm1(lr) - lr


def k3_logp_gradient(logp: Any, logp_ref: Any) -> Any:
    """d k3 / d log p of a sample: 1 - p_ref / p (the loss's weight on dlog p(a))."""
    return -np.expm1(np.asarray(logp_ref, dtype=float) - np.asarray(logp, dtype=float))
