"""Numba kernel of the population simulator (theory.md section 13): the hot loop only.

ONE file on purpose: Numba's on-disk cache (``cache=True``) of a kernel is invalidated only by
edits to the kernel's own source file, so any helper the kernel inlines from another module
would silently stay stale after an edit there. The counter-based generator (SplitMix64 words
``mix64(key + i * GOLDEN)``, :mod:`fgrpo_theory.sim.keys`), the blocked-CDF sampler, the
vectorized exp and the SGD / Adam element loops are therefore MIRRORED here from
:mod:`fgrpo_theory.sim.kernels`, expression for expression and with the same fastmath flags, so
that a population of one prompt with the shared logits frozen reproduces the single-prompt
simulator bit for bit; ``tests/test_population_kernel.py`` checks the streams and the runs.

Model: the logits of prompt ``p`` are ``theta + phi_p``. Each step draws a batch of ``B`` train
prompts (without replacement within an epoch, from a second stream of the run's key), ``N``
rollouts each (from the run's main stream), and applies the log-prob (or linear) surrogate
with per-X advantage tables (focal weight included, P-13). The loss is the mean over the
``B x N`` rollouts, so each prompt's logit gradient is ``(c - p C) / (B N)`` (theory.md
section 6); ``phi_p`` receives it, ``theta`` receives the sum over the batch.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .._numba_cache import register as _register_cache
from ..sim.keys import GOLDEN_INT, M1_INT, M2_INT

_register_cache()  # compiled code goes to the user cache folder, never site-packages

GOLDEN = np.uint64(GOLDEN_INT)
M1 = np.uint64(M1_INT)
M2 = np.uint64(M2_INT)
S30 = np.uint64(30)
S27 = np.uint64(27)
S31 = np.uint64(31)
S11 = np.uint64(11)
ONE = np.uint64(1)
INV53 = 1.0 / 9007199254740992.0  # 2**-53
ORDER_SALT = np.uint64(0x5851F42D4C957F2D)  # key of the batch-order stream: mix64(key ^ salt)

FM = {"nsz", "arcp", "contract", "afn"}
FM_EW = {"nsz", "arcp", "contract", "afn", "reassoc"}
_BLOCK = 64

RULE_LINEAR, RULE_LOGPROB = 0, 1
OPT_SGD, OPT_ADAM, OPT_ADAMW = 0, 1, 2
#: per-prompt metric slots: success mu, rare-correct mass tau, entropy, sum of -log p over the
#: prompt's rare correct strategies
P_MU, P_TAU, P_ENT, P_NLL = 0, 1, 2, 3
N_PMET = 4
#: per-prompt counters since the previous logged step: groups, active groups, tail misses,
#: dynamic-sampling redraws
C_GROUPS, C_ACTIVE, C_TAIL, C_RESAMPLES = 0, 1, 2, 3
N_CNT = 4

# ---- mirrored from fgrpo_theory.sim.kernels (keep expression for expression) -----------------
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


@njit(cache=True, inline="always", error_model="numpy")
def _mix64(x):
    x = (x ^ (x >> S30)) * M1
    x = (x ^ (x >> S27)) * M2
    return x ^ (x >> S31)


@njit(cache=True, inline="always", error_model="numpy")
def next_u64(state):
    """Next 64-bit word of the stream ``state = [key, counter]`` (uint64 array, advanced)."""
    c = state[1] + ONE
    state[1] = c
    return _mix64(state[0] + c * GOLDEN)


@njit(cache=True, inline="always", error_model="numpy")
def next_uniform(state):
    """Uniform double in [0, 1) with 53 random bits."""
    return float(next_u64(state) >> S11) * INV53


@njit(cache=True, fastmath=FM_EW, error_model="numpy")
def _max(z):
    """Largest element, with 8 interleaved lanes so LLVM vectorizes it (max is order-free)."""
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


@njit(cache=True, fastmath=FM, error_model="numpy", inline="always")
def _vexp_shift(z, e, m, ibuf, sc):
    """``e = exp(z - m)``, vectorized Cody-Waite + degree-13 Taylor (see sim.kernels)."""
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


@njit(cache=True, fastmath=FM, error_model="numpy", inline="always")
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


@njit(cache=True, fastmath=FM, error_model="numpy", inline="always")
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


@njit(cache=True, fastmath=FM, error_model="numpy", inline="always")
def _sample_iid(e, cum, correct, N, state, cnt, touched):
    """N i.i.d. draws by inverse CDF over a two-level (64-action block) CDF; (distinct, X)."""
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
            lo = 0
            hi = nb - 1
            while lo < hi:
                mid = (lo + hi) >> 1
                if cum[mid] > t:
                    hi = mid
                else:
                    lo = mid + 1
            k = lo * _BLOCK
            end = min(k + _BLOCK, K) - 1
            c = (cum[lo - 1] if lo > 0 else 0.0) + e[k]
            while c <= t and k < end:
                k += 1
                c += e[k]
        while e[k] == 0.0 and k > 0:  # rounding at the top end
            k -= 1
        # branch-free bookkeeping: outcomes are random, branches would mispredict (3x slower)
        touched[nd] = k
        nd += cnt[k] == 0
        cnt[k] += 1
        X += correct[k]
    return nd, X


@njit(cache=True, fastmath=FM_EW, error_model="numpy")
def _sgd(z, e, inv_s, cvec, C, inv_n, lr, wd):
    for i in range(z.shape[0]):
        g = (cvec[i] - e[i] * inv_s * C) * inv_n - wd * z[i]
        z[i] += lr * g


@njit(cache=True, fastmath=FM_EW, error_model="numpy")
def _adam(z, e, inv_s, cvec, C, inv_n, lr, wd, decoupled, b1, b2, eps, t, mm, vv):
    bc1 = 1.0 - b1**t
    bc2 = 1.0 - b2**t
    step = lr / bc1
    isb = 1.0 / np.sqrt(bc2)
    decay = 1.0 - lr * wd if decoupled else 1.0
    l2 = 0.0 if decoupled else wd
    a1 = 1.0 - b1
    a2 = 1.0 - b2
    for i in range(z.shape[0]):  # no reduction here: it would block vectorization
        zi = z[i]
        g = (e[i] * inv_s * C - cvec[i]) * inv_n + l2 * zi  # gradient of the loss -J
        m = b1 * mm[i] + a1 * g
        v = b2 * vv[i] + a2 * g * g
        mm[i] = m
        vv[i] = v
        z[i] = zi * decay - step * m / (np.sqrt(v) * isb + eps)


# ---- population-specific ---------------------------------------------------------------------


@njit(cache=True, error_model="numpy")
def stream_uniforms(key, n):
    """First ``n`` uniforms of the stream with ``key`` (for the stream-equality test)."""
    state = np.empty(2, np.uint64)
    state[0] = key
    state[1] = 0
    out = np.empty(n)
    for i in range(n):
        out[i] = next_uniform(state)
    return out


@njit(cache=True, error_model="numpy")
def _adam_idle(z, lr, wd, decoupled, b1, b2, eps, t, mm, vv):
    """Adam step of parameters with zero surrogate gradient (a prompt outside the batch).

    Strict IEEE arithmetic (no fastmath) on purpose, as in :func:`_adam_catchup`: with fastmath
    LLVM may fuse ``sqrt(v) * isb + eps`` into an FMA in the vectorized loop body but not in the
    scalar remainder, so an element's rounding would depend on its position in the loop.
    """
    bc1 = 1.0 - b1**t
    bc2 = 1.0 - b2**t
    step = lr / bc1
    isb = 1.0 / np.sqrt(bc2)
    decay = 1.0 - lr * wd if decoupled else 1.0
    l2 = 0.0 if decoupled else wd
    a1 = 1.0 - b1
    a2 = 1.0 - b2
    for i in range(z.shape[0]):
        zi = z[i]
        g = l2 * zi
        m = b1 * mm[i] + a1 * g
        v = b2 * vv[i] + a2 * g * g
        mm[i] = m
        vv[i] = v
        z[i] = zi * decay - step * m / (np.sqrt(v) * isb + eps)


@njit(cache=True, error_model="numpy")
def _adam_catchup(z, mm, vv, idx, n, t0, t1, lr, wd, decoupled, b1, b2, eps):
    """Replay the idle Adam steps ``t0 + 1 .. t1`` of a prompt outside the batch, lazily.

    Only the elements ``idx[:n]`` with Adam state (ever a nonzero gradient) are replayed: an
    element whose moments are zero stays exactly where it is when its gradient is zero (no weight
    decay: the caller uses this only for ``wd == 0``). Each replayed step is :func:`_adam_idle`'s
    element arithmetic with the same scalars, computed in the same place (a table of them would
    let LLVM fold them differently), so the result equals the eager per-step updates bit for bit
    (``tests/test_population.py`` checks it); steps are the outer loop.
    """
    decay = 1.0 - lr * wd if decoupled else 1.0
    l2 = 0.0 if decoupled else wd
    a1 = 1.0 - b1
    a2 = 1.0 - b2
    for t in range(t0 + 1, t1 + 1):
        bc1 = 1.0 - b1**t
        bc2 = 1.0 - b2**t
        step = lr / bc1
        isb = 1.0 / np.sqrt(bc2)
        for j in range(n):
            i = idx[j]
            zi = z[i]
            g = l2 * zi
            m = b1 * mm[i] + a1 * g
            v = b2 * vv[i] + a2 * g * g
            mm[i] = m
            vv[i] = v
            z[i] = zi * decay - step * m / (np.sqrt(v) * isb + eps)


@njit(cache=True, fastmath=FM_EW, error_model="numpy")
def _adam_grad(z, gasc, lr, wd, decoupled, b1, b2, eps, t, mm, vv):
    """Adam step of ``z`` given the ascent direction ``gasc`` (the shared logits theta)."""
    bc1 = 1.0 - b1**t
    bc2 = 1.0 - b2**t
    step = lr / bc1
    isb = 1.0 / np.sqrt(bc2)
    decay = 1.0 - lr * wd if decoupled else 1.0
    l2 = 0.0 if decoupled else wd
    a1 = 1.0 - b1
    a2 = 1.0 - b2
    for i in range(z.shape[0]):
        zi = z[i]
        g = -gasc[i] + l2 * zi
        m = b1 * mm[i] + a1 * g
        v = b2 * vv[i] + a2 * g * g
        mm[i] = m
        vv[i] = v
        z[i] = zi * decay - step * m / (np.sqrt(v) * isb + eps)


@njit(cache=True, fastmath=FM_EW, error_model="numpy")
def _sgd_grad(z, gasc, lr, wd):
    for i in range(z.shape[0]):
        g = gasc[i] - wd * z[i]
        z[i] += lr * g


@njit(cache=True, fastmath=FM, error_model="numpy", inline="always")
def _kadd(acc, cmp, j, x):
    """Neumaier-compensated ``acc[j] += x`` (mirrored from the single-prompt kernels)."""
    a = acc[j]
    t = a + x
    if abs(a) >= abs(x):
        cmp[j] += (a - t) + x
    else:
        cmp[j] += (x - t) + a
    acc[j] = t


@njit(cache=True, fastmath=FM, error_model="numpy")
def _prompt_metrics(z, correct, rare, row, acc, cmp):
    """mu, rare mass, entropy and sum of -log p over rare correct strategies of softmax(z).

    Compensated sums in the single-prompt simulator's order, so mu and the entropy equal its
    ``q_pos`` and ``entropy`` bit for bit on the same logits.
    """
    K = z.shape[0]
    m = _max(z)
    for j in range(5):
        acc[j] = 0.0
        cmp[j] = 0.0
    for i in range(K):
        _kadd(acc, cmp, 0, np.exp(z[i] - m))
    ls = np.log(acc[0] + cmp[0])
    for i in range(K):
        lp = z[i] - m - ls
        p = np.exp(lp)
        _kadd(acc, cmp, 1, -p * lp)
        if correct[i]:
            _kadd(acc, cmp, 2, p)
            if rare[i]:
                _kadd(acc, cmp, 3, p)
                _kadd(acc, cmp, 4, -lp)
    row[P_MU] = acc[2] + cmp[2]
    row[P_TAU] = acc[3] + cmp[3]
    row[P_ENT] = acc[1] + cmp[1]
    row[P_NLL] = acc[4] + cmp[4]


@njit(cache=True, fastmath=FM, error_model="numpy")
def _log_all(theta, phi, correct, rare, zb, out_p):
    acc = np.zeros(5)
    cmp = np.zeros(5)
    for p in range(phi.shape[0]):
        for i in range(theta.shape[0]):
            zb[i] = theta[i] + phi[p, i]
        _prompt_metrics(zb, correct[p], rare[p], out_p[p], acc, cmp)


@njit(cache=True, error_model="numpy")
def _shuffle(perm, state):
    """Fisher-Yates shuffle of ``perm`` in place (no draws for a single element)."""
    for i in range(perm.shape[0] - 1, 0, -1):
        j = int(next_uniform(state) * (i + 1))
        t = perm[i]
        perm[i] = perm[j]
        perm[j] = t


@njit(cache=True, fastmath=FM, error_model="numpy")
def _group_gradient(z, e, cum, correct_p, rare_p, has_rare, N, state, cnt, touched, cvec,
                    ibuf, sc, adv_c, adv_w, rule, zero_sum, counts, dyn, keep,
                    max_res):  # fmt: skip
    """Sample one group of prompt ``z``; fill ``cvec`` (c_k = n_k A_k s_k); return (C, inv_s, nd).

    Same arithmetic as the single-prompt simulator's first inner update (ratio 1). With ``dyn``
    (a trainer's dynamic sampling, as the single-prompt simulator does it) a group of this
    prompt with ``keep[X] == 0`` is redrawn up to ``max_res`` times; the counters (groups,
    active, tail misses) describe the first draw, the redraws are counted in
    ``counts[C_RESAMPLES]``.
    """
    m = _max(z)
    S = _exp_shift(z, e, m, ibuf, sc)
    nd, X = _sample_iid(e, cum, correct_p, N, state, cnt, touched)
    counts[C_GROUPS] += 1
    if 0 < X < N:
        counts[C_ACTIVE] += 1
        if has_rare:
            hit = False
            for j in range(nd):
                if rare_p[touched[j]]:
                    hit = True
            if not hit:
                counts[C_TAIL] += 1
    if dyn:
        r = 0
        while keep[X] == 0 and r < max_res:
            for j in range(nd):
                cnt[touched[j]] = 0
            nd, X = _sample_iid(e, cum, correct_p, N, state, cnt, touched)
            r += 1
        counts[C_RESAMPLES] += r
    inv_s = 1.0 / S
    centred = zero_sum and rule == RULE_LOGPROB
    C = 0.0
    ac = adv_c[X]
    aw = adv_w[X]
    for j in range(nd):
        k = touched[j]
        A = ac if correct_p[k] else aw
        w = 1.0
        if rule == RULE_LINEAR:
            w *= e[k] * inv_s
        c = cnt[k] * A * w
        cvec[k] = c
        if centred:
            C += cnt[k] * A * (w - 1.0)
        else:
            C += c
    return C, inv_s, nd


@njit(cache=True, fastmath=FM, error_model="numpy")
def pop_run(theta0, phi0, correct, rare, has_rare, n_train, B, N, steps, log_steps, adv_c, adv_w,
            key, rule, opt, lr_shared, lr_prompt, wd, b1, b2, eps, zero_sum, adam_per_prompt,
            sparse, dyn, keep, max_res, out_p, out_c):  # fmt: skip
    """One run; fills ``out_p[n_log, P_all, N_PMET]`` and ``out_c[n_log, n_train, N_CNT]``.

    Prompts ``0 .. n_train-1`` are trained on, the rest are held out. ``lr_shared = 0`` freezes
    theta (independent prompts), ``lr_prompt = 0`` freezes every phi_p (one shared policy).
    Adam: one optimizer over all parameters with one step counter (prompts outside the batch
    still move through their momentum, as in a trainer), or with ``adam_per_prompt`` a state
    and step counter per prompt that advance only when the prompt is in the batch.

    ``sparse`` (same results bit for bit): with the global Adam state and no weight decay, a
    prompt's idle steps are replayed lazily (:func:`_adam_catchup`) when it is next drawn or
    logged, on the elements that have Adam state only (those ever sampled, with a zero-sum
    log-prob surrogate, ``C = 0``); with ``C = 0`` the theta gradient adds the sampled
    strategies' terms only (the others are exactly zero).
    """
    K = theta0.shape[0]
    theta = theta0.copy()
    phi = phi0.copy()
    zb = np.empty(K)
    e = np.empty(K)
    cum = np.empty(K)
    cvec = np.zeros(K)
    gth = np.zeros(K)
    ibuf = np.empty(K, np.int64)
    sc = ibuf.view(np.float64)
    cnt = np.zeros(K, np.int64)
    touched = np.empty(min(N, K) + 1, np.int64)
    use_adam = opt != OPT_SGD
    decoupled = opt == OPT_ADAMW
    train_phi = lr_prompt > 0.0
    train_theta = lr_shared > 0.0
    mm = np.zeros((n_train if (use_adam and train_phi) else 1, K))
    vv = np.zeros((n_train if (use_adam and train_phi) else 1, K))
    tp = np.zeros(n_train, np.int64)
    mth = np.zeros(K if use_adam else 1)
    vth = np.zeros(K if use_adam else 1)
    inbatch = np.zeros(n_train, np.bool_)
    lazy = sparse and use_adam and train_phi and not adam_per_prompt and wd == 0.0
    na = n_train if lazy else 1
    act = np.empty((na, K if lazy else 1), np.int64)  # elements of phi_p with Adam state
    nact = np.zeros(na, np.int64)
    isact = np.zeros((na, K if lazy else 1), np.uint8)
    last = np.zeros(na, np.int64)  # phi_p holds the updates of steps 1 .. last[p]
    counts = np.zeros((n_train, N_CNT), np.int64)
    state = np.empty(2, np.uint64)
    state[0] = key
    state[1] = 0
    ostate = np.empty(2, np.uint64)
    ostate[0] = _mix64(key ^ ORDER_SALT)
    ostate[1] = 0
    perm = np.arange(n_train)
    pos = n_train
    inv_n = 1.0 / (B * N)
    n_log = log_steps.shape[0]
    li = 0
    if log_steps[0] == 0:
        _log_all(theta, phi, correct, rare, zb, out_p[0])
        li = 1
    for step in range(1, steps + 1):
        if pos + B > n_train:
            _shuffle(perm, ostate)
            pos = 0
        if train_theta:
            for i in range(K):
                gth[i] = 0.0
        for b in range(B):
            p = perm[pos + b]
            inbatch[p] = True
            if lazy and last[p] < step - 1:
                _adam_catchup(phi[p], mm[p], vv[p], act[p], nact[p], last[p], step - 1,
                              lr_prompt, wd, decoupled, b1, b2, eps)  # fmt: skip
            for i in range(K):
                zb[i] = theta[i] + phi[p, i]
            C, inv_s, nd = _group_gradient(
                zb, e, cum, correct[p], rare[p], has_rare[p], N, state, cnt, touched, cvec,
                ibuf, sc, adv_c, adv_w, rule, zero_sum, counts[p], dyn, keep, max_res,
            )  # fmt: skip
            if train_theta:
                if sparse and C == 0.0:  # the other terms are exactly zero
                    for j in range(nd):
                        k = touched[j]
                        gth[k] += (cvec[k] - e[k] * inv_s * C) * inv_n
                else:
                    for i in range(K):
                        gth[i] += (cvec[i] - e[i] * inv_s * C) * inv_n
            if train_phi:  # phi_p's gradient depends on prompt p only: update it now
                if opt == OPT_SGD:
                    _sgd(phi[p], e, inv_s, cvec, C, inv_n, lr_prompt, wd)
                else:
                    if adam_per_prompt:
                        tp[p] += 1
                        t = tp[p]
                    else:
                        t = step
                    _adam(phi[p], e, inv_s, cvec, C, inv_n, lr_prompt, wd, decoupled, b1, b2,
                          eps, t, mm[p], vv[p])  # fmt: skip
                    if lazy:
                        last[p] = step
                        if C == 0.0:  # only the sampled strategies had a gradient
                            for j in range(nd):
                                k = touched[j]
                                if isact[p, k] == 0:
                                    isact[p, k] = 1
                                    act[p, nact[p]] = k
                                    nact[p] += 1
                        elif nact[p] < K:  # a dense gradient: every element has state
                            for i in range(K):
                                isact[p, i] = 1
                                act[p, i] = i
                            nact[p] = K
            for j in range(nd):
                k = touched[j]
                cvec[k] = 0.0
                cnt[k] = 0
        pos += B
        if train_phi and use_adam and not adam_per_prompt and not lazy:
            for q in range(n_train):
                if not inbatch[q]:
                    _adam_idle(phi[q], lr_prompt, wd, decoupled, b1, b2, eps, step, mm[q], vv[q])
        for b in range(B):
            inbatch[perm[pos - B + b]] = False
        if train_theta:
            if opt == OPT_SGD:
                _sgd_grad(theta, gth, lr_shared, wd)
            else:
                _adam_grad(theta, gth, lr_shared, wd, decoupled, b1, b2, eps, step, mth, vth)
        if li < n_log and step == log_steps[li]:
            if lazy:  # bring every prompt's logits up to this step
                for q in range(n_train):
                    if last[q] < step:
                        _adam_catchup(phi[q], mm[q], vv[q], act[q], nact[q], last[q], step,
                                      lr_prompt, wd, decoupled, b1, b2, eps)  # fmt: skip
                        last[q] = step
            _log_all(theta, phi, correct, rare, zb, out_p[li])
            for q in range(n_train):
                for j in range(N_CNT):
                    out_c[li, q, j] = counts[q, j]
                    counts[q, j] = 0
            li += 1


@njit(cache=True, parallel=True, error_model="numpy")
def pop_batch(theta0, phi0, correct, rare, has_rare, n_train, B, N, steps, log_steps, adv_c, adv_w,
              keys, rule, opt, lr_shared, lr_prompt, wd, b1, b2, eps, zero_sum, adam_per_prompt,
              sparse, dyn, keep, max_res, out_p, out_c):  # fmt: skip
    """Runs ``r = 0 .. len(keys)-1`` in parallel (each run sequential on one thread)."""
    for r in prange(keys.shape[0]):
        pop_run(theta0, phi0, correct, rare, has_rare, n_train, B, N, steps, log_steps, adv_c,
                adv_w, keys[r], rule, opt, lr_shared, lr_prompt, wd, b1, b2, eps, zero_sum,
                adam_per_prompt, sparse, dyn, keep, max_res, out_p[r], out_c[r])  # fmt: skip


@njit(cache=True, fastmath=FM, error_model="numpy")
def batch_gradients(theta, phi, correct, rare, has_rare, n_train, B, N, adv_c, adv_w, key, rule,
                    zero_sum, n_draws, gsum, sqsum):  # fmt: skip
    """Monte Carlo of the batch gradient at fixed parameters (no update).

    Each draw: a batch of ``B`` distinct train prompts (uniform) and their groups. Accumulates
    ``gsum[0] += g_theta`` (sum over the batch), ``gsum[1 + p] += g_phi_p`` and returns in
    ``sqsum`` the summed squared norms ``[|g_theta|^2, |g_phi|^2]`` over draws.
    """
    K = theta.shape[0]
    zb = np.empty(K)
    e = np.empty(K)
    cum = np.empty(K)
    cvec = np.zeros(K)
    gth = np.zeros(K)
    ibuf = np.empty(K, np.int64)
    sc = ibuf.view(np.float64)
    cnt = np.zeros(K, np.int64)
    touched = np.empty(min(N, K) + 1, np.int64)
    counts = np.zeros(N_CNT, np.int64)
    state = np.empty(2, np.uint64)
    state[0] = key
    state[1] = 0
    ostate = np.empty(2, np.uint64)
    ostate[0] = _mix64(key ^ ORDER_SALT)
    ostate[1] = 0
    perm = np.arange(n_train)
    inv_n = 1.0 / (B * N)
    keep_all = np.ones(N + 1, np.uint8)  # no dynamic sampling here
    for _ in range(n_draws):
        _shuffle(perm, ostate)
        for i in range(K):
            gth[i] = 0.0
        sq_phi = 0.0
        for b in range(B):
            p = perm[b]
            for i in range(K):
                zb[i] = theta[i] + phi[p, i]
            C, inv_s, nd = _group_gradient(
                zb, e, cum, correct[p], rare[p], has_rare[p], N, state, cnt, touched, cvec,
                ibuf, sc, adv_c, adv_w, rule, zero_sum, counts, False, keep_all, 0,
            )  # fmt: skip
            for i in range(K):
                g = (cvec[i] - e[i] * inv_s * C) * inv_n
                gth[i] += g
                gsum[1 + p, i] += g
                sq_phi += g * g
            for j in range(nd):
                k = touched[j]
                cvec[k] = 0.0
                cnt[k] = 0
        sq_th = 0.0
        for i in range(K):
            gsum[0, i] += gth[i]
            sq_th += gth[i] * gth[i]
        sqsum[0] += sq_th
        sqsum[1] += sq_phi
