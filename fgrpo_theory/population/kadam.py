"""Adam steps of the prompts outside the batch (the population kernel's idle optimizer steps).

With one Adam state over every parameter (``adam_state = "global"``), a prompt outside the batch
still moves through its moments at every optimizer step. These loops are most of an Adam run's
cost at the default sizes, so:

* the step's scalars (``lr / (1 - b1^t)``, ``1 / sqrt(1 - b2^t)``) are computed once per step of
  the run (:func:`adam_table`), with the expressions of
  :func:`fgrpo_theory.sim.kcore._adam_scalars` in strict IEEE arithmetic, instead of once per
  prompt and step (two integer powers each);
* a lazy catch-up (:func:`_adam_catchup`) copies the elements with Adam state into contiguous
  buffers, replays the idle steps there (a loop LLVM vectorizes) and writes them back; for
  Adam within the table the steps' loop is written out in one function
  (:func:`_catchup_flat`), not one call per step (measured at the default population size,
  Adam, 8 seeds, one thread, load ~17: float32 0.129-0.138 s -> 0.115-0.121 s, float64
  0.158-0.162 s -> 0.145-0.147 s; every float32 and float64 bitcheck population config and the
  default-size runs hash the same).

Every element's arithmetic is :func:`fgrpo_theory.sim.kcore._adam_move`'s, in strict IEEE
arithmetic (``jit_exact``: with fast-math LLVM may fuse ``sqrt(v) * isb + eps`` into an FMA in
the vectorized body but not in the scalar remainder), with the same scalars, so the results equal
the eager per-step updates bit for bit (``tests/test_population.py``).
"""

from __future__ import annotations

import numpy as np

from ..sim._jit import jit_exact, jit_exact_inline
from ..sim.kalloc import zeros
from ..sim.kcore import _adam_move, _adam_scalars
from ..sim.kfloat import _is_f32

#: the scalar table covers runs of up to this many optimizer steps (longer runs compute the
#: scalars per step, as before: same values)
MAX_TABLE = 1 << 20


@jit_exact
def adam_table(lr, wd, decoupled, b1, b2, eps, T):
    """``tab[t] = (lr / (1 - b1^t), 1 / sqrt(1 - b2^t))`` for ``t = 1 .. T`` (row 0 unused):
    the two step-dependent scalars of :func:`_adam_scalars`, computed by it."""
    tab = zeros((T + 1, 2), np.float64)
    for t in range(1, T + 1):
        sc = _adam_scalars(lr, wd, decoupled, b1, b2, eps, t)
        tab[t, 0] = sc[5]
        tab[t, 1] = sc[6]
    return tab


@jit_exact
def _scalars_at(tab, lr, wd, decoupled, b1, b2, eps, t):
    """:func:`_adam_scalars` of step ``t``, the step-dependent two read from ``tab`` when it
    covers ``t``."""
    if t < tab.shape[0]:  # the t-free scalars as _adam_scalars writes them
        decay = 1.0 - lr * wd if decoupled else 1.0
        l2 = 0.0 if decoupled else wd
        return b1, b2, 1.0 - b1, 1.0 - b2, eps, tab[t, 0], tab[t, 1], decay, l2
    return _adam_scalars(lr, wd, decoupled, b1, b2, eps, t)


@jit_exact
def _adam_idle(z, lr, wd, decoupled, b1, b2, eps, t, mm, vv, tab):
    """Adam step of parameters with zero surrogate gradient (a prompt outside the batch).

    Float32 parameters (``precision = "float32"``): the scalars rounded to float32 once and the
    loop in float32, as :func:`fgrpo_theory.sim.kfloat._adam32` with a zero surrogate gradient
    (AdamW's decay part of the one rounded increment); a compile-time branch, so the float64
    code is the one above alone."""
    sc = _scalars_at(tab, lr, wd, decoupled, b1, b2, eps, t)
    if _is_f32(z):
        b1f = np.float32(sc[0])
        b2f = np.float32(sc[1])
        a1f = np.float32(sc[2])
        a2f = np.float32(sc[3])
        epsf = np.float32(sc[4])
        stepf = np.float32(sc[5])
        isbf = np.float32(sc[6])
        lwdf = np.float32(lr * wd) if decoupled else np.float32(0.0)
        l2f = np.float32(sc[8])
        for i in range(z.shape[0]):
            zi = z[i]
            g = l2f * zi
            m = b1f * mm[i] + a1f * g
            v = b2f * vv[i] + a2f * g * g
            mm[i] = m
            vv[i] = v
            z[i] = zi - (lwdf * zi + stepf * m / (np.sqrt(v) * isbf + epsf))
        return
    l2 = sc[8]
    for i in range(z.shape[0]):
        zi = z[i]
        _adam_move(z, mm, vv, i, zi, l2 * zi, sc)


