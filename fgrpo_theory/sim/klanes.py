"""The dense path at small K with runs in SIMD lanes: :func:`~.ksmall.run_small`'s computation
for a tile of runs side by side, every step's work a loop over the runs that LLVM vectorizes.

Why: at K = 6 the one-run loop does scalar work per run and step (6 calls of libm's ``exp``, 8
draws that tally one at a time); JAX's reference runs every operation as a vector over the
seeds and was 1.3-1.7x faster. Here a tile of :data:`LANES` runs advances together: their logits
are stored ``[K, lanes]``, and every operation of a step (the exponentials, the CDF, each draw's
inverse-CDF count, the tally, the coefficients, the SGD or Adam update) is a loop over the
lanes with the same operations, in the same order per run, as :func:`~.ksmall.run_small`. The
draws' tally becomes counts of CDF comparisons (:func:`_draw_lanes`), so no branch depends on a
draw there; only the coefficient sum in the order actions were first drawn, when its terms are
not all zero, replays each lane's draws with branches (:func:`_ordered_sum`).

The numbers are :func:`~.ksmall.run_small`'s bit for bit (``tests/test_sim_lanes.py``; of a NaN,
which only a diverged run has, the sign bit may differ): the same
uniform words per run, the same sums in the same order, the same coefficient helper
(:func:`~.kcore._ratio_weight`) and update elements (:func:`~.ksmall._sgd_elem`,
:func:`~.ksmall._adam_elem`); the exponential is :func:`~.kexp.exp_lane`, a replica of the C
library's ``exp`` that vectorizes, used only where its self-check found it equal to the C
library's (:func:`lanes_eligible`). Taken for the configs of :func:`~.ksmall.small_eligible` with
SGD, or Adam / AdamW below K = 8 (``ksmall.ADAM_SCALAR_K``; above, ``run_small`` calls
:func:`~.kcore._adam`, whose vector loop is not replicated here).
"""

from __future__ import annotations

import numpy as np

from ._jit import jit_batch, jit_exact
from .kalloc import empty, zeros
from .kcore import OPT_SGD, RULE_LOGPROB, _ratio_weight
from .kernels import _first_row, _log_row
from .kexp import exp_lane
from .ksmall import ADAM_SCALAR_K, _adam_elem, _sgd_elem, alg_terms, opt_terms, step_scalars
from .records import I_ACTIVE, I_GROUPS, I_LOG, I_RESAMPLES, I_TOPT
from .rng import uniform_at

#: runs per tile: their state (nine [K, LANES] arrays, 4.6 KB per action) stays in the L1 cache
#: up to K = 6 and in L2 above
LANES = 64


@jit_exact
def _draw_lanes(e, cum, S, correct, N, key, ctr, ctr0, mask, A, cnt, X, t):
    """N i.i.d. draws of a group in the lanes where ``mask`` is set: the counts ``cnt[K, L]``
    and correct draws ``X[L]`` of :func:`~.ksmall._draw_small` per run, from the same uniforms
    (``ctr0``: each lane's counter before its draws, for :func:`_ordered_sum`).

    A draw ``t`` lands on action ``k`` = the number of ``i < K-1`` with ``cum[i] <= t``; the CDF
    only grows, so the draws on action ``i`` number ``A[i-1] - A[i]``, ``A[i]`` = the draws with
    ``cum[i] <= t`` (``A[-1] = N``, ``A[K-1] = 0``): one compare and add per action and draw. Then
    :func:`~.kcore._nonzero_below` moves the draws of a zero-weight action to the nearest action
    below with positive weight (or 0): kept for parity with :func:`~.kcore._nonzero_below`,
    though with the plain CDF a draw cannot land on a zero weight (``cum`` does not grow there,
    and ``t < S`` for a finite total; ``tests/test_sim_lanes.py`` drives it with a larger ``t``)."""
    K, L = e.shape
    for i in range(K - 1):
        for l in range(L):
            A[i, l] = 0
    for l in range(L):
        ctr0[l] = ctr[l] if mask[l] else ctr0[l]
    for _ in range(N):
        for l in range(L):
            c = ctr[l] + np.uint64(mask[l])
            ctr[l] = c
            t[l] = uniform_at(key[l], c) * S[l]
        for i in range(K - 1):
            for l in range(L):
                A[i, l] += cum[i, l] <= t[l]
    for i in range(K):
        for l in range(L):
            above = A[i - 1, l] if i > 0 else N
            below = A[i, l] if i < K - 1 else 0
            cnt[i, l] = above - below if mask[l] else cnt[i, l]
    for i in range(K - 1, 0, -1):  # zero weights: only where exp underflowed
        for l in range(L):
            move = mask[l] and e[i, l] == 0.0
            cnt[i - 1, l] += cnt[i, l] if move else 0
            cnt[i, l] = 0 if move else cnt[i, l]
    for l in range(L):
        X[l] = 0 if mask[l] else X[l]
    for i in range(K):
        if correct[i]:
            for l in range(L):
                X[l] += cnt[i, l] if mask[l] else 0


