"""Where the simulator's float32 mode (``SimConfig.precision = "float32"``) can be trusted.

:func:`check_float32` refuses, with a one-line ValueError naming the option and its value, the
configs whose float32 arithmetic would silently differ from float64 in kind rather than in the
last bits (docs/precision.md):

* **softmax span**: every correct action's weight ``exp(z_k - max z)`` must be a normal float32
  with full 24-bit precision. The float32 exp gives 0 below ``-87`` (``exp(-87) = 1.6e-38``, the
  smallest normal float32 is ``1.2e-38``); the initial span ``max z - min_{k correct} z_k`` must be
  at most :data:`MAX_SPAN32` = 80 nats, which leaves ``e^7 ~ 1100``-fold headroom for the correct
  actions to fall during training before their weights could underflow.
* **update resolution**: a step must be able to move a logit. No step moves any logit by more
  than ``lr * G`` (Adam / AdamW: ``G = max(1, (1 - b1) / sqrt(1 - b2))``, the bound of the
  normalized step, plus ``wd max|z|`` for AdamW's decay; SGD: ``G = 2 max|A| w_max + wd max|z|``,
  a bound of ``|dJ/dz_i|``, infinite for PPO ratios without a bound); if ``lr * G`` is below half an
  ulp of float32 at the largest ``|z_i|``, the updates of the largest logits round away (a
  logit of 0 moves at any step size, so the smallest ``|z_i|`` would check nothing).
* **Adam eps**: ``adam_eps`` must be a normal float32 (>= 1.2e-38), or ``sqrt(v) + eps`` can be
  0 for an action whose moments underflow; ``beta1`` and ``beta2`` must stay below 1 in float32
  (``1 - beta < 2**-25`` rounds to 1: the moments would never update).
* **the logits themselves**: each must be a float32 number (``|z| <= 3.4e38``) and rounding them
  to float32 must move none by more than :data:`MAX_ROUNDING32` = 1e-5 nats (a large common
  offset, e.g. logits ``1e8, 1e8 + 1``, would otherwise round to equal values and change the
  initial policy).

Sums need no K bound: weights are float32, but their sums (the normalizer, the CDF's block
totals) add blocks of 64 weights in float32 (8 lanes of 8 terms: <= 11 roundings, ~7e-7
relative) and accumulate the block totals in float64, so the relative error of a sum does not
grow with K (a float32 running sum over 128,000 weights could lose ~1e-3 of the mass).
"""

from __future__ import annotations

import numpy as np

from .._validate import fail

#: Largest initial span ``max z - min z_correct`` (nats) accepted in float32 (see module doc).
MAX_SPAN32 = 80.0
#: Largest change of an initial logit by its rounding to float32 (nats) accepted.
MAX_ROUNDING32 = 1e-5
_TINY32 = float(np.finfo(np.float32).tiny)
_MAX32 = float(np.finfo(np.float32).max)


def check_float32(cfg, z0: np.ndarray, correct: np.ndarray, adv_c, adv_w) -> np.ndarray:
    """The float32 initial logits of ``cfg``; refuse ``cfg`` in float32 if its logits, softmax
    span, step size or Adam parameters cannot be trusted there.

    ``z0`` are the (float64) initial logits, ``correct`` the uint8 mask of correct actions,
    ``adv_c`` / ``adv_w`` the per-X advantages (focal weight included).
    """
    z64 = np.asarray(z0, dtype=np.float64)
    big = float(np.abs(z64).max())
    if big > _MAX32:
        fail("precision", "float32", f"float64 for logits up to {big:.4g} (beyond float32's "
             f"{_MAX32:.3g})")  # fmt: skip
    z32 = z64.astype(np.float32)
    moved = float(np.abs(z32.astype(np.float64) - z64).max())
    if moved > MAX_ROUNDING32:
        fail("precision", "float32", f"float64 for these logits: rounding them to float32 moves "
             f"one by {moved:.3g} > {MAX_ROUNDING32:g} nats (a large common offset?)")  # fmt: skip
    z = z32.astype(np.float64)
    zc = z[correct == 1]
    span = float(z.max() - zc.min())
    if span > MAX_SPAN32:
        fail(
            "precision",
            "float32",
            f"float64 for logits spanning {span:.4g} > {MAX_SPAN32:g} nats from the max to a "
            "correct action (its float32 probability would underflow)",
        )
    if cfg.optimizer != "sgd" and cfg.adam_eps < _TINY32:
        fail("precision", "float32", f"float64 for adam_eps = {cfg.adam_eps:g} < {_TINY32:.3g}")
    if cfg.optimizer != "sgd":
        for name in ("beta1", "beta2"):
            b = getattr(cfg, name)
            if b > 0.0 and np.float32(b) == 1.0:
                fail("precision", "float32", f"float64 for {name} = {b!r} (1 in float32)")
    zabs = float(np.abs(z).max())
    if cfg.optimizer == "sgd":
        a = float(max(np.max(np.abs(adv_c)), np.max(np.abs(adv_w))))
        _, hi = cfg.clip_bounds()
        if cfg.algo == "cispo":
            w_max = 1.0 + hi
        elif cfg.inner_updates == 1:
            w_max = 1.0  # r = 1 at the first update
        else:  # PPO ratios of negative advantages are unclipped above, unless dual-clipped
            w_max = max(1.0 + hi, cfg.dual_clip) if cfg.dual_clip is not None else np.inf
        G = 2.0 * a * w_max + cfg.weight_decay * zabs
    else:
        # |m_hat / sqrt(v_hat)| <= max(1, (1 - b1) / sqrt(1 - b2)) (Kingma & Ba, section 2.1)
        G = max(1.0, (1.0 - cfg.beta1) / np.sqrt(1.0 - cfg.beta2))
        if cfg.optimizer == "adamw":
            G += cfg.weight_decay * zabs
    half_ulp = 0.5 * float(np.spacing(np.float32(zabs)))
    if cfg.lr * G < half_ulp:
        fail(
            "precision",
            "float32",
            f"float64 for lr = {cfg.lr:g}: every step (<= {cfg.lr * G:.3g}) is below half a "
            f"float32 ulp ({half_ulp:.3g}) of the largest logits (|z| = {zabs:g})",
        )
    return z32
