"""Numba primitives shared by the simulator's and the populations' kernels (theory.md sections 3,
5 and 6): the vectorized exp and sums of a softmax, the group samplers, the SGD / Adam element
loops and the per-action coefficients of one update (clipping, CISPO weights, P-15, P-16).

Any kernel may compile these in: the cache stamp covers every kernel source of the package
(:mod:`fgrpo_theory._numba_cache`), so an edit here recompiles the kernels that use them.
"""

from __future__ import annotations

import numpy as np

from ._jit import jit_elementwise, jit_exact_inline, jit_fast_inline
from .kalloc import empty
from .rng import next_exp, next_uniform

RULE_LINEAR, RULE_LOGPROB = 0, 1
ALGO_PPO, ALGO_CISPO = 0, 1
OPT_SGD, OPT_ADAM, OPT_ADAMW = 0, 1, 2
SAMPLER_IID, SAMPLER_SORTED = 0, 1


def _max_lanes(z):
    """Largest element, over 8 interleaved lanes (max is order-free): 8 independent chains of
    compare-and-select, which LLVM keeps scalar (``vmaxsd``: a select on ``>`` is not a vector
    max without the no-NaN flag) but runs side by side."""
    K = z.shape[0]
    m0 = m1 = m2 = m3 = m4 = m5 = m6 = m7 = z[0]
    K8 = K - K % 8
    for i in range(0, K8, 8):
        m0 = z[i] if z[i] > m0 else m0
        m1 = z[i + 1] if z[i + 1] > m1 else m1
        m2 = z[i + 2] if z[i + 2] > m2 else m2
        m3 = z[i + 3] if z[i + 3] > m3 else m3
        m4 = z[i + 4] if z[i + 4] > m4 else m4
        m5 = z[i + 5] if z[i + 5] > m5 else m5
        m6 = z[i + 6] if z[i + 6] > m6 else m6
        m7 = z[i + 7] if z[i + 7] > m7 else m7
    m = max(max(max(m0, m1), max(m2, m3)), max(max(m4, m5), max(m6, m7)))
    for i in range(K8, K):
        m = z[i] if z[i] > m else m
    return m


#: :func:`_max_lanes` compiled on its own (a max is exact whatever the flags)
_max = jit_elementwise(_max_lanes)
#: :func:`_max_lanes` inlined into the caller (no function of its own to compile: the metrics
#: pass, whose first compile is part of every cold start)
_max_inline = jit_fast_inline(_max_lanes)


_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01  # Cody-Waite split of log(2) (fdlibm)
_LN2_LO = 1.90821492927058770002e-10
# Taylor coefficients 1/k!, k = 0..13: on |r| <= log(2)/2 the truncation error is < 4e-18
_E0 = 1.0
_E1 = 1.0
_E2 = 1.0 / 2
_E3 = 1.0 / 6
_E4 = 1.0 / 24
_E5 = 1.0 / 120
_E6 = 1.0 / 720
_E7 = 1.0 / 5040
_E8 = 1.0 / 40320
_E9 = 1.0 / 362880
_E10 = 1.0 / 3628800
_E11 = 1.0 / 39916800
_E12 = 1.0 / 479001600
_E13 = 1.0 / 6227020800