@jit_exact
def _ordered_sum(e, cum, S, N, key, ctr0, part, C, t, k, seen):
    """``C[l]`` = the sum of ``part[i, l]`` over the actions drawn in lane ``l``'s group, in the
    order they were first drawn (:func:`~.kcore._coefficients`' order), its draws replayed from
    the counters ``ctr0`` (the random words are a function of the counter)."""
    K, L = e.shape
    for l in range(L):
        C[l] = 0.0
        seen[l] = 0
    for j in range(N):
        for l in range(L):
            t[l] = uniform_at(key[l], ctr0[l] + np.uint64(j + 1)) * S[l]
            k[l] = 0
        for i in range(K - 1):
            for l in range(L):
                k[l] += cum[i, l] <= t[l]
        for l in range(L):  # kcore._nonzero_below
            while e[k[l], l] == 0.0 and k[l] > 0:
                k[l] -= 1
            bit = np.int64(1) << k[l]
            if seen[l] & bit == 0:
                seen[l] |= bit
                C[l] += part[k[l], l]


@jit_exact
def _max_lanes(z, zmax):
    """``zmax[l]`` = the largest logit of lane ``l`` (:func:`~.ksmall._max_small`'s comparison)."""
    K, L = z.shape
    for l in range(L):
        zmax[l] = z[0, l]
    for i in range(1, K):
        for l in range(L):
            zmax[l] = z[i, l] if z[i, l] > zmax[l] else zmax[l]


@jit_exact
def _tail_lanes(cnt, submask, X, N, mask, tails, r0, off, hit):
    """:func:`~.kernels._count_tail` per lane: ``tails[r0 + l, off + s] += 1`` for the subsets
    ``s`` no draw of lane ``l``'s group hit, in lanes with a mixed group (0 < X < N) and
    ``mask``."""
    K, L = cnt.shape
    for s in range(submask.shape[0]):
        for l in range(L):
            hit[l] = False
        for i in range(K):
            if submask[s, i]:
                for l in range(L):
                    hit[l] = hit[l] or cnt[i, l] > 0
        for l in range(L):
            if mask[l] and 0 < X[l] < N and not hit[l]:
                tails[r0 + l, off + s] += 1


