"""Numba kernels of the simulator: the hot loops only (arrays and seeds in, outputs filled).

ONE FILE ON PURPOSE: Numba's on-disk cache (``cache=True``) invalidates a kernel only when its own
source file changes, so every function a kernel compiles in (random streams, sum tree, samplers,
optimizers, the parameter records) lives here; :mod:`.rng` and :mod:`.sumtree` only re-export.
Kernels take typed parameter records (:class:`Problem`, :class:`Algorithm`, :class:`Optimizer`,
:class:`Logging`, :class:`Tree`) and advance a :class:`State` over a chunk of steps.

Everything here is compiled with ``cache=True``. Runs are independent and each run is computed
sequentially by one thread with its own counter-based random stream (:mod:`.rng`), so the
numbers do not depend on the number of threads. ``fastmath`` is restricted to flags that keep
IEEE semantics for NaN/inf; reassociation only changes the (fixed) order of a run's own sums.

Update rule (one optimizer step on a sampled group, token-mean aggregation, theory.md sections
3 and 5): with ``n_k`` draws of action ``k``, advantage ``A_k`` (per-X table, focal weight
included, P-13) and per-sample weight ``w_k``, the surrogate ``J = (1/N) sum_j A_j w_j f(p_j)``
has logit gradient

    dJ/dz_i = (1/N) (c_i - p_i C),   c_k = n_k A_k s_k,   C = sum_k c_k,

where ``s_k = w_k`` for the log-prob rule (``f = log p``) and ``s_k = w_k p_k`` for the linear
surrogate (``f = p``, the paper's simulation; cf. P-5). For GRPO and DAPO (PPO clipped surrogate
``min(r A, clip(r) A)`` with ``r = p/p_old``) ``w_k = 0`` where the clip is active and otherwise
``r_k`` (log-prob: ``d(r A) = A r dlog p``) or 1 (linear: ``d(A r p_old) = A dp``); for CISPO
(P-15, P-16) ``w_k = clip(r_k, 1 - eps_low, 1 + eps_high)`` under a stop-gradient. At the first
inner update ``r = 1`` exactly, so all three coincide. Dual-clip PPO (verl's ``clip_ratio_c = c``)
bounds the loss of a negative advantage by ``c |A|``, so there ``w_k = 0`` also where ``r_k > c``
(``Algorithm.dual_c``, ``inf`` = off).

Dynamic sampling: a group the filter drops is redrawn up to ``max_res`` times; for binary rewards
every filter (DAPO, verl, OpenRLHF) depends on the group only through ``X``, so it is the table
``Algorithm.keep[X]`` (built by ``SimConfig.ds_keep``).

Metric layout of ``out[..., :]``: 0 q_pos, 1 m_ret, 2 entropy, 3 groups, 4 active, 5 resamples,
then ``n_sub`` subset masses, then ``n_sub`` tail-miss counts, then ``n_sub`` subset mean NLLs,
then the kept-group counters of dynamic sampling (kept active groups, then ``n_sub`` tail misses
among them); see :func:`n_metrics` and the ``m_*`` offset helpers.

Equal-progress thresholds (``Logging.thresholds``, theory.md section 11): each run records, per
threshold t, the first step whose Q_pos is >= t and the metrics row of that step (``thr_out``,
``thr_step``; step -1 = not reached), without any per-step logging; see :func:`_thr_check`.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit, prange

from .._numba_cache import register as _register_cache
from .keys import GOLDEN_INT, M1_INT, M2_INT

_register_cache()  # compiled code goes to the user cache folder, never site-packages

# ---------------------------------------------------------------------------------------------
# Counter-based random stream (SplitMix64 words mix64(key + i * GOLDEN), see .keys) and the sum
# tree. They live in this file, not in rng.py / sumtree.py (which re-export them), because Numba's
# on-disk cache of a kernel is invalidated only by changes to the kernel's own source file: code
# inlined from another module would silently stay stale after an edit.
# ---------------------------------------------------------------------------------------------

GOLDEN = np.uint64(GOLDEN_INT)
M1 = np.uint64(M1_INT)
M2 = np.uint64(M2_INT)
S30 = np.uint64(30)
S27 = np.uint64(27)
S31 = np.uint64(31)
S11 = np.uint64(11)
ONE = np.uint64(1)
INV53 = 1.0 / 9007199254740992.0  # 2**-53

# ---------------------------------------------------------------------------------------------
# Decorator flavours, defined once. Every kernel is cached on disk (cache=True) and uses
# error_model="numpy".
# No "reassoc" where a loop sums: a vectorized reduction's order can depend on the arrays'
# alignment in memory, which changes between calls (measured: last-bit differences between
# reruns). Element-wise loops whose only reduction is a max (exact in any order) may reassociate.
# error_model="numpy" everywhere: Python's error model puts a zero-division branch in every
# float division, which blocks vectorization (measured 4x on the Adam loop); no kernel divides
# by zero by construction (totals and sampled probabilities are positive).
FM = {"nsz", "arcp", "contract", "afn"}
# Small per-step helpers are inlined at Numba IR level (inline="always"): measured 2x on small K
# (calls cost reference-count traffic); they then take the caller's FM flags. _sgd and _adam stay
# separate functions so that they keep FM_EW and vectorize.
FM_EW = {"nsz", "arcp", "contract", "afn", "reassoc"}

_COMMON = {"cache": True, "error_model": "numpy"}
#: exact IEEE arithmetic (random streams, sum-tree construction)
jit_exact = njit(**_COMMON)
#: exact IEEE arithmetic, inlined into the caller (which then applies its own flags)
jit_exact_inline = njit(inline="always", **_COMMON)
#: a compiled function with the safe fast-math flags (per-run kernels, metrics)
jit_fast = njit(fastmath=FM, **_COMMON)
#: a small per-step helper inlined into the caller
jit_fast_inline = njit(fastmath=FM, inline="always", **_COMMON)
#: an element-wise loop that may reassociate (its only reduction, if any, is order-free)
jit_elementwise = njit(fastmath=FM_EW, **_COMMON)
#: the parallel loops over runs (prange)
jit_parallel = njit(parallel=True, **_COMMON)


@jit_exact_inline
def _mix64(x):
    x = (x ^ (x >> S30)) * M1
    x = (x ^ (x >> S27)) * M2
    return x ^ (x >> S31)


@jit_exact_inline
def next_u64(state):
    """Next 64-bit word of the stream ``state = [key, counter]`` (uint64 array, advanced)."""
    c = state[1] + ONE
    state[1] = c
    return _mix64(state[0] + c * GOLDEN)


@jit_exact_inline
def next_uniform(state):
    """Uniform double in [0, 1) with 53 random bits."""
    return float(next_u64(state) >> S11) * INV53


@jit_exact_inline
def next_uniform_open0(state):
    """Uniform double in (0, 1] with 53 random bits (safe argument for ``log``)."""
    return (float(next_u64(state) >> S11) + 1.0) * INV53


@jit_exact_inline
def next_exp(state):
    """Standard exponential variate ``-log(U)``, U in (0, 1]."""
    return -np.log(next_uniform_open0(state))


# Sum tree over exp(z - shift): tree has 2P slots (P = smallest power of two >= K), leaf k is slot
# P + k (padding leaves 0), slot j holds tree[2j] + tree[2j+1], the root tree[1] is the total.
# tree_set recomputes every ancestor from its two children, so sums never drift from the leaves.


@jit_exact
def tree_build(z, tree, P):
    """Fill leaves with ``exp(z - max z)`` and all parents; return the shift ``max z``."""
    K = z.shape[0]
    m = z[0]
    for i in range(1, K):
        if z[i] > m:
            m = z[i]
    for i in range(K):
        tree[P + i] = np.exp(z[i] - m)
    for i in range(P + K, 2 * P):
        tree[i] = 0.0
    for j in range(P - 1, 0, -1):
        tree[j] = tree[2 * j] + tree[2 * j + 1]
    return m


@jit_exact_inline
def tree_set(tree, P, k, w):
    """Set leaf ``k`` to ``w`` and recompute its ancestors."""
    j = P + k
    tree[j] = w
    j >>= 1
    while j >= 1:
        tree[j] = tree[2 * j] + tree[2 * j + 1]
        j >>= 1


@jit_exact_inline
def tree_find(tree, P, t):
    """First leaf whose prefix sum exceeds ``t`` (the inverse CDF), for ``0 <= t < tree[1]``.

    Never returns a zero-weight leaf: at the top end, where rounding can push ``t`` past the last
    positive leaf, it descends left. (A branch-free descent was measured 1.7x slower at K = 6:
    it serializes the loads that speculation overlaps.)
    """
    j = 1
    while j < P:
        left = tree[2 * j]
        if t < left or tree[2 * j + 1] == 0.0:
            j = 2 * j
        else:
            t -= left
            j = 2 * j + 1
    return j - P


M_QPOS, M_MRET, M_ENT, M_GROUPS, M_ACTIVE, M_RESAMPLES, M_SUB0 = 0, 1, 2, 3, 4, 5, 6
RULE_LINEAR, RULE_LOGPROB = 0, 1
ALGO_PPO, ALGO_CISPO = 0, 1
OPT_SGD, OPT_ADAM, OPT_ADAMW = 0, 1, 2
SAMPLER_IID, SAMPLER_SORTED = 0, 1


def n_metrics(n_sub: int) -> int:
    """Number of metric slots for ``n_sub`` named subsets."""
    return M_SUB0 + 4 * n_sub + 1


def m_nll(n_sub: int) -> int:
    """First slot of the subsets' mean NLLs (``n_sub`` slots)."""
    return M_SUB0 + 2 * n_sub