@jit_fast_inline
def _vexp_shift(z, e, m, ibuf, sc):
    """``e = exp(z - m)`` for ``z <= m`` in a loop LLVM vectorizes (no SVML needed).

    Cody-Waite reduction ``x = n log 2 + r`` and a degree-13 Taylor polynomial; the scale
    ``2**n`` is built from its exponent bits in ``ibuf`` (``sc`` is its float64 view). Measured
    error <= 1.01 ulp against ``numpy.exp`` on [-700, 0] (1e6 points); arguments below -708
    give 0. No ``reassoc``: it would undo the two-step reduction.
    """
    K = z.shape[0]
    for i in range(K):
        x0 = z[i] - m
        x = x0 if x0 > -708.0 else -708.0
        n = np.floor(x * _LOG2E + 0.5)
        r = (x - n * _LN2_HI) - n * _LN2_LO
        p = _E13
        p = p * r + _E12
        p = p * r + _E11
        p = p * r + _E10
        p = p * r + _E9
        p = p * r + _E8
        p = p * r + _E7
        p = p * r + _E6
        p = p * r + _E5
        p = p * r + _E4
        p = p * r + _E3
        p = p * r + _E2
        p = p * r + _E1
        p = p * r + _E0
        e[i] = p if x0 > -708.0 else 0.0
        ibuf[i] = (np.int64(n) + 1023) << 52
    for i in range(K):
        e[i] *= sc[i]


@jit_fast_inline
def _sum8(e):
    """Sum with 8 interleaved accumulators: a fixed order (bit-reproducible) that vectorizes."""
    K = e.shape[0]
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = 0.0
    K8 = K - K % 8
    for i in range(0, K8, 8):
        a0 += e[i]
        a1 += e[i + 1]
        a2 += e[i + 2]
        a3 += e[i + 3]
        a4 += e[i + 4]
        a5 += e[i + 5]
        a6 += e[i + 6]
        a7 += e[i + 7]
    s = ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7))
    for i in range(K8, K):
        s += e[i]
    return s


@jit_fast_inline
def _exp_shift(z, e, m, ibuf, sc):
    """``e = exp(z - m)`` (``m`` = max z); returns ``sum(e)``."""
    K = z.shape[0]
    if K < 32:  # too short to vectorize: libm's exp beats the scalar polynomial
        s = 0.0
        for i in range(K):
            v = np.exp(z[i] - m)
            e[i] = v
            s += v
        return s
    _vexp_shift(z, e, m, ibuf, sc)
    return _sum8(e)


@jit_fast_inline
def _kadd(acc, cmp, j, x):
    """Neumaier-compensated ``acc[j] += x`` (no reassoc flag, so the compensation survives)."""
    a = acc[j]
    t = a + x
    if abs(a) >= abs(x):
        cmp[j] += (a - t) + x
    else:
        cmp[j] += (x - t) + a
    acc[j] = t


@jit_fast_inline
def _tally(k, nd, X, touched, cnt, correct):
    """Book one draw of action ``k`` in a group: its count, the list of distinct actions drawn
    (``touched[:nd]``) and the number of correct draws ``X``; returns the new ``(nd, X)``.
    Branch-free: outcomes are random, so branches would mispredict (measured 3x slower)."""
    touched[nd] = k
    nd += cnt[k] == 0
    cnt[k] += 1
    X += correct[k]
    return nd, X


@jit_fast_inline
def _nonzero_below(e, k):
    """``k``, or the nearest action below it with positive weight: rounding at the top end of a
    CDF can land a draw on a zero-weight action."""
    while e[k] == 0.0 and k > 0:
        k -= 1
    return k


_BLOCK = 64  # actions per block of the i.i.d. sampler's two-level CDF


@jit_fast_inline
def _walk(e, k, c, t, end):
    """Walk the CDF up from action ``k`` (``c`` = the CDF at ``k``) to the first action whose
    CDF exceeds ``t``, stopping at ``end``; returns the action and its CDF."""
    while c <= t and k < end:
        k += 1
        c += e[k]
    return k, c