@jit_exact
def _tile(prob, log, alg, opt, ad, st, r0, L, step_lo, step_hi, out, sctab, t_base, zr):
    """Steps ``step_lo+1 .. step_hi`` of the runs ``r0 .. r0+L-1`` of ``st``."""
    K = st.z.shape[1]
    N = alg.N
    correct = prob.correct
    adv_c = prob.adv_c
    adv_w = prob.adv_w
    submask = log.submask
    log_steps = log.log_steps
    n_log = log_steps.shape[0]
    n_sub = submask.shape[0]
    dyn, max_res, keep, rule, algo, zero_sum, dual_c, lo_b, hi_b = alg_terms(alg)
    sgd, lr, wd, b1, b2, eps, _, decay, l2 = opt_terms(opt)
    centred = zero_sum and rule == RULE_LOGPROB
    inv_n = 1.0 / N
    odd = K % 2 == 1
    tails = st.tails
    z = empty((K, L), np.float64)
    mm = empty((K, L), np.float64)
    vv = empty((K, L), np.float64)
    adam = not (ad is None or sgd)  # SGD's state has no moments (width 1)
    for l in range(L):
        for i in range(K):
            z[i, l] = st.z[r0 + l, i]
            if adam:
                mm[i, l] = st.mm[r0 + l, i]
                vv[i, l] = st.vv[r0 + l, i]
    # copies of the lanes' columns (loops: an array's .copy() compiles Numba's allocator, kalloc)
    key = empty(L, np.uint64)
    ctr = empty(L, np.uint64)
    li = empty(L, np.int64)
    groups = empty(L, np.int64)
    active = empty(L, np.int64)
    resamples = empty(L, np.int64)
    t_opt = empty(L, np.int64)
    for l in range(L):
        key[l] = st.rng[r0 + l, 0]
        ctr[l] = st.rng[r0 + l, 1]
        li[l] = st.ints[r0 + l, I_LOG]
        groups[l] = st.ints[r0 + l, I_GROUPS]
        active[l] = st.ints[r0 + l, I_ACTIVE]
        resamples[l] = st.ints[r0 + l, I_RESAMPLES]
        t_opt[l] = st.ints[r0 + l, I_TOPT]
    if step_lo == 0:
        for l in range(L):
            for i in range(K):
                zr[i] = z[i, l]
            li[l] = _first_row(
                None, zr, correct, submask, prob.p0, prob.sum_p0c, log_steps, out[r0 + l]
            )
    e = empty((K, L), np.float64)
    cum = empty((K, L), np.float64)
    cvec = empty((K, L), np.float64)
    part = empty((K, L), np.float64)
    cnt = zeros((K, L), np.int64)
    cntA = zeros((K, L), np.int64)
    zmax = empty(L, np.float64)
    S = empty(L, np.float64)
    inv_s = empty(L, np.float64)
    C = empty(L, np.float64)
    pc = empty(L, np.float64)
    ac = empty(L, np.float64)
    aw = empty(L, np.float64)
    t = empty(L, np.float64)
    X = zeros(L, np.int64)
    k = zeros(L, np.int64)
    res = zeros(L, np.int64)
    ctr0 = zeros(L, np.uint64)
    seen = zeros(L, np.int64)
    hit = zeros(L, np.bool_)
    mask = empty(L, np.bool_)
    for l in range(L):
        mask[l] = True
    bc1 = empty(L, np.float64)
    sb = empty(L, np.float64)
    rsb = empty(L, np.float64)
    pold = empty(1, np.float64)
    _max_lanes(z, zmax)
    for step in range(step_lo + 1, step_hi + 1):
        for l in range(L):
            S[l] = 0.0
        for i in range(K):  # libm's exp (replicated), summed in order: S is also the CDF's total
            for l in range(L):
                w = exp_lane(z[i, l] - zmax[l])
                e[i, l] = w
                S[l] += w
                cum[i, l] = S[l]
        for l in range(L):
            mask[l] = True
        _draw_lanes(e, cum, S, correct, N, key, ctr, ctr0, mask, cntA, cnt, X, t)
        for l in range(L):
            groups[l] += 1
            active[l] += 0 < X[l] < N
        if n_sub > 0:
            _tail_lanes(cnt, submask, X, N, mask, tails, r0, 0, hit)
        if dyn:
            more = False
            for l in range(L):
                res[l] = 0
                mask[l] = keep[X[l]] == 0 and max_res > 0
                more = more or mask[l]
            while more:
                _draw_lanes(e, cum, S, correct, N, key, ctr, ctr0, mask, cntA, cnt, X, t)
                more = False
                for l in range(L):
                    res[l] += mask[l]
                    mask[l] = mask[l] and keep[X[l]] == 0 and res[l] < max_res
                    more = more or mask[l]
            for l in range(L):
                resamples[l] += res[l]
                mask[l] = True
                tails[r0 + l, 2 * n_sub] += 0 < X[l] < N
            if n_sub > 0:
                _tail_lanes(cnt, submask, X, N, mask, tails, r0, n_sub, hit)
        for l in range(L):
            inv_s[l] = 1.0 / S[l]
            ac[l] = adv_c[X[l]]
            aw[l] = adv_w[X[l]]
        for i in range(K):  # kcore._coefficients: n_k A_k s_k, and its term of C
            ci = correct[i] != 0
            for l in range(L):
                A = ac[l] if ci else aw[l]
                p = e[i, l] * inv_s[l]
                w = _ratio_weight(A, p, pold, 0, True, rule, algo, lo_b, hi_b, dual_c)
                n = cnt[i, l]
                c = n * A * w
                cvec[i, l] = c if n > 0 else 0.0
                part[i, l] = n * A * (w - 1.0) if centred else c
        zero = True  # every term +-0 (one inner update, zero-sum advantages): C = +0 in any order
        for i in range(K):
            for l in range(L):
                zero = zero and part[i, l] == 0.0
        if zero:
            for l in range(L):
                C[l] = 0.0
        else:
            _ordered_sum(e, cum, S, N, key, ctr0, part, C, t, k, seen)
        for l in range(L):
            t_opt[l] += 1
            pc[l] = C[l] * inv_s[l]
        if ad is None or sgd:  # ad = None (SGD): the Adam branch is pruned at compile time
            for i in range(K):
                for l in range(L):
                    z[i, l] = _sgd_elem(z[i, l], e[i, l], pc[l], cvec[i, l], inv_n, lr, wd)
        else:
            for l in range(L):
                r = t_opt[l] - t_base
                bc1[l] = sctab[r, 0]
                sb[l] = sctab[r, 1]
                rsb[l] = sctab[r, 2]
            for i in range(K):
                divide = i == 0 and odd
                for l in range(L):
                    z[i, l], mm[i, l], vv[i, l] = _adam_elem(
                        z[i, l], e[i, l], pc[l], cvec[i, l], inv_n, lr, l2, decay, b1, b2, eps,
                        bc1[l], sb[l], rsb[l], mm[i, l], vv[i, l], divide,
                    )  # fmt: skip
        _max_lanes(z, zmax)
        for l in range(L):
            if li[l] < n_log and step == log_steps[li[l]]:
                for i in range(K):
                    zr[i] = z[i, l]
                _log_row(None, zr, correct, submask, prob.p0, prob.sum_p0c, out[r0 + l, li[l]],
                         groups[l], active[l], resamples[l], tails[r0 + l])  # fmt: skip
                groups[l] = 0
                active[l] = 0
                resamples[l] = 0
                li[l] += 1
    for l in range(L):
        for i in range(K):
            st.z[r0 + l, i] = z[i, l]
            if adam:
                st.mm[r0 + l, i] = mm[i, l]
                st.vv[r0 + l, i] = vv[i, l]
        st.rng[r0 + l, 1] = ctr[l]
        st.ints[r0 + l, I_TOPT] = t_opt[l]
        st.ints[r0 + l, I_LOG] = li[l]
        st.ints[r0 + l, I_GROUPS] = groups[l]
        st.ints[r0 + l, I_ACTIVE] = active[l]
        st.ints[r0 + l, I_RESAMPLES] = resamples[l]


