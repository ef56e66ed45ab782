"""The dense path at small K: a lean run loop for the configs most users run at K <= 16.

Taken (:func:`small_eligible`) by float64 logits, K <= ``SMALL_K``, the i.i.d. sampler, one
inner update, table schemes (no likelihood-aware advantages, no regularizers) and no Q_pos
thresholds; everything else (dynamic sampling, subsets, every optimizer and surrogate, clipping
settings) is handled. The numbers are the general loop's (:func:`~.kernels.run_steps`) bit for
bit (``tests/test_sim_small.py``): the same libm ``exp`` per logit and sum order, the same
inverse-CDF count over the same uniforms, the same coefficient helper; the SGD and Adam element
loops repeat, with explicit FMAs, the operations LLVM compiled :func:`~.kcore._sgd` and
:func:`~.kcore._adam` to (Adam: for K < 8, where ``_adam`` runs its scalar loop; above, the
loop calls ``_adam``), and Adam's step-dependent scalars are computed once per step for every
run of a call instead of once per step and run.

A block of more than ``runner.DIRECT_RUNS`` runs of SGD, or of Adam / AdamW below K = 8, takes
:mod:`.klanes` instead where its replica of libm's ``exp`` passed its self-check: the same
computation with the runs in SIMD lanes (1.6-1.8x JAX at K = 6 where this loop was 0.5-0.8x).

Where the general loop spends its time at K = 6 (CPU time per seed-step, K = 6, N = 8, one
thread, load ~10): the 6 libm ``exp`` calls about 33 ns, the 8 draws about 60 ns (the 8 uniforms
13 ns, the inverse-CDF counts 15 ns, the tally of distinct actions and counts, a chain of
dependent loads and stores, 31 ns); the rest is the update (``_adam`` also increfs its five
arrays, an atomic each, and raises two integer powers per call), the per-step dispatch on
features the config does not use and the reference counting of the helpers' arrays, which
this loop removes.
"""

from __future__ import annotations

import numpy as np

from ._jit import _fma, jit_batch, jit_exact, jit_exact_inline, jit_run_exact
from .kalloc import empty, zeros
from .kcore import (
    OPT_ADAMW,
    OPT_SGD,
    _adam,
    _coefficients,
    _nonzero_below,
    _tally,
)
from .kernels import _count_tail, _first_row, _log_row
from .records import I_ACTIVE, I_GROUPS, I_LOG, I_RESAMPLES, I_TOPT
from .rng import next_uniform

#: largest K the small-K loop takes (the i.i.d. sampler's branch-free plain CDF covers K <= 16)
SMALL_K = 16
#: below this K, :func:`~.kcore._adam` runs its scalar loop only (its vector body starts at 8),
#: which :func:`_adam_small` reproduces; from 8 to ``SMALL_K`` the loop calls ``_adam`` itself
ADAM_SCALAR_K = 8


@jit_exact
def adam_rows(b1, b2, t_lo, t_hi):
    """``tab[t - t_lo]`` = ``(1 - b1^t, sqrt(1 - b2^t), 1 / sqrt(1 - b2^t))`` for ``t = t_lo ..
    t_hi``: Adam's step-dependent scalars as :func:`~.kcore._adam` computes them (Numba's
    integer power, strict IEEE), once per step for every run of a call."""
    tab = empty((t_hi - t_lo + 1, 3), np.float64)
    for t in range(t_lo, t_hi + 1):
        r = t - t_lo
        bc1 = 1.0 - b1**t
        sb = np.sqrt(1.0 - b2**t)
        tab[r, 0] = bc1
        tab[r, 1] = sb
        tab[r, 2] = 1.0 / sb
    return tab


# The element loops below repeat, operation for operation, the machine code LLVM makes of
# kcore._sgd and kcore._adam (fast-math, reassociated: read from their assembly; fused
# multiply-adds where it fused, separate roundings where it did not), in strict IEEE arithmetic
# with explicit FMAs, so they give the same bits without a call, its reference counting (_adam
# increfs its five arrays per call) or its per-call scalars. tests/test_sim_small.py checks the
# small loop against the general one bit for bit; small_eligible() takes this path only on a
# machine with FMA instructions (where the kernels' own code fuses).


@jit_exact_inline
def _sgd_elem(zi, ei, pc, ci, inv_n, lr, wd):
    """One logit of kcore._sgd: ``z - lr ((e pC - c) / N + wd z)``, ``pC = C inv_s``."""
    a = _fma(ei, pc, -ci)
    b = _fma(inv_n, a, zi * wd)
    return _fma(-lr, b, zi)