@jit_fast_inline
def _sample_iid(e, cum, correct, N, state, cnt, touched):
    """N i.i.d. draws by inverse CDF; returns (distinct, X).

    The CDF has two levels: cumulative sums of blocks of ``_BLOCK`` actions (each block summed
    in 8 vectorized lanes, so building it costs a vectorized pass plus K/64 serial additions
    instead of a K-long serial chain), a binary search over the blocks, then a scan inside the
    block. Small K (<= 16) uses a branch-free count over the plain CDF.
    """
    K = e.shape[0]
    if K <= 16:
        acc = 0.0
        for i in range(K):
            acc += e[i]
            cum[i] = acc
    else:
        nb = (K + _BLOCK - 1) // _BLOCK
        acc = 0.0
        for b in range(nb):
            lo = b * _BLOCK
            hi = min(lo + _BLOCK, K)
            acc += _sum8(e[lo:hi])
            cum[b] = acc
    total = acc
    nd = 0
    X = 0
    for _ in range(N):
        t = next_uniform(state) * total
        if K <= 16:  # branch-free count of cum <= t: the same index, no mispredictions
            k = 0
            for i in range(K - 1):
                k += cum[i] <= t
        else:
            k = _block_find(e, cum, nb, t)
        nd, X = _tally(_nonzero_below(e, k), nd, X, touched, cnt, correct)
    return nd, X


@jit_fast_inline
def _block_find(e, cum, nb, t):
    """The action whose CDF first exceeds ``t`` (or the last of its block), given the prefix
    sums ``cum[:nb]`` of blocks of ``_BLOCK`` weights ``e`` (float64 or float32; the walk sums
    in float64): a binary search over the blocks, then a walk inside the block."""
    lo = 0
    hi = nb - 1
    while lo < hi:
        mid = (lo + hi) >> 1
        if cum[mid] > t:
            hi = mid
        else:
            lo = mid + 1
    k = lo * _BLOCK
    end = min(k + _BLOCK, e.shape[0]) - 1
    c = (cum[lo - 1] if lo > 0 else 0.0) + np.float64(e[k])
    return _walk(e, k, c, t, end)[0]


@jit_fast_inline
def _sample_sorted(e, total, gaps, correct, N, state, cnt, touched):
    """N draws as sorted uniforms (exponential spacings) merged with the CDF, O(N + K)."""
    K = e.shape[0]
    acc = 0.0
    for i in range(N + 1):
        acc += next_exp(state)
        gaps[i] = acc
    scale = total / acc
    nd = 0
    X = 0
    k = 0
    ck = e[0]
    for j in range(N):
        t = gaps[j] * scale
        k, ck = _walk(e, k, ck, t, K - 1)
        nd, X = _tally(_nonzero_below(e, k), nd, X, touched, cnt, correct)
    return nd, X


@jit_elementwise
def _sgd(z, e, inv_s, cvec, C, inv_n, lr, wd):
    for i in range(z.shape[0]):
        g = (cvec[i] - e[i] * inv_s * C) * inv_n - wd * z[i]
        z[i] += lr * g


@jit_elementwise
def _adam(z, e, inv_s, cvec, C, inv_n, lr, wd, decoupled, b1, b2, eps, t, mm, vv):
    sc = _adam_scalars(lr, wd, decoupled, b1, b2, eps, t)
    l2 = sc[8]
    for i in range(z.shape[0]):  # no reduction here: it would block vectorization
        zi = z[i]
        g = (e[i] * inv_s * C - cvec[i]) * inv_n + l2 * zi  # gradient of the loss -J
        _adam_move(z, mm, vv, i, zi, g, sc)


@jit_fast_inline
def _ratio_weight(A, p, pold, j, first, rule, algo, lo_b, hi_b, dual_c):
    """The weight ``s_k`` of a sampled action with advantage ``A``, current probability ``p``
    and old probability ``pold[j]`` (read only when not ``first``: at the first inner update
    the ratio is exactly 1): the clipped surrogate's (PPO, dual clip) or CISPO's weight, times
    ``p`` for the linear surrogate (see the kernels' module docstring)."""
    r = 1.0 if first else p / pold[j]
    if algo == ALGO_CISPO:
        w = min(max(r, lo_b), hi_b)
    elif (A > 0.0 and r > hi_b) or (A < 0.0 and (r < lo_b or r > dual_c)):
        w = 0.0  # PPO clip (or dual clip, A < 0 and r > c) active: the loss is constant
    elif rule == RULE_LOGPROB:
        w = r  # d(r A) = A r dlog p
    else:
        w = 1.0  # d(A r p_old) = A dp = A p dlog p
    if rule == RULE_LINEAR:
        w *= p
    return w