def m_kept_active(n_sub: int) -> int:
    """Slot of the count of kept active groups (dynamic sampling)."""
    return M_SUB0 + 3 * n_sub


def m_kept_tail(n_sub: int) -> int:
    """First slot of the tail-miss counts among kept active groups (``n_sub`` slots)."""
    return M_SUB0 + 3 * n_sub + 1


@jit_elementwise
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


@jit_fast
def _metrics(z, correct, submask, p0, sum_p0c, row):
    """Q_pos, M_ret (P-26), entropy, subset masses and subset mean NLLs of softmax(z) into ``row``.

    Computed from the logits at logged steps only (O(K)), with compensated sums, so the logged
    values are accurate to a few ulps whatever K. The mean NLL of a subset S (issue 11 item 3) is
    ``(1/|S|) sum_{k in S} -log p_k = logsumexp(z) - (1/|S|) sum_{k in S} z_k``, summed from the
    same ``log p_k`` as the entropy (exact for any |S|, also a single action).
    """
    K = z.shape[0]
    n_sub = submask.shape[0]
    m = _max(z)
    acc = np.zeros(4 + 2 * n_sub)
    cmp = np.zeros(4 + 2 * n_sub)
    size = np.zeros(n_sub, np.int64)
    for i in range(K):
        _kadd(acc, cmp, 0, np.exp(z[i] - m))
    ls = np.log(acc[0] + cmp[0])
    for i in range(K):
        lp = z[i] - m - ls
        p = np.exp(lp)
        _kadd(acc, cmp, 1, -p * lp)
        if correct[i]:
            _kadd(acc, cmp, 2, p)
            d = p0[i] - p
            if d > 0.0:
                _kadd(acc, cmp, 3, d)
        for j in range(n_sub):
            if submask[j, i]:
                _kadd(acc, cmp, 4 + j, p)
                _kadd(acc, cmp, 4 + n_sub + j, -lp)
                size[j] += 1
    row[M_QPOS] = acc[2] + cmp[2]
    row[M_MRET] = 1.0 - (acc[3] + cmp[3]) / sum_p0c
    row[M_ENT] = acc[1] + cmp[1]
    for j in range(n_sub):
        row[M_SUB0 + j] = acc[4 + j] + cmp[4 + j]
        row[M_SUB0 + 2 * n_sub + j] = (acc[4 + n_sub + j] + cmp[4 + n_sub + j]) / size[j]