@jit_exact_inline
def _sgd_small(z, e, inv_s, cvec, C, inv_n, lr, wd):
    """kcore._sgd over the K logits of one run (:func:`_sgd_elem`)."""
    pc = C * inv_s
    for i in range(z.shape[0]):
        z[i] = _sgd_elem(z[i], e[i], pc, cvec[i], inv_n, lr, wd)


@jit_exact_inline
def _adam_elem(zi, ei, pc, ci, inv_n, lr, l2, decay, b1, b2, eps, bc1, sb, rsb, mi, vi, divide):
    """One logit of kcore._adam's scalar loop (K < 8): ``g = (e pC - c) / N + l2 z``,
    ``m = b1 (m - g) + g``, ``v = b2 (v - g^2) + g^2``, ``z = decay z - lr m / ((sqrt(v) / sb +
    eps) bc1)``; returns ``(z, m, v)``. ``divide``: the first element of an odd K, which divides
    by ``sb`` where the others multiply by ``rsb = 1 / sb``."""
    t1 = _fma(-pc, ei, ci)
    g = _fma(-inv_n, t1, zi * l2)
    m = _fma(b1, mi - g, g)
    gg = g * g
    v = _fma(b2, vi - gg, gg)
    if divide:
        den = (np.sqrt(v) / sb + eps) * bc1
    else:
        den = _fma(np.sqrt(v), rsb, eps) * bc1
    return _fma(decay, zi, -((m * lr) / den)), m, v


@jit_exact_inline
def _adam_small(z, e, inv_s, cvec, C, inv_n, lr, l2, decay, b1, b2, eps, bc1, sb, rsb, mm, vv):
    """kcore._adam's scalar loop (K < 8) over the K logits of one run (:func:`_adam_elem`)."""
    pc = C * inv_s
    K = z.shape[0]
    for i in range(K):
        divide = i == 0 and K % 2 == 1
        z[i], mm[i], vv[i] = _adam_elem(
            z[i], e[i], pc, cvec[i], inv_n, lr, l2, decay, b1, b2, eps, bc1, sb, rsb, mm[i],
            vv[i], divide,
        )  # fmt: skip


@jit_exact_inline
def alg_terms(alg):
    """``(dyn, max_res, keep, rule, algo, zero_sum, dual_c, lo_b, hi_b)`` of the
    :class:`~.records.Algorithm` record, ``lo_b = 1 - clip_lo``, ``hi_b = 1 + clip_hi``."""
    return (alg.dyn, alg.max_res, alg.keep, alg.rule, alg.algo, alg.zero_sum, alg.dual_c,
            1.0 - alg.clip_lo, 1.0 + alg.clip_hi)  # fmt: skip


@jit_exact_inline
def opt_terms(opt):
    """``(sgd, lr, wd, b1, b2, eps, decoupled, decay, l2)`` of the :class:`~.records.Optimizer`
    record: AdamW decays the logits by ``decay = 1 - wd lr`` (one FMA), Adam adds ``l2 = wd``
    times the logits to the gradient."""
    decoupled = opt.kind == OPT_ADAMW
    decay = _fma(-opt.wd, opt.lr, 1.0) if decoupled else 1.0
    l2 = 0.0 if decoupled else opt.wd
    return (opt.kind == OPT_SGD, opt.lr, opt.wd, opt.b1, opt.b2, opt.eps, decoupled, decay, l2)