@jit_fast_inline
def _coefficients(
    touched, nd, cnt, correct, X, adv_c, adv_w, e, inv_s, pold, first, rule, algo, lo_b, hi_b,
    zero_sum, cvec, dual_c,
):  # fmt: skip
    """Fill ``cvec`` at the sampled actions with ``n_k A_k s_k``; return their sum C.

    With the log-prob rule and a zero-sum advantage convention, ``sum_k n_k A_k = 0`` in exact
    arithmetic, so ``C = sum_k n_k A_k (w_k - 1)`` is used: it is exactly 0 when every weight is 1
    (one inner update), instead of a ~1e-16 rounding residue that Adam would normalize into
    learning-rate-sized steps of every unsampled logit.
    """
    centred = zero_sum and rule == RULE_LOGPROB
    C = 0.0
    ac = adv_c[X]
    aw = adv_w[X]
    for j in range(nd):
        k = touched[j]
        A = ac if correct[k] else aw
        p = e[k] * inv_s
        w = _ratio_weight(A, p, pold, j, first, rule, algo, lo_b, hi_b, dual_c)
        c = cnt[k] * A * w
        cvec[k] = c
        if centred:
            C += cnt[k] * A * (w - 1.0)
        else:
            C += c
    return C


@jit_fast_inline
def _coefficients_at(
    touched, nd, cnt, adv_t, e, inv_s, pold, first, rule, algo, lo_b, hi_b, zero_sum, cvec,
    dual_c,
):  # fmt: skip
    """:func:`_coefficients` with per-action advantages ``adv_t[j]`` of ``touched[j]`` (a
    likelihood-aware scheme, :func:`_likelihood_advantages`) instead of per-X tables."""
    centred = zero_sum and rule == RULE_LOGPROB
    C = 0.0
    for j in range(nd):
        k = touched[j]
        A = adv_t[j]
        p = e[k] * inv_s
        w = _ratio_weight(A, p, pold, j, first, rule, algo, lo_b, hi_b, dual_c)
        c = cnt[k] * A * w
        cvec[k] = c
        if centred:
            C += cnt[k] * A * (w - 1.0)
        else:
            C += c
    return C


#: SchemeTerms.kind: per-X tables, GRPO-Unlikeliness, differential smoothing
SCH_TABLE, SCH_UNLIKELINESS, SCH_DS = 0, 1, 2
#: SchemeTerms.kl_kind: no KL term, exact KL(pi || pi_0), the k3 estimator on the samples
KL_OFF, KL_EXACT, KL_K3 = 0, 1, 2
#: the std epsilon of both likelihood-aware schemes (their authors' code)
EPS_LIKELIHOOD = 1e-6