@jit_fast_inline
def _log_row(z, correct, submask, p0, sum_p0c, row, groups, active, resamples, tails):
    """Write the metrics of softmax(z) and the group counters into ``row``; reset ``tails``."""
    _metrics(z, correct, submask, p0, sum_p0c, row)
    row[M_GROUPS] = groups
    row[M_ACTIVE] = active
    row[M_RESAMPLES] = resamples
    n_sub = submask.shape[0]
    for s in range(n_sub):
        row[M_SUB0 + n_sub + s] = tails[s]
        tails[s] = 0
    # kept-group counters (dynamic sampling): tails[n_sub + s] and tails[2 n_sub]
    row[M_SUB0 + 3 * n_sub] = tails[2 * n_sub]
    tails[2 * n_sub] = 0
    for s in range(n_sub):
        row[M_SUB0 + 3 * n_sub + 1 + s] = tails[n_sub + s]
        tails[n_sub + s] = 0


_BLOCK = 64  # actions per block of the i.i.d. sampler's two-level CDF


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
        while ck <= t and k < K - 1:
            k += 1
            ck += e[k]
        kk = k
        while e[kk] == 0.0 and kk > 0:  # rounding at the top end
            kk -= 1
        touched[nd] = kk
        nd += cnt[kk] == 0
        cnt[kk] += 1
        X += correct[kk]
    return nd, X


@jit_fast_inline
def _count_tail(touched, nd, submask, hit, tails):
    n_sub = submask.shape[0]
    for s in range(n_sub):
        hit[s] = False
    for j in range(nd):
        k = touched[j]
        for s in range(n_sub):
            if submask[s, k]:
                hit[s] = True
    for s in range(n_sub):
        if not hit[s]:
            tails[s] += 1


