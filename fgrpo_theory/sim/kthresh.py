"""Equal-progress thresholds in the simulator's run loop (``Logging.thresholds``, theory.md
section 11): each run records, per threshold t, the first step whose Q_pos is >= t and the
metrics row of that step (``thr_out``, ``thr_step``; step -1 = not reached), without any
per-step logging.

The run loop (:func:`~.kernels.run_steps`) keeps a cheap Q_pos (the dense path: the correct
share of the step's ``exp(z - max)``; the sum-tree path: a compensated running sum of the
correct leaves, :func:`_tree_correct_sum`, over the tree's total) and calls :func:`_thr_check`,
the exact metrics pass, only where the cheap value is within a margin (:data:`THR_MARGIN`,
:data:`THR_MARGIN32`) of the next pending threshold, so the recorded step is the one the exact
Q_pos decides.
"""

from __future__ import annotations

import numpy as np

from ._jit import jit_fast, jit_fast_inline
from .kalloc import zeros
from .kcore import _kadd
from .kmetrics import M_QPOS, _metrics

#: The cheap per-step Q_pos (uncompensated sums of the step's exp(z - max)) selects the steps at
#: which the exact Q_pos of :func:`_metrics` decides a threshold: those with cheap Q_pos >= t -
#: THR_MARGIN. Its error (a few ulps per summed term, <= 1e-8 relative at K = 1e8) is far below.
THR_MARGIN = 1e-6
#: The same for float32 weights (``precision = "float32"``): each is within 2 float32 ulps
#: (2.4e-7 relative) of exp(z - max) and their block sums within ~7e-7, so 1e-5 is ample.
THR_MARGIN32 = 1e-5


@jit_fast_inline
def _thr_pending(thr_step):
    """Index of the first threshold not reached yet (thresholds are sorted ascending)."""
    n = 0
    while n < thr_step.shape[0] and thr_step[n] >= 0:
        n += 1
    return n


@jit_fast
def _thr_check(z, correct, submask, p0, sum_p0c, thresholds, ti, step, scratch, thr_out,
               thr_step):  # fmt: skip
    """Exact metrics of softmax(z) (the state after ``step``) into ``scratch``; every pending
    threshold its Q_pos reaches gets ``step`` and the row. Returns the next pending index."""
    _metrics(z, correct, submask, p0, sum_p0c, scratch)
    q = scratch[M_QPOS]
    n_thr = thresholds.shape[0]
    while ti < n_thr and q >= thresholds[ti]:
        thr_step[ti] = step
        for j in range(scratch.shape[0]):
            thr_out[ti, j] = scratch[j]
        ti += 1
    return ti


@jit_fast
def _tree_correct_sum(tree, P, correct):
    """Compensated sum of the correct leaves of the sum tree: ``(sum, compensation)``."""
    acc = zeros(1, np.float64)
    cmp = zeros(1, np.float64)
    for k in range(correct.shape[0]):
        if correct[k]:
            _kadd(acc, cmp, 0, tree[P + k])
    return acc[0], cmp[0]