@jit_fast_inline
def _likelihood_advantages(sch, touched, nd, cnt, correct, X, N, pold, lp_t, order, adv_t):
    """Per-action advantages ``adv_t[j]`` of the sampled actions ``touched[:nd]`` (counts
    ``cnt``, ``X`` correct draws) under a likelihood-aware scheme, from their probabilities
    under the sampling policy ``pold[:nd]`` (a rollout's log-probability is ``L = log p_old``),
    focal weight ``sch.focal[X]`` included; the definitions of
    :mod:`fgrpo_theory.schemes.likelihood` (``lp_t``, ``order``: scratch of length >= nd).

    Unlikeliness: the ``n_k`` rollouts of action k are tied; they get their average rank over
    the N rollouts, ``q = #{rollouts less likely} + (#{rollouts as likely} - 1) / 2``, so
    ``m_k = 1 - penalty q_k / N`` (correct) or 0, ``A_k = (m_k - mean m) / (std_Bessel + eps)``,
    0 for X = 0 or N. DS: ``A_k = (c_k - X/N) / (std_pop + eps) - gamma_p c_k L_k + gamma_n (1 -
    c_k) L_k``.
    """
    g = sch.focal[X]
    for j in range(nd):
        lp_t[j] = np.log(pold[j])
    if sch.kind == SCH_DS:
        mu = X / N
        std = np.sqrt((X * (1.0 - mu) * (1.0 - mu) + (N - X) * mu * mu) / N)
        inv = 1.0 / (std + EPS_LIKELIHOOD)
        for j in range(nd):
            L = lp_t[j]
            if correct[touched[j]]:
                a = (1.0 - mu) * inv - sch.gamma_p * L
            else:
                a = -mu * inv + sch.gamma_n * L
            adv_t[j] = g * a
        return
    if X == 0 or X == N:  # unlikeliness: no mixed outcome, no update
        for j in range(nd):
            adv_t[j] = 0.0
        return
    for j in range(nd):  # order[:nd]: the sampled actions by ascending L (insertion sort)
        i = j
        while i > 0 and lp_t[order[i - 1]] > lp_t[j]:
            order[i] = order[i - 1]
            i -= 1
        order[i] = j
    below = 0
    i = 0
    while i < nd:  # runs of equal L share their average rank
        v = lp_t[order[i]]
        i2 = i
        tie = 0
        while i2 < nd and lp_t[order[i2]] == v:
            tie += cnt[touched[order[i2]]]
            i2 += 1
        q = below + (tie - 1) * 0.5
        for t in range(i, i2):
            j = order[t]
            adv_t[j] = 1.0 - sch.penalty * q / N if correct[touched[j]] else 0.0
        below += tie
        i = i2
    s = 0.0
    for j in range(nd):
        s += cnt[touched[j]] * adv_t[j]
    mean = s / N
    ss = 0.0
    for j in range(nd):
        d = adv_t[j] - mean
        ss += cnt[touched[j]] * d * d
    inv = g / (np.sqrt(ss / (N - 1)) + EPS_LIKELIHOOD)
    for j in range(nd):
        adv_t[j] = (adv_t[j] - mean) * inv


@jit_fast_inline
def _regularizer_coefficients(sch, z, e, m, inv_s, lq, touched, nd, cnt, N, cvec):
    """Add the regularizers' weights on ``dlog p_i`` to ``cvec`` (the update's gradient is
    ``(c_i - p_i C) / N``, :mod:`fgrpo_theory.schemes.regularizers`); return their sum.

    ``e = exp(z - m)``, ``inv_s = 1 / sum e``, ``lq`` the reference's log-probabilities (the
    initial policy's). Entropy bonus ``+ coef H``: ``c_i = -coef N p_i log p_i`` (sum: ``coef N
    H``); exact KL ``- coef KL(p || q)``: ``c_i = -coef N p_i (log p_i - log q_i)``; k3 on the
    samples: ``coef n_k (rho_k - 1)`` at each sampled action, ``rho = q / p`` at the current
    policy (never clipped).
    """
    C = 0.0
    ls = -np.log(inv_s)
    a = -sch.ent_coef * N
    b = -sch.kl_coef * N if sch.kl_kind == KL_EXACT else 0.0
    if b != 0.0:  # (lq is read only here: without a KL term it is a 1 x 1 placeholder)
        for i in range(z.shape[0]):
            lp = (z[i] - m) - ls
            c = e[i] * inv_s * (a * lp + b * (lp - lq[i]))
            cvec[i] += c
            C += c
    elif a != 0.0:
        for i in range(z.shape[0]):
            c = e[i] * inv_s * (a * ((z[i] - m) - ls))
            cvec[i] += c
            C += c
    if sch.kl_kind == KL_K3:
        for j in range(nd):
            k = touched[j]
            lp = (z[k] - m) - ls
            c = sch.kl_coef * cnt[k] * np.expm1(lq[k] - lp)
            cvec[k] += c
            C += c
    return C