@jit_elementwise
def _sgd(z, e, inv_s, cvec, C, inv_n, lr, wd):
    for i in range(z.shape[0]):
        g = (cvec[i] - e[i] * inv_s * C) * inv_n - wd * z[i]
        z[i] += lr * g


@jit_elementwise
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
        c = cnt[k] * A * w
        cvec[k] = c
        if centred:
            C += cnt[k] * A * (w - 1.0)
        else:
            C += c
    return C


# ---------------------------------------------------------------------------------------------
# Parameter records. The kernels take a handful of typed records instead of ~27 positional
# scalars, so two parameters of the same type cannot be swapped silently: the runner builds
# each record once, by field name, from the SimConfig (runner.build_records). Numba compiles
# NamedTuples as heterogeneous tuples with named fields (no overhead).
# ---------------------------------------------------------------------------------------------


class Problem(NamedTuple):
    """The policy and the rewards of one prompt (shared by every run)."""

    z0: np.ndarray  # initial logits, float64[K]
    correct: np.ndarray  # uint8[K], 1 = correct action
    p0: np.ndarray  # softmax(z0), float64[K] (for M_ret, P-26)
    sum_p0c: float  # initial correct mass
    adv_c: np.ndarray  # float64[N + 1]: focal advantage of a correct sample given X correct
    adv_w: np.ndarray  # float64[N + 1]: same for an incorrect sample


class Algorithm(NamedTuple):
    """What one step does: group size, surrogate, clipping, inner updates, resampling."""

    N: int
    rule: int  # RULE_*
    algo: int  # ALGO_*
    inner: int  # optimizer steps per sampled group
    clip_lo: float  # eps_low: ratios below 1 - clip_lo are clipped
    clip_hi: float  # eps_high: ratios above 1 + clip_hi are clipped
    dyn: bool  # dynamic sampling
    max_res: int  # cap on redraws per step
    sampler: int  # SAMPLER_*
    zero_sum: bool  # sum_k n_k A_k = 0 for every X (see _coefficients)
    keep: np.ndarray  # uint8[N + 1]: 1 if dynamic sampling keeps a group with X correct draws
    dual_c: float  # dual-clip PPO: no gradient where A < 0 and r > dual_c (inf = off)


class Optimizer(NamedTuple):
    """Optimizer kind and hyperparameters (``b1``/``b2``/``eps`` unused by SGD)."""

    kind: int  # OPT_*
    lr: float
    wd: float
    b1: float
    b2: float
    eps: float


class Logging(NamedTuple):
    """Which steps are logged, which subsets are measured, which Q_pos thresholds are tracked."""

    log_steps: np.ndarray  # int64[n_log], sorted
    submask: np.ndarray  # uint8[n_sub, K]
    thresholds: np.ndarray  # float64[n_thr], sorted ascending, each in (0, 1)
    n_steps: int  # total steps of a run (the last state is checked against the thresholds)


class Tree(NamedTuple):
    """Sum-tree path settings: rebuild period and the tabulated ``exp(dz)`` (1x1 = off)."""

    renorm_every: int
    etab_c: np.ndarray  # float64[N + 1, N + 1] or [1, 1]
    etab_w: np.ndarray


#: Slots of the per-run integer state ``State.ints[r]`` carried between chunks of steps.
I_TOPT, I_LOG, I_GROUPS, I_ACTIVE, I_RESAMPLES, I_COUNTDOWN = 0, 1, 2, 3, 4, 5
N_INTS = 6


class State(NamedTuple):
    """Everything a run carries from one chunk of steps to the next (one row per run).

    ``z`` logits; ``mm``/``vv`` Adam moments (width 1 for SGD); ``rng`` the random stream
    ``[key, counter]``; ``ints`` the slots ``I_*``; ``tails`` the counters since the last logged
    step (``n_sub`` first-draw tail misses, ``n_sub`` tail misses among kept active groups, then
    the kept active groups); ``tree``/``shift`` the sum tree and its shift (width 1 on the dense
    path).
    """

    z: np.ndarray
    mm: np.ndarray
    vv: np.ndarray
    rng: np.ndarray
    ints: np.ndarray
    tails: np.ndarray
    tree: np.ndarray
    shift: np.ndarray