@jit_run_exact
def run_small(prob, log, alg, opt, ad, ds, z, mm, vv, state_io, ints, tails, step_lo, step_hi,
              out, sctab, t_base, met):  # fmt: skip
    """Steps ``step_lo+1 .. step_hi`` of one run (the rows of :class:`~.records.State` as in
    :func:`~.kernels.run_steps`); ``sctab[t - t_base]``: Adam's scalars of step ``t``
    (:func:`adam_rows`); ``ad`` = None: SGD (the Adam code is not compiled), else True;
    ``ds`` = None: no dynamic sampling (its redraw code is not compiled), else True;
    ``met``: the address of the metrics pass (:func:`~.kmetrics.metrics_address`), or None.
    Strict IEEE arithmetic: the general loop's fast-math flags change none
    of its operations here (no sum of products to fuse, no reassociation)."""
    K = z.shape[0]
    N = alg.N
    correct = prob.correct
    adv_c = prob.adv_c
    adv_w = prob.adv_w
    submask = log.submask
    log_steps = log.log_steps
    n_log = log_steps.shape[0]
    n_sub = submask.shape[0]
    _, max_res, keep, rule, algo, zero_sum, dual_c, lo_b, hi_b = alg_terms(alg)
    sgd, lr, wd, b1, b2, eps, decoupled, decay, l2 = opt_terms(opt)
    inline_adam = K < ADAM_SCALAR_K
    inv_n = 1.0 / N
    key = state_io[0]
    c = state_io[1]
    state = empty(2, np.uint64)
    state[0] = key
    state[1] = c
    # empty and loops, not zeros, and no min() (cold start: see kmetrics._metrics)
    cnt = empty(K, np.int64)
    touched = empty((N if N < K else K) + 1, np.int64)
    e = empty(K, np.float64)
    cum = empty(K, np.float64)
    cvec = empty(K, np.float64)
    for i in range(K):
        cnt[i] = 0
        cvec[i] = 0.0
    hit = empty(n_sub, np.bool_)  # (_count_tail clears it before use)
    pold = empty(1, np.float64)
    ktails = tails[n_sub : 2 * n_sub]
    li = ints[I_LOG]
    if step_lo == 0:
        li = _first_row(met, z, correct, submask, prob.p0, prob.sum_p0c, log_steps, out)
    groups = ints[I_GROUPS]
    active = ints[I_ACTIVE]
    resamples = ints[I_RESAMPLES]
    t_opt = ints[I_TOPT]
    zmax = _max_small(z)
    for step in range(step_lo + 1, step_hi + 1):
        S = 0.0
        for i in range(K):  # kcore._exp_shift below 32 actions: libm's exp, summed in order
            v = np.exp(z[i] - zmax)
            e[i] = v
            S += v
        r = 0  # the group, then redraws of one the filter drops (one inlined call site)
        while True:
            nd, X = _draw_small(e, cum, correct, N, state, cnt, touched)
            if r == 0:
                groups += 1
                if 0 < X < N:
                    active += 1
                    if n_sub > 0:
                        _count_tail(touched, nd, submask, hit, tails)
            if ds is None or keep[X] != 0 or r >= max_res:  # (ds None: pruned, as ad)
                break
            for j in range(nd):
                cnt[touched[j]] = 0
            r += 1
        if ds is not None:
            resamples += r
            if 0 < X < N:
                tails[2 * n_sub] += 1
                if n_sub > 0:
                    _count_tail(touched, nd, submask, hit, ktails)
        inv_s = 1.0 / S
        C = _coefficients(
            touched, nd, cnt, correct, X, adv_c, adv_w, e, inv_s, pold, True, rule, algo, lo_b,
            hi_b, zero_sum, cvec, dual_c,
        )  # fmt: skip
        t_opt += 1
        if ad is None or sgd:  # ad = None (SGD): the Adam branch is pruned at compile time
            _sgd_small(z, e, inv_s, cvec, C, inv_n, lr, wd)
        else:
            if inline_adam:
                r0 = t_opt - t_base
                _adam_small(z, e, inv_s, cvec, C, inv_n, lr, l2, decay, b1, b2, eps,
                            sctab[r0, 0], sctab[r0, 1], sctab[r0, 2], mm, vv)  # fmt: skip
            else:
                _adam(z, e, inv_s, cvec, C, inv_n, lr, wd, decoupled, b1, b2, eps, t_opt, mm, vv)
        zmax = _max_small(z)
        for j in range(nd):
            k = touched[j]
            cvec[k] = 0.0
            cnt[k] = 0
        if li < n_log and step == log_steps[li]:
            _log_row(met, z, correct, submask, prob.p0, prob.sum_p0c, out[li], groups, active,
                     resamples, tails)  # fmt: skip
            groups = 0
            active = 0
            resamples = 0
            li += 1
    state_io[1] = state[1]
    ints[I_TOPT] = t_opt
    ints[I_LOG] = li
    ints[I_GROUPS] = groups
    ints[I_ACTIVE] = active
    ints[I_RESAMPLES] = resamples


@jit_exact_inline
def _max_small(z):
    """The largest logit (a max is exact in any order)."""
    m = z[0]
    for i in range(1, z.shape[0]):
        m = z[i] if z[i] > m else m
    return m


