"""Which kernel path a simulator config takes: the sum tree or the dense loop
(:func:`choose_backend`, ``SimConfig.backend``), and on the dense path which sampler
(:func:`choose_sampler`, ``SimConfig.sampler``)."""

from __future__ import annotations

import math

import numpy as np

from .config import SimConfig

#: K from which ``backend="auto"`` always uses the sum tree for eligible configs; below it the tree
#: is used when its O(N log K) sampling is not much dearer than the dense path's O(N + K).
SUMTREE_MIN_K = 16_384


def _zero_sum(adv_c: np.ndarray, adv_w: np.ndarray, N: int) -> bool:
    X = np.arange(N + 1)
    s = X * adv_c + (N - X) * adv_w
    scale = np.maximum(np.abs(X * adv_c) + np.abs((N - X) * adv_w), 1.0)
    return bool(np.all(np.abs(s) <= 1e-12 * scale))


def choose_backend(cfg: SimConfig, adv_c: np.ndarray, adv_w: np.ndarray) -> str:
    """``"sumtree"`` or ``"dense"`` for ``cfg`` (see ``SimConfig.backend``)."""
    if cfg.backend == "dense" or cfg.precision == "float32":  # float32: dense path only
        return "dense"
    from .records import dense_scheme

    if dense_scheme(cfg.training_scheme()):  # per-rollout advantages or regularizers
        return "dense"
    ok = cfg.sumtree_eligible() and _zero_sum(adv_c, adv_w, cfg.N)
    if cfg.backend == "sumtree":
        if not ok:
            from .._validate import fail

            label = f"scheme {cfg.scheme!r}" if cfg.scheme else f"advantage {cfg.advantage!r}"
            fail("backend", "sumtree", f"dense for {label} (not zero-sum)")
        return "sumtree"
    if not ok or cfg.sampler == "sorted":
        return "dense"
    logk = max(1, math.ceil(math.log2(cfg.K)))
    cheap = cfg.N * logk <= 4 * (cfg.N + cfg.K)
    return "sumtree" if cfg.K >= SUMTREE_MIN_K or cheap else "dense"


def choose_sampler(cfg: SimConfig) -> str:
    """``"iid"`` (O(N log K), no logarithms) or ``"sorted"`` (O(N + K)) for the dense path."""
    if cfg.sampler != "auto":
        return cfg.sampler
    logk = math.ceil(math.log2(cfg.K))
    # binary search costs ~log2 K branchy probes per draw; the merge costs a log per draw + K
    return "iid" if logk <= 4 or cfg.N * logk <= cfg.K else "sorted"