def new_state(prob: Problem, log: Logging, opt: Optimizer, keys: np.ndarray, tree: bool) -> State:
    """Fresh state of ``len(keys)`` runs at step 0 (the tree itself is built by the kernel)."""
    R = keys.shape[0]
    K = prob.z0.shape[0]
    P = 1
    while P < K:
        P *= 2
    width = K if opt.kind != OPT_SGD else 1
    rng = np.zeros((R, 2), np.uint64)
    rng[:, 0] = keys
    return State(
        z=np.tile(prob.z0, (R, 1)),
        mm=np.zeros((R, width)),
        vv=np.zeros((R, width)),
        rng=rng,
        ints=np.zeros((R, N_INTS), np.int64),
        tails=np.zeros((R, 2 * log.submask.shape[0] + 1), np.int64),
        tree=np.zeros((R, 2 * P if tree else 1)),
        shift=np.zeros(R),
    )


SAMPLER_TREE = 2  # Algorithm.sampler of the sum-tree path (draws from State.tree)


@jit_fast_inline
def _first_row(z, correct, submask, p0, sum_p0c, log_steps, out):
    """Row 0 (step 0, before any update) if it is logged; returns the next log index."""
    if log_steps[0] != 0:
        return 0
    n_sub = submask.shape[0]
    _metrics(z, correct, submask, p0, sum_p0c, out[0])
    for j in range(M_GROUPS, M_SUB0):
        out[0, j] = 0.0
    for s in range(n_sub):
        out[0, M_SUB0 + n_sub + s] = 0.0
    for j in range(M_SUB0 + 3 * n_sub, M_SUB0 + 4 * n_sub + 1):  # kept-group counters
        out[0, j] = 0.0
    return 1


#: The cheap per-step Q_pos (uncompensated sums of the step's exp(z - max)) selects the steps at
#: which the exact Q_pos of :func:`_metrics` decides a threshold: those with cheap Q_pos >= t -
#: THR_MARGIN. Its error (a few ulps per summed term, <= 1e-8 relative at K = 1e8) is far below.
THR_MARGIN = 1e-6


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


@jit_fast
def _tree_correct_sum(tree, P, correct):
    """Compensated sum of the correct leaves of the sum tree: ``(sum, compensation)``."""
    acc = np.zeros(1)
    cmp = np.zeros(1)
    for k in range(correct.shape[0]):
        if correct[k]:
            _kadd(acc, cmp, 0, tree[P + k])
    return acc[0], cmp[0]


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
def _draw_tree(tree, P, correct, N, state, cnt, touched):
    """N draws from the sum tree (inverse CDF of the same uniforms as the i.i.d. sampler)."""
    nd = 0
    X = 0
    for _ in range(N):
        k = tree_find(tree, P, next_uniform(state) * tree[1])
        touched[nd] = k
        nd += cnt[k] == 0
        cnt[k] += 1
        X += correct[k]
    return nd, X


@jit_fast_inline
def _draw_dense(sampler, e, S, cum, gaps, correct, N, state, cnt, touched):
    """N draws with the dense path's sampler; returns (distinct actions, correct draws X)."""
    if sampler == SAMPLER_IID:
        return _sample_iid(e, cum, correct, N, state, cnt, touched)
    return _sample_sorted(e, S, gaps, correct, N, state, cnt, touched)


# The tree and dense draws are separate functions on purpose, and the group bookkeeping (active
# count, tail misses, dynamic-sampling redraws) is written out in each run loop: one draw function
# dispatching on the sampler at run time measured 1.7x slower on the sum-tree path at K = 6,
# N = 8, and a shared bookkeeping helper returning its counts 1.3x slower (CPU time, interleaved
# runs on the loaded 2-core machine); the per-draw bookkeeping itself is shared in each sampler.


@jit_fast_inline
def _clear_counts(cnt, touched, nd):
    """Reset the draw counts of a group (before a redraw or after the update)."""
    for j in range(nd):
        cnt[touched[j]] = 0


@jit_fast_inline
def _local_rng(state_io):
    """A run-local copy of the random stream ``[key, counter]`` (written back at chunk end): a
    fresh local array aliases nothing, so LLVM keeps the counter in a register across draws."""
    state = np.empty(2, np.uint64)
    state[0] = state_io[0]
    state[1] = state_io[1]
    return state