@jit_exact
def _adam_catchup(z, mm, vv, idx, n, t0, t1, lr, wd, decoupled, b1, b2, eps, tab, bz, bm, bv):
    """Replay the idle Adam steps ``t0 + 1 .. t1`` of a prompt outside the batch, lazily.

    Only the elements ``idx[:n]`` with Adam state (ever a nonzero gradient) are replayed: an
    element whose moments are zero stays exactly where it is when its gradient is zero (no weight
    decay: the caller uses this only for ``wd == 0``). They are copied to the buffers ``bz``,
    ``bm``, ``bv`` (length >= n), stepped there (steps the outer loop) and copied back; all
    elements of a row are contiguous already, so a full row (``n`` = its length) is stepped in
    place.
    """
    if t1 <= t0 or n == 0:
        return
    if t1 < tab.shape[0] and not decoupled:  # (AdamW is never lazy: it decays every element)
        _catchup_flat(z, mm, vv, idx, n, t0, t1, wd, b1, b2, eps, tab, bz, bm, bv)
        return
    if n == z.shape[0]:
        for t in range(t0 + 1, t1 + 1):
            _adam_idle(z, lr, wd, decoupled, b1, b2, eps, t, mm, vv, tab)
        return
    for j in range(n):
        i = idx[j]
        bz[j] = z[i]
        bm[j] = mm[i]
        bv[j] = vv[i]
    for t in range(t0 + 1, t1 + 1):
        _adam_idle(bz[:n], lr, wd, decoupled, b1, b2, eps, t, bm[:n], bv[:n], tab)
    for j in range(n):
        i = idx[j]
        z[i] = bz[j]
        mm[i] = bm[j]
        vv[i] = bv[j]


@jit_exact
def _catchup_flat(z, mm, vv, idx, n, t0, t1, wd, b1, b2, eps, tab, bz, bm, bv):
    """:func:`_adam_catchup` for Adam (not AdamW) when the table covers ``t1``, with the idle
    steps' loop written out here instead of one call of :func:`_adam_idle` per step (at the
    default population size the calls' set-up, a slice of each buffer and the scalars, cost
    more than their few elements' arithmetic). Each element's operations are
    :func:`_adam_idle`'s, float32 or float64, in the same order, with the same scalars, in
    strict IEEE arithmetic: the same bits (``tests/test_population.py``,
    ``benchmarks/bitcheck.py``)."""
    full = n == z.shape[0]
    if full:  # a full row in place, else its elements with Adam state in the buffers
        wz, wm, wv = z, mm, vv
    else:
        for j in range(n):
            i = idx[j]
            bz[j] = z[i]
            bm[j] = mm[i]
            bv[j] = vv[i]
        wz, wm, wv = bz, bm, bv
    # one call site: _steps_idle is inlined, both precisions' loops in each copy
    _steps_idle(wz, wm, wv, n, t0, t1, wd, b1, b2, eps, tab)
    if full:
        return
    for j in range(n):
        i = idx[j]
        z[i] = bz[j]
        mm[i] = bm[j]
        vv[i] = bv[j]


@jit_exact_inline
def _steps_idle(z, mm, vv, n, t0, t1, wd, b1, b2, eps, tab):
    """Idle Adam steps ``t0 + 1 .. t1`` of ``z[:n]`` (gradient ``wd z``, no decoupled decay):
    :func:`_adam_idle`'s loops."""
    if _is_f32(z):
        b1f = np.float32(b1)
        b2f = np.float32(b2)
        a1f = np.float32(1.0 - b1)
        a2f = np.float32(1.0 - b2)
        epsf = np.float32(eps)
        lwdf = np.float32(0.0)
        l2f = np.float32(wd)
        for t in range(t0 + 1, t1 + 1):
            stepf = np.float32(tab[t, 0])
            isbf = np.float32(tab[t, 1])
            for i in range(n):
                zi = z[i]
                g = l2f * zi
                m = b1f * mm[i] + a1f * g
                v = b2f * vv[i] + a2f * g * g
                mm[i] = m
                vv[i] = v
                z[i] = zi - (lwdf * zi + stepf * m / (np.sqrt(v) * isbf + epsf))
        return
    a1 = 1.0 - b1
    a2 = 1.0 - b2
    for t in range(t0 + 1, t1 + 1):
        step = tab[t, 0]
        isb = tab[t, 1]
        for i in range(n):
            zi = z[i]
            g = wd * zi
            m = b1 * mm[i] + a1 * g
            v = b2 * vv[i] + a2 * g * g
            mm[i] = m
            vv[i] = v
            z[i] = zi * 1.0 - step * m / (np.sqrt(v) * isb + eps)