@jit_batch
def run_lanes(prob, log, alg, opt, ad, st, step_lo, step_hi, out):
    """:func:`~.ksmall.run_small` for every run (row) of ``st``, :data:`LANES` runs at a time,
    without the GIL (the runner gives each thread a block of rows); ``ad`` = None: SGD."""
    R, K = st.z.shape
    sctab, t_base = step_scalars(opt, ad, st.ints, K, step_lo, step_hi)
    zr = empty(K, np.float64)
    for r0 in range(0, R, LANES):
        L = min(LANES, R - r0)
        _tile(prob, log, alg, opt, ad, st, r0, L, step_lo, step_hi, out, sctab, t_base, zr)


def lanes_eligible(rec: dict, z: np.ndarray) -> bool:
    """Whether the runs of ``rec`` (:func:`~.ksmall.small_eligible` ones) may take
    :func:`run_lanes`: SGD at any K <= 16, Adam / AdamW below K = 8, and the C library's ``exp``
    equal to :func:`~.kexp.exp_lane` on this machine (:func:`~.kexp.exp_lane_matches_libm`)."""
    from .kexp import exp_lane_matches_libm

    if rec["opt"].kind != OPT_SGD and z.shape[1] >= ADAM_SCALAR_K:
        return False
    return exp_lane_matches_libm()