@jit_fast
def dense_run(prob, log, alg, opt, z_io, mm_io, vv_io, state_io, ints, tails_io, step_lo, step_hi,
              out, thr_out, thr_step):  # fmt: skip
    """Steps ``step_lo+1 .. step_hi`` of one run of the dense path (every logit moves).

    ``z_io``, ``mm_io``, ``vv_io``, ``state_io``, ``ints``, ``tails_io`` are the run's rows of
    :class:`State` (advanced in place; the random stream is copied in and out);
    ``out[n_log, n_metrics]`` receives the logged rows. ``step_lo = 0`` starts the run (and
    writes row 0 if step 0 is logged). ``thr_out[n_thr, n_metrics]`` and ``thr_step[n_thr]``
    (-1 = pending) receive the threshold crossings: the state after step s is checked at the
    start of step s + 1 (from that step's ``exp(z - max)``, no extra exp) and the last state at
    the end of the run.
    """
    K = z_io.shape[0]
    N = alg.N
    # record fields as locals: reading an array out of a record inside the loop costs
    # reference-count traffic per access
    correct = prob.correct
    p0 = prob.p0
    sum_p0c = prob.sum_p0c
    adv_c = prob.adv_c
    adv_w = prob.adv_w
    submask = log.submask
    log_steps = log.log_steps
    n_log = log_steps.shape[0]
    dyn = alg.dyn
    max_res = alg.max_res
    keep = alg.keep
    dual_c = alg.dual_c
    n_sub = submask.shape[0]
    sampler = alg.sampler
    z = z_io
    mm = mm_io
    vv = vv_io
    tails = tails_io
    state = _local_rng(state_io)
    e = np.empty(K)
    cum = np.empty(K if sampler == SAMPLER_IID else 1)
    gaps = np.empty(N + 1 if sampler == SAMPLER_SORTED else 1)
    cvec = np.zeros(K)
    ibuf = np.empty(K, np.int64)
    sc = ibuf.view(np.float64)
    cnt = np.zeros(K, np.int64)
    D = min(N, K)
    touched = np.empty(D + 1, np.int64)  # +1: branch-free writes
    pold = np.empty(D)
    hit = np.zeros(n_sub, np.bool_)
    inv_n = 1.0 / N
    lo_b = 1.0 - alg.clip_lo
    hi_b = 1.0 + alg.clip_hi
    ktails = tails[n_sub : 2 * n_sub]  # tail misses among kept active groups (dynamic sampling)
    thresholds = log.thresholds
    n_thr = thresholds.shape[0]
    ti = _thr_pending(thr_step)
    scratch = np.zeros(out.shape[1])
    cf = np.empty(K if ti < n_thr else 1)  # the correct mask as floats (cheap Q_pos)
    if ti < n_thr:
        for i in range(K):
            cf[i] = correct[i]
    li = ints[I_LOG]
    if step_lo == 0:
        li = _first_row(z, correct, submask, p0, sum_p0c, log_steps, out)
    t_opt = ints[I_TOPT]
    groups = ints[I_GROUPS]
    active = ints[I_ACTIVE]
    resamples = ints[I_RESAMPLES]
    zmax = _max(z)  # (the value left by the previous update, recomputed: max is exact)
    for step in range(step_lo + 1, step_hi + 1):
        S = _exp_shift(z, e, zmax, ibuf, sc)
        if ti < n_thr and _masked_sum8(e, cf) >= (thresholds[ti] - THR_MARGIN) * S:
            ti = _thr_check(
                z, correct, submask, p0, sum_p0c, thresholds, ti, step - 1, scratch, thr_out,
                thr_step,
            )  # fmt: skip
        nd, X = _draw_dense(sampler, e, S, cum, gaps, correct, N, state, cnt, touched)
        groups += 1
        if 0 < X < N:  # an active group (mixed rewards, P-7): count its tail misses
            active += 1
            if n_sub > 0:
                _count_tail(touched, nd, submask, hit, tails)
        if dyn:  # dynamic sampling: redraw a group the filter drops (keep[X] == 0)
            r = 0
            while keep[X] == 0 and r < max_res:
                _clear_counts(cnt, touched, nd)
                nd, X = _draw_dense(sampler, e, S, cum, gaps, correct, N, state, cnt, touched)
                r += 1
            resamples += r
            if 0 < X < N:  # the kept group is active: count it and its tail misses
                tails[2 * n_sub] += 1
                if n_sub > 0:
                    _count_tail(touched, nd, submask, hit, ktails)
        inv_s = 1.0 / S
        if alg.inner > 1:
            for j in range(nd):
                pold[j] = e[touched[j]] * inv_s
        for u in range(alg.inner):
            if u > 0:
                S = _exp_shift(z, e, zmax, ibuf, sc)
                inv_s = 1.0 / S
            C = _coefficients(
                touched, nd, cnt, correct, X, adv_c, adv_w, e, inv_s, pold,
                u == 0, alg.rule, alg.algo, lo_b, hi_b, alg.zero_sum, cvec, dual_c,
            )  # fmt: skip
            t_opt += 1
            if opt.kind == OPT_SGD:
                _sgd(z, e, inv_s, cvec, C, inv_n, opt.lr, opt.wd)
            else:
                _adam(
                    z, e, inv_s, cvec, C, inv_n, opt.lr, opt.wd, opt.kind == OPT_ADAMW, opt.b1,
                    opt.b2, opt.eps, t_opt, mm, vv,
                )  # fmt: skip
            zmax = _max(z)
            for j in range(nd):
                cvec[touched[j]] = 0.0
        for j in range(nd):
            cnt[touched[j]] = 0
        if li < n_log and step == log_steps[li]:
            _log_row(z, correct, submask, p0, sum_p0c, out[li], groups, active, resamples, tails)
            groups = 0
            active = 0
            resamples = 0
            li += 1
    if ti < n_thr and step_hi == log.n_steps:  # the last state of the run
        ti = _thr_check(
            z, correct, submask, p0, sum_p0c, thresholds, ti, step_hi, scratch, thr_out, thr_step
        )
    state_io[1] = state[1]
    ints[I_TOPT] = t_opt
    ints[I_LOG] = li
    ints[I_GROUPS] = groups
    ints[I_ACTIVE] = active
    ints[I_RESAMPLES] = resamples