@jit_exact_inline
def _draw_small(e, cum, correct, N, state, cnt, touched):
    """:func:`~.kcore._sample_iid` for K <= 16 (the plain CDF, a branch-free count)."""
    K = e.shape[0]
    acc = 0.0
    for i in range(K):
        acc += e[i]
        cum[i] = acc
    total = acc
    nd = 0
    X = 0
    for _ in range(N):
        t = next_uniform(state) * total
        k = 0
        for i in range(K - 1):
            k += cum[i] <= t
        nd, X = _tally(_nonzero_below(e, k), nd, X, touched, cnt, correct)
    return nd, X


@jit_exact
def step_scalars(opt, ad, ints, K, step_lo, step_hi):
    """``(sctab, t_base)`` of :func:`run_small` for the runs whose counters are ``ints[R, :]``
    (their optimizer steps so far in column ``I_TOPT``), advancing from ``step_lo`` to
    ``step_hi``: Adam's scalars of every step any of them takes (:func:`adam_rows`), or a dummy
    row for SGD and for K >= ``ADAM_SCALAR_K`` (``ad`` = None: SGD, decided at compile time)."""
    t_lo = ints[0, I_TOPT]
    t_hi = t_lo
    for r in range(ints.shape[0]):
        t_lo = min(t_lo, ints[r, I_TOPT])
        t_hi = max(t_hi, ints[r, I_TOPT])
    if ad is None or opt.kind == OPT_SGD or K >= ADAM_SCALAR_K:
        return zeros((1, 3), np.float64), t_lo + 1
    return adam_rows(opt.b1, opt.b2, t_lo + 1, t_hi + step_hi - step_lo), t_lo + 1


@jit_batch
def run_small_batch(prob, log, alg, opt, ad, ds, st, step_lo, step_hi, out, met):
    """:func:`run_small` for every run (row) of ``st``, one after another, without the GIL (the
    runner gives each thread a block of rows); ``ad`` = None: SGD (no Adam code compiled);
    ``ds`` = None: no dynamic sampling (no redraw code compiled);
    ``met``: the address of the metrics pass, or None."""
    sctab, t_base = step_scalars(opt, ad, st.ints, st.z.shape[1], step_lo, step_hi)
    for r in range(st.z.shape[0]):
        run_small(
            prob, log, alg, opt, ad, ds, st.z[r], st.mm[r], st.vv[r], st.rng[r], st.ints[r],
            st.tails[r], step_lo, step_hi, out[r], sctab, t_base, met,
        )  # fmt: skip


def _target_has_fma() -> bool:
    """Whether the CPU Numba compiles for has FMA instructions (then LLVM fuses in kcore's loops
    as the replicas above do; without them it does not, and the small loop is not used).

    That CPU is the host's unless ``NUMBA_CPU_NAME`` / ``NUMBA_CPU_FEATURES`` say otherwise
    (``numba.core.config.CPU_NAME`` / ``CPU_FEATURES``; ``NUMBA_CPU_NAME=generic`` means no
    features): Numba passes LLVM the features ``CPU_FEATURES`` lists when it is set, else the
    host's, every feature named ``+x`` or ``-x``. FMA is taken as present only when that list
    says ``+fma`` and not ``-avx`` (which ``NUMBA_ENABLE_AVX=0`` adds; FMA needs AVX, and what
    LLVM makes of both is not relied on):
    a CPU name alone (``NUMBA_CPU_NAME=haswell NUMBA_CPU_FEATURES=``) is not read for what it
    implies, so such a target takes the general loop (the same numbers, slower)."""
    from numba.core import config
    from numba.core.codegen import get_host_cpu_features

    features = config.CPU_FEATURES
    if features is None:
        features = get_host_cpu_features()  # the host's, as Numba's codegen takes them
    flags = {f.strip() for f in features.split(",")}
    return "+fma" in flags and "-avx" not in flags


#: whether Numba's target CPU has FMA (read once, at import: Numba reads its config then too)
TARGET_FMA = _target_has_fma()


def small_eligible(rec: dict, z: np.ndarray) -> bool:
    """Whether the runs of the records ``rec`` with logits ``z[R, K]`` take :func:`run_small`."""
    from .kcore import SAMPLER_IID

    alg, lg = rec["alg"], rec["log"]
    return (
        TARGET_FMA
        and rec["tree"] is None
        and rec["scheme"] is None
        and z.dtype == np.float64
        and z.shape[1] <= SMALL_K
        and alg.sampler == SAMPLER_IID
        and alg.inner == 1
        and lg.thresholds.shape[0] == 0
    )