@jit_fast_inline
def _log_norm(z, acc, cmp):
    """``(m, ls)`` with ``m = max z`` and ``ls = log sum_i exp(z_i - m)`` (compensated in slot 0
    of ``acc`` / ``cmp``, which must be 0), so ``log softmax(z)_i = z_i - m - ls``: the start of
    the exact metrics of a softmax (the simulator's and the populations')."""
    m = _max(z)
    for i in range(z.shape[0]):
        _kadd(acc, cmp, 0, np.exp(z[i] - m))
    return m, np.log(acc[0] + cmp[0])


@jit_fast_inline
def _masked_sum8(e, cf):
    """``sum_i e[i] cf[i]`` with 8 interleaved accumulators (the cheap correct mass)."""
    K = e.shape[0]
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = 0.0
    K8 = K - K % 8
    for i in range(0, K8, 8):
        a0 += e[i] * cf[i]
        a1 += e[i + 1] * cf[i + 1]
        a2 += e[i + 2] * cf[i + 2]
        a3 += e[i + 3] * cf[i + 3]
        a4 += e[i + 4] * cf[i + 4]
        a5 += e[i + 5] * cf[i + 5]
        a6 += e[i + 6] * cf[i + 6]
        a7 += e[i + 7] * cf[i + 7]
    s = ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7))
    for i in range(K8, K):
        s += e[i] * cf[i]
    return s


@jit_fast_inline
def _kadd2(a, c, x):
    """Neumaier-compensated scalar ``a + x`` with compensation ``c``: returns ``(a, c)``."""
    t = a + x
    if abs(a) >= abs(x):
        c += (a - t) + x
    else:
        c += (x - t) + a
    return t, c


@jit_fast_inline
def _clear_counts(cnt, touched, nd):
    """Reset the draw counts of a group (before a redraw or after the update)."""
    for j in range(nd):
        cnt[touched[j]] = 0


@jit_fast_inline
def _local_rng(state_io):
    """A run-local copy of the random stream ``[key, counter]`` (written back at chunk end): a
    fresh local array aliases nothing, so LLVM keeps the counter in a register across draws."""
    state = empty(2, np.uint64)
    state[0] = state_io[0]
    state[1] = state_io[1]
    return state


@jit_exact_inline
def _adam_scalars(lr, wd, decoupled, b1, b2, eps, t):
    """The scalars of Adam (``decoupled`` False, L2 weight decay) or AdamW step ``t``, in the
    order :func:`_adam_move` reads them: ``(b1, b2, 1 - b1, 1 - b2, eps, lr / (1 - b1^t),
    1 / sqrt(1 - b2^t), decay, l2)``. Inlined, so they are computed where the caller's loop
    starts, under the caller's fastmath flags."""
    bc1 = 1.0 - b1**t
    bc2 = 1.0 - b2**t
    step = lr / bc1
    isb = 1.0 / np.sqrt(bc2)
    decay = 1.0 - lr * wd if decoupled else 1.0
    l2 = 0.0 if decoupled else wd
    return b1, b2, 1.0 - b1, 1.0 - b2, eps, step, isb, decay, l2


@jit_exact_inline
def _adam_move(z, mm, vv, i, zi, g, sc):
    """One element of an Adam / AdamW step: moments of the loss gradient ``g`` at ``z[i] = zi``
    and the move, with the scalars ``sc`` of :func:`_adam_scalars`."""
    b1, b2, a1, a2, eps, step, isb, decay, _ = sc
    m = b1 * mm[i] + a1 * g
    v = b2 * vv[i] + a2 * g * g
    mm[i] = m
    vv[i] = v
    z[i] = zi * decay - step * m / (np.sqrt(v) * isb + eps)