@jit_parallel
def dense_batch(prob, log, alg, opt, st, step_lo, step_hi, out, thr_out, thr_step):
    """:func:`dense_run` for every run (row) of ``st`` in parallel; ``out[r, n_log, n_met]``,
    ``thr_out[r, n_thr, n_met]``, ``thr_step[r, n_thr]``."""
    for r in prange(st.z.shape[0]):
        dense_run(
            prob, log, alg, opt, st.z[r], st.mm[r], st.vv[r], st.rng[r], st.ints[r],
            st.tails[r], step_lo, step_hi, out[r], thr_out[r], thr_step[r],
        )  # fmt: skip


@jit_fast
def tree_run(prob, log, alg, opt, tr, z_io, tree_io, shift_io, state_io, ints, tails_io, step_lo,
             step_hi, out, thr_out, thr_step):  # fmt: skip
    """Steps ``step_lo+1 .. step_hi`` of one run of the sum-tree path (SGD + log-prob + one
    update + zero-sum advantages).

    Only sampled logits move (``dz_k = lr n_k A_k / N``, theory.md section 6), so a sum tree
    over ``exp(z - shift)`` gives O(log K) sampling and updates. Parents are recomputed from
    their children after every leaf change (no drift); the tree is rebuilt from the logits with
    a fresh shift every ``renorm_every`` steps or when a logit rises 64 above the shift. For
    small N the new leaf weight is the old one times a tabulated ``exp(dz)`` (``etab_c[X, n]``,
    ``etab_w[X, n]``; 1x1 arrays disable it): the weights then carry rounding of order 1e-16 per
    update relative to ``exp(z - shift)`` until the next rebuild, which only affects a draw whose
    uniform falls within that distance of a CDF boundary; the logits and every logged metric are
    computed from ``z`` itself. Sampling is the same inverse-CDF map of the same uniforms as the
    dense i.i.d. sampler. The tree and ``shift_io[0]`` are carried between chunks.
    Thresholds (``thr_out``, ``thr_step`` as in :func:`dense_run`): the cheap Q_pos is a
    compensated running sum of the correct leaves over ``tree[1]`` (recomputed from the leaves at
    each chunk start and rebuild), so tracking costs O(1) per update.
    """
    K = z_io.shape[0]
    N = alg.N
    # record fields as locals: reading an array out of a record inside the loop costs
    # reference-count traffic per access
    correct = prob.correct
    p0 = prob.p0
    sum_p0c = prob.sum_p0c
    adv_c = prob.adv_c
    adv_w = prob.adv_w
    submask = log.submask
    log_steps = log.log_steps
    n_log = log_steps.shape[0]
    dyn = alg.dyn
    max_res = alg.max_res
    keep = alg.keep
    n_sub = submask.shape[0]
    P = 1
    while P < K:
        P *= 2
    z = z_io
    tree = tree_io
    tails = tails_io
    state = _local_rng(state_io)
    cnt = np.zeros(K, np.int64)
    D = min(N, K)
    touched = np.empty(D + 1, np.int64)  # +1: branch-free writes
    hit = np.zeros(n_sub, np.bool_)
    inv_n = 1.0 / N
    lr = opt.lr
    ktails = tails[n_sub : 2 * n_sub]  # tail misses among kept active groups (dynamic sampling)
    thresholds = log.thresholds
    n_thr = thresholds.shape[0]
    ti = _thr_pending(thr_step)
    scratch = np.zeros(out.shape[1])
    li = ints[I_LOG]
    countdown = ints[I_COUNTDOWN]
    shift = shift_io[0]
    if step_lo == 0:
        shift = tree_build(z, tree, P)
        countdown = tr.renorm_every
        li = _first_row(z, correct, submask, p0, sum_p0c, log_steps, out)
    track = ti < n_thr  # keep the running correct mass wc (+ compensation wcc) of the tree
    wc = 0.0
    wcc = 0.0
    if track:
        wc, wcc = _tree_correct_sum(tree, P, correct)
    groups = ints[I_GROUPS]
    active = ints[I_ACTIVE]
    resamples = ints[I_RESAMPLES]
    etab_c = tr.etab_c
    etab_w = tr.etab_w
    renorm_every = tr.renorm_every
    use_tab = etab_c.shape[0] == N + 1
    for step in range(step_lo + 1, step_hi + 1):
        if track and wc + wcc >= (thresholds[ti] - THR_MARGIN) * tree[1]:
            ti = _thr_check(
                z, correct, submask, p0, sum_p0c, thresholds, ti, step - 1, scratch, thr_out,
                thr_step,
            )  # fmt: skip
            track = ti < n_thr
        nd, X = _draw_tree(tree, P, correct, N, state, cnt, touched)
        groups += 1
        if 0 < X < N:  # an active group (mixed rewards, P-7): count its tail misses
            active += 1
            if n_sub > 0:
                _count_tail(touched, nd, submask, hit, tails)
        if dyn:  # dynamic sampling: redraw a group the filter drops (keep[X] == 0)
            r = 0
            while keep[X] == 0 and r < max_res:
                _clear_counts(cnt, touched, nd)
                nd, X = _draw_tree(tree, P, correct, N, state, cnt, touched)
                r += 1
            resamples += r
            if 0 < X < N:  # the kept group is active: count it and its tail misses
                tails[2 * n_sub] += 1
                if n_sub > 0:
                    _count_tail(touched, nd, submask, hit, ktails)
        ac = adv_c[X]
        aw = adv_w[X]
        countdown -= 1  # step % renorm_every == 0, without an integer division per step
        rebuild = countdown == 0
        if rebuild:
            countdown = renorm_every
        for j in range(nd):
            k = touched[j]
            c = correct[k]
            n = cnt[k]
            A = ac if c else aw
            zk = z[k] + lr * ((n * A) * inv_n)
            z[k] = zk
            if zk - shift > 64.0:
                rebuild = True
            if use_tab:  # exp(zk - shift) as old weight * tabulated exp(dz): no exp per update
                w = tree[P + k] * (etab_c[X, n] if c else etab_w[X, n])
            else:
                w = np.exp(zk - shift)
            if track and c:  # running correct mass: + new weight - old weight, compensated
                wc, wcc = _kadd2(wc, wcc, w)
                wc, wcc = _kadd2(wc, wcc, -tree[P + k])
            tree_set(tree, P, k, w)
            cnt[k] = 0
        if rebuild:
            shift = tree_build(z, tree, P)
            if track:
                wc, wcc = _tree_correct_sum(tree, P, correct)
        if li < n_log and step == log_steps[li]:
            _log_row(z, correct, submask, p0, sum_p0c, out[li], groups, active, resamples, tails)
            groups = 0
            active = 0
            resamples = 0
            li += 1
    if ti < n_thr and step_hi == log.n_steps:  # the last state of the run
        ti = _thr_check(
            z, correct, submask, p0, sum_p0c, thresholds, ti, step_hi, scratch, thr_out, thr_step
        )
    shift_io[0] = shift
    state_io[1] = state[1]
    ints[I_LOG] = li
    ints[I_COUNTDOWN] = countdown
    ints[I_GROUPS] = groups
    ints[I_ACTIVE] = active
    ints[I_RESAMPLES] = resamples


@jit_parallel
def tree_batch(prob, log, alg, opt, tr, st, step_lo, step_hi, out, thr_out, thr_step):
    """:func:`tree_run` for every run (row) of ``st`` in parallel; ``out[r, n_log, n_met]``,
    ``thr_out[r, n_thr, n_met]``, ``thr_step[r, n_thr]``."""
    for r in prange(st.z.shape[0]):
        tree_run(
            prob, log, alg, opt, tr, st.z[r], st.tree[r], st.shift[r : r + 1], st.rng[r],
            st.ints[r], st.tails[r], step_lo, step_hi, out[r], thr_out[r], thr_step[r],
        )  # fmt: skip
