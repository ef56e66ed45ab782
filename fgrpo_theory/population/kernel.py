"""Numba kernel of the population simulator (theory.md section 13): the hot loop only.

The primitives are the single-prompt simulator's, imported, not copied: the counter-based
stream (:mod:`fgrpo_theory.sim.rng`), the vectorized exp, the i.i.d. group sampler, the SGD /
Adam element loops and the per-action coefficients of one update with its ratio weights
(clipping, dual clip, CISPO; :func:`fgrpo_theory.sim.kcore._coefficients`), from
:mod:`fgrpo_theory.sim.kcore`. Numba's cache stamp covers every kernel source of the package
(:mod:`fgrpo_theory._numba_cache`), so an edit there recompiles this kernel. A population of one
prompt with the shared logits frozen therefore reproduces the single-prompt simulator bit for
bit, inner updates and clipping included (``tests/test_population_kernel.py``).

Model: the logits of prompt ``p`` are ``theta + phi_p``. Each step draws a batch of ``B`` train
prompts (without replacement within an epoch, from a second stream of the run's key) and ``N``
rollouts each (from the run's main stream) under the current policy, then makes
``alg.inner`` optimizer steps on that batch. Each recomputes every batch prompt's softmax under
the current parameters and weights the sampled actions by the algorithm's weight of the ratio
``p / p_old`` (PPO / DAPO clip, dual clip, CISPO; 1 at the first step), with per-X advantage
tables (focal weight included, P-13). The loss is the mean over the ``B x N`` rollouts, so each
prompt's logit gradient is ``(c - p C) / (B N)`` with ``c_k = n_k A_k s_k`` (theory.md sections
5 and 6); ``phi_p`` receives it, ``theta`` receives the sum over the batch. Dynamic sampling
redraws a dropped group of the same prompt (the simulator's rule) or, with ``fill``, replaces it
by the next prompt's group in the epoch order, as a trainer fills its batch.
"""

from __future__ import annotations

import numpy as np

from ..sim._jit import (
    jit_elementwise,
    jit_exact,
    jit_fast,
    jit_fast_inline,
    jit_fast_leaf,
    jit_run_fast,
)
from ..sim.kalloc import empty, zeros
from ..sim.kcore import (  # noqa: F401  (RULE_* / OPT_* are this module's codes too)
    OPT_ADAM,
    OPT_ADAMW,
    OPT_SGD,
    RULE_LINEAR,
    RULE_LOGPROB,
    SCH_TABLE,
    _adam,
    _adam_move,
    _adam_scalars,
    _clear_counts,
    _coefficients,
    _coefficients_at,
    _likelihood_advantages,
    _max,
    _regularizer_coefficients,
    _sgd,
)
from ..sim.rng import _mix64, new_stream, next_uniform
from .kadam import MAX_TABLE, _adam_catchup, _adam_idle, adam_table
from .kfast import _adam_p, _draw_p, _exp_p, _prompt_metrics_row, _sgd_p

ORDER_SALT = np.uint64(0x5851F42D4C957F2D)  # key of the batch-order stream: mix64(key ^ salt)

#: per-prompt metric slots: success mu, rare-correct mass tau, entropy, sum of -log p over the
#: prompt's rare correct strategies
P_MU, P_TAU, P_ENT, P_NLL = 0, 1, 2, 3
N_PMET = 4
#: per-prompt counters since the previous logged step: groups, active groups, tail misses,
#: dynamic-sampling redraws
C_GROUPS, C_ACTIVE, C_TAIL, C_RESAMPLES = 0, 1, 2, 3
N_CNT = 4


@jit_exact
def stream_uniforms(key, n):
    """First ``n`` uniforms of the stream with ``key`` (for the stream-equality test)."""
    state = new_stream(key)
    out = empty(n, np.float64)
    for i in range(n):
        out[i] = next_uniform(state)
    return out


@jit_elementwise
def _adam_grad(z, gasc, lr, wd, decoupled, b1, b2, eps, t, mm, vv):
    """Adam step of ``z`` given the ascent direction ``gasc`` (the shared logits theta)."""
    sc = _adam_scalars(lr, wd, decoupled, b1, b2, eps, t)
    l2 = sc[8]
    for i in range(z.shape[0]):
        zi = z[i]
        _adam_move(z, mm, vv, i, zi, -gasc[i] + l2 * zi, sc)


@jit_elementwise
def _sgd_grad(z, gasc, lr, wd):
    for i in range(z.shape[0]):
        g = gasc[i] - wd * z[i]
        z[i] += lr * g


@jit_fast_inline
def _scratch(K, N, like):
    """A run's scratch arrays: a prompt's logits ``zb``, ``e = exp(zb - max)``, the sampler's
    block CDF ``cum``, the coefficients ``cvec``, the theta gradient ``gth``, the running sums
    inside the blocks ``pre``, the draw counts ``cnt`` and the drawn actions ``touched`` (one
    slot more than ``min(N, K)``: branch-free writes). ``zb`` and ``e`` in the precision of the
    array ``like`` (the logits)."""
    return (
        empty(like.shape, like.dtype), empty(like.shape, like.dtype), empty(K, np.float64),
        zeros(K, np.float64), zeros(K, np.float64),
        empty(K, np.float64), zeros(K, np.int64), empty(min(N, K) + 1, np.int64),
    )  # fmt: skip


@jit_fast
def _log_all(theta, phi, correct, rare, zb, out_p):
    """Per-prompt metrics (mu, rare mass, entropy, sum of -log p over rare correct strategies;
    :func:`~.kfast._prompt_metrics_row`, the simulator's metrics arithmetic) of every prompt into
    ``out_p``, from the float64 values of its logits (float32 ones widened)."""
    K = theta.shape[0]
    K8 = (K + 7) // 8 * 8
    e = empty(K8, np.float64)
    T = empty((4, K8), np.float64)
    lanes = empty(64, np.float64)
    for p in range(phi.shape[0]):
        for i in range(K):
            zb[i] = theta[i] + phi[p, i]
        _prompt_metrics_row(zb, correct[p], rare[p], out_p[p], e, T, lanes)


@jit_exact
def _shuffle(perm, state):
    """Fisher-Yates shuffle of ``perm`` in place (no draws for a single element)."""
    for i in range(perm.shape[0] - 1, 0, -1):
        j = int(next_uniform(state) * (i + 1))
        t = perm[i]
        perm[i] = perm[j]
        perm[j] = t


@jit_exact
def _next_prompt(perm, pos, ostate, inbatch, drawn):
    """The next prompt of the epoch order not drawn in this step, and the new position: a new
    epoch (reshuffle) starts when the order is used up (``ds_fill = "next-prompt"``)."""
    while True:
        if pos == perm.shape[0]:
            _shuffle(perm, ostate)
            pos = 0
        p = perm[pos]
        pos += 1
        if not inbatch[p] and not drawn[p]:
            return p, pos


@jit_fast_leaf
def _group_gradient(z, e, cum, correct_p, rare_p, has_rare, state, cnt, touched, cvec, pre,
                    adv_c, adv_w, alg, counts, pold):  # fmt: skip
    """Sample one group of prompt ``z``; fill ``cvec`` (c_k = n_k A_k s_k); return
    ``(C, inv_s, nd, X)``.

    The single-prompt simulator's first inner update (ratio 1, :func:`_coefficients` with
    ``first``; ``pold`` is not read). With ``alg.dyn`` (a trainer's dynamic sampling, as the
    single-prompt simulator does it) a group of this prompt with ``alg.keep[X] == 0`` is redrawn
    up to ``alg.max_res`` times; the counters (groups, active, tail misses) describe the first
    draw, the redraws are counted in ``counts[C_RESAMPLES]``.
    """
    N = alg.N
    m = _max(z)
    S = _exp_p(z, e, m, cum)
    keep = alg.keep
    r = 0  # the group, then redraws of one the filter drops (one inlined call site)
    while True:
        nd, X = _draw_p(e, S, cum, pre, correct_p, N, state, cnt, touched)
        if r == 0:
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
        if not alg.dyn or keep[X] != 0 or r >= alg.max_res:
            break
        _clear_counts(cnt, touched, nd)
        r += 1
    if alg.dyn:
        counts[C_RESAMPLES] += r
    inv_s = 1.0 / S
    C = _coefficients(
        touched, nd, cnt, correct_p, X, adv_c, adv_w, e, inv_s, pold, True, alg.rule, alg.algo,
        1.0 - alg.clip_lo, 1.0 + alg.clip_hi, alg.zero_sum, cvec, alg.dual_c,
    )  # fmt: skip
    return C, inv_s, nd, X


@jit_run_fast
def pop_run(theta0, phi0, correct, rare, has_rare, n_train, B, steps, log_steps, adv_c, adv_w,
            key, alg, sr, fill, opt, lr_shared, lr_prompt, wd, b1, b2, eps, adam_per_prompt,
            sparse, tab, out_p, out_c):  # fmt: skip
    """One run; fills ``out_p[n_log, P_all, N_PMET]`` and ``out_c[n_log, n_train, N_CNT]``.

    ``alg`` is the simulator's :class:`fgrpo_theory.sim.records.Algorithm` record (group size,
    surrogate, algorithm, inner updates, clip bounds, dynamic sampling; its ``sampler`` is
    unused: groups are drawn i.i.d.). Prompts ``0 .. n_train-1`` are trained on, the rest are
    held out. ``lr_shared = 0`` freezes theta (independent prompts), ``lr_prompt = 0`` freezes
    every phi_p (one shared policy). Adam: one optimizer over all parameters with one step
    counter ``t`` that advances per inner update (prompts outside the batch still move through
    their momentum, as in a trainer), or with ``adam_per_prompt`` a state and step counter per
    prompt that advance only for the inner updates of batches holding the prompt.

    ``fill`` (``ds_fill = "next-prompt"``; ``alg.dyn`` is then False): a group the filter
    drops (``alg.keep[X] == 0``) is replaced by the group of the next prompt of the epoch order
    (never one already drawn in this step), as a trainer fills its batch; at most
    ``min(alg.max_res, n_train - B)`` groups are dropped per step, later groups are kept. Every
    drawn group is counted (groups, active, tail misses) for its prompt and a dropped one in
    its prompt's ``C_RESAMPLES``; dropped prompts are idle in the step.

    ``sr``: None (the scheme is its per-X tables), or the simulator's
    :class:`fgrpo_theory.sim.records.SchemeTerms`: per-action advantages of a likelihood-aware
    scheme from the group's ``p_old`` (kept per batch group for the inner updates) and/or the
    regularizers' weights on every logit of the prompt (reference: row ``p`` of ``sr.lq``, the
    prompt's initial log-softmax), added at each inner update; the loss is the mean over the
    ``B x N`` rollouts, so a regularizer of prompt p enters with ``coef / B`` (its weights are
    ``N`` times the per-prompt gradient, the k3 weights one per rollout). The caller passes
    ``sparse = False`` with a regularizer (every logit moves).

    ``sparse`` (same results bit for bit): with the global Adam state and no weight decay, a
    prompt's idle optimizer steps are replayed lazily (:func:`_adam_catchup`, steps counted in
    optimizer steps, so inner updates included) when it is next drawn or logged, on the
    elements that have Adam state only (those ever sampled, with a zero-sum log-prob surrogate
    at ratio 1, ``C = 0``); with ``C = 0`` the theta gradient adds the sampled strategies' terms
    only (the others are exactly zero).
    """
    K = theta0.shape[0]
    N = alg.N
    inner = alg.inner
    rule = alg.rule
    algo = alg.algo
    zero_sum = alg.zero_sum
    dual_c = alg.dual_c
    lo_b = 1.0 - alg.clip_lo
    hi_b = 1.0 + alg.clip_hi
    # copies (loops: an array's .copy() compiles Numba's allocator, sim/kalloc.py)
    theta = empty(K, theta0.dtype)
    for i in range(K):
        theta[i] = theta0[i]
    phi = empty((phi0.shape[0], K), phi0.dtype)
    for q in range(phi0.shape[0]):
        for i in range(K):
            phi[q, i] = phi0[q, i]
    zb, e, cum, cvec, gth, pre, cnt, touched = _scratch(K, N, theta0)
    D = min(N, K)
    # the batch's sampled groups, kept for inner updates 2 .. inner: actions, counts, X, p_old
    nb = B if inner > 1 else 1
    tb = empty((nb, D), np.int64)
    cb = empty((nb, D), np.int64)
    pb = empty((nb, D), np.float64)
    xb = empty(nb, np.int64)
    ndb = empty(nb, np.int64)
    use_adam = opt != OPT_SGD
    decoupled = opt == OPT_ADAMW
    train_phi = lr_prompt > 0.0
    train_theta = lr_shared > 0.0
    mm = zeros((n_train if use_adam and train_phi else 1, K), phi0.dtype)
    vv = zeros((n_train if use_adam and train_phi else 1, K), phi0.dtype)
    tp = zeros(n_train, np.int64)
    mth = zeros(K if use_adam else 1, np.float64)
    vth = zeros(K if use_adam else 1, np.float64)
    inbatch = zeros(n_train, np.bool_)
    bp = empty(B, np.int64)  # the batch's prompts
    keep = alg.keep
    cap = min(alg.max_res, n_train - B)  # groups a step may drop when filling (ds_fill)
    drawn = zeros(n_train if fill else 1, np.bool_)  # dropped in this step
    dlist = empty(cap if fill else 1, np.int64)
    lazy = sparse and use_adam and train_phi and not adam_per_prompt and wd == 0.0
    na = n_train if lazy else 1
    act = empty((na, K if lazy else 1), np.int64)  # elements of phi_p with Adam state
    nact = zeros(na, np.int64)
    isact = zeros((na, K if lazy else 1), np.uint8)
    last = zeros(na, np.int64)  # phi_p holds the updates of optimizer steps 1 .. last[p]
    bz = empty(K if lazy else 1, phi0.dtype)  # the catch-up's contiguous buffers
    bm = empty(K if lazy else 1, phi0.dtype)
    bv = empty(K if lazy else 1, phi0.dtype)
    zm = empty(K, np.float64)  # float64 logits of the metrics
    counts = zeros((n_train, N_CNT), np.int64)
    if sr is not None:
        lik = sr.kind != SCH_TABLE
        reg = sr.ent_coef != 0.0 or sr.kl_coef != 0.0
        ab = empty((nb, D), np.float64)  # per-action advantages of the batch's groups
        po = empty(D, np.float64)  # p_old of a group (inner == 1: pb has one row, reused)
        lp_t = empty(D, np.float64)
        order = empty(D, np.int64)
        lq_row = sr.lq.shape[0] > 1
    state = new_stream(key)
    ostate = new_stream(_mix64(key ^ ORDER_SALT))
    perm = empty(n_train, np.int64)  # 0 .. n_train - 1 (np.arange compiles Numba's allocator)
    for i in range(n_train):
        perm[i] = i
    pos = n_train
    inv_n = 1.0 / (B * N)
    n_log = log_steps.shape[0]
    li = 0
    t = 0  # optimizer steps taken (one per inner update)
    if log_steps[0] == 0:
        _log_all(theta, phi, correct, rare, zm, out_p[0])
        li = 1
    for step in range(1, steps + 1):
        if pos + B > n_train:
            _shuffle(perm, ostate)
            pos = 0
        ndrop = 0
        for u in range(inner):
            t += 1
            if train_theta:
                for i in range(K):
                    gth[i] = 0.0
            b = 0
            while b < B:
                if u == 0:  # draw the group under the current policy (ratio 1)
                    if fill:
                        p, pos = _next_prompt(perm, pos, ostate, inbatch, drawn)
                    else:
                        p = perm[pos + b]
                    if lazy and last[p] < t - 1:
                        _adam_catchup(phi[p], mm[p], vv[p], act[p], nact[p], last[p], t - 1,
                                      lr_prompt, wd, decoupled, b1, b2, eps, tab, bz, bm,
                                      bv)  # fmt: skip
                    for i in range(K):
                        zb[i] = theta[i] + phi[p, i]
                    C, inv_s, nd, X = _group_gradient(
                        zb, e, cum, correct[p], rare[p], has_rare[p], state, cnt, touched, cvec,
                        pre, adv_c, adv_w, alg, counts[p], pb[0],
                    )  # fmt: skip
                    if fill and keep[X] == 0 and ndrop < cap:  # dropped: draw another prompt
                        drawn[p] = True
                        dlist[ndrop] = p
                        if lazy:
                            last[p] = t - 1  # caught up above; idle from this step on
                        ndrop += 1
                        counts[p, C_RESAMPLES] += 1
                        for j in range(nd):
                            cvec[touched[j]] = 0.0
                            cnt[touched[j]] = 0
                        continue
                    inbatch[p] = True
                    bp[b] = p
                    tch = touched
                    if inner > 1:
                        ndb[b] = nd
                        xb[b] = X
                        for j in range(nd):
                            k = touched[j]
                            tb[b, j] = k
                            cb[b, j] = cnt[k]
                            pb[b, j] = e[k] * inv_s
                    if sr is not None:
                        if lik:  # per-action advantages from p_old, replacing the tables'
                            for j in range(nd):
                                po[j] = e[touched[j]] * inv_s
                            _likelihood_advantages(
                                sr, touched, nd, cnt, correct[p], X, N, po, lp_t, order,
                                ab[b if inner > 1 else 0],
                            )  # fmt: skip
                            C = _coefficients_at(
                                touched, nd, cnt, ab[b if inner > 1 else 0], e, inv_s, po, True,
                                rule, algo, lo_b, hi_b, zero_sum, cvec, dual_c,
                            )  # fmt: skip
                        if reg:
                            C += _regularizer_coefficients(
                                sr, zb, e, _max(zb), inv_s, sr.lq[p if lq_row else 0], touched,
                                nd, cnt, N, cvec,
                            )  # fmt: skip
                else:  # the same group, ratios against p_old
                    p = bp[b]
                    tch = tb[b]
                    nd = ndb[b]
                    for i in range(K):
                        zb[i] = theta[i] + phi[p, i]
                    S = _exp_p(zb, e, _max(zb), cum)
                    inv_s = 1.0 / S
                    for j in range(nd):
                        cnt[tch[j]] = cb[b, j]
                    if sr is None:
                        C = _coefficients(
                            tch, nd, cnt, correct[p], xb[b], adv_c, adv_w, e, inv_s, pb[b],
                            False, rule, algo, lo_b, hi_b, zero_sum, cvec, dual_c,
                        )  # fmt: skip
                    else:
                        if lik:
                            C = _coefficients_at(
                                tch, nd, cnt, ab[b], e, inv_s, pb[b], False, rule, algo, lo_b,
                                hi_b, zero_sum, cvec, dual_c,
                            )  # fmt: skip
                        else:
                            C = _coefficients(
                                tch, nd, cnt, correct[p], xb[b], adv_c, adv_w, e, inv_s, pb[b],
                                False, rule, algo, lo_b, hi_b, zero_sum, cvec, dual_c,
                            )  # fmt: skip
                        if reg:
                            C += _regularizer_coefficients(
                                sr, zb, e, _max(zb), inv_s, sr.lq[p if lq_row else 0], tch, nd,
                                cnt, N, cvec,
                            )  # fmt: skip
                if train_theta:
                    if sparse and C == 0.0:  # the other terms are exactly zero
                        for j in range(nd):
                            k = tch[j]
                            gth[k] += (cvec[k] - e[k] * inv_s * C) * inv_n
                    else:
                        for i in range(K):
                            gth[i] += (cvec[i] - e[i] * inv_s * C) * inv_n
                if train_phi:  # phi_p's gradient depends on prompt p only: update it now
                    if opt == OPT_SGD:
                        _sgd_p(phi[p], e, inv_s, cvec, C, inv_n, lr_prompt, wd)
                    else:
                        if adam_per_prompt:
                            tp[p] += 1
                            ta = tp[p]
                        else:
                            ta = t
                        _adam_p(phi[p], e, inv_s, cvec, C, inv_n, lr_prompt, wd, decoupled, b1,
                                b2, eps, ta, mm[p], vv[p])  # fmt: skip
                        if lazy:
                            last[p] = t
                            if C == 0.0:  # only the sampled strategies had a gradient
                                for j in range(nd):
                                    k = tch[j]
                                    if isact[p, k] == 0:
                                        isact[p, k] = 1
                                        act[p, nact[p]] = k
                                        nact[p] += 1
                            elif nact[p] < K:  # a dense gradient: every element has state
                                for i in range(K):
                                    isact[p, i] = 1
                                    act[p, i] = i
                                nact[p] = K
                if sr is not None:
                    if reg:
                        for i in range(K):
                            cvec[i] = 0.0
                for j in range(nd):
                    k = tch[j]
                    cvec[k] = 0.0
                    cnt[k] = 0
                b += 1
            if train_phi and use_adam and not adam_per_prompt and not lazy:
                for q in range(n_train):
                    if not inbatch[q]:
                        _adam_idle(phi[q], lr_prompt, wd, decoupled, b1, b2, eps, t, mm[q], vv[q],
                                   tab)  # fmt: skip
            if train_theta:
                if opt == OPT_SGD:
                    _sgd_grad(theta, gth, lr_shared, wd)
                else:
                    _adam_grad(theta, gth, lr_shared, wd, decoupled, b1, b2, eps, t, mth, vth)
        for b in range(B):
            inbatch[bp[b]] = False
        for j in range(ndrop):
            drawn[dlist[j]] = False
        if not fill:
            pos += B
        if li < n_log and step == log_steps[li]:
            if lazy:  # bring every prompt's logits up to this step
                for q in range(n_train):
                    if last[q] < t:
                        _adam_catchup(phi[q], mm[q], vv[q], act[q], nact[q], last[q], t,
                                      lr_prompt, wd, decoupled, b1, b2, eps, tab, bz, bm,
                                      bv)  # fmt: skip
                        last[q] = t
            _log_all(theta, phi, correct, rare, zm, out_p[li])
            for q in range(n_train):
                for j in range(N_CNT):
                    out_c[li, q, j] = counts[q, j]
                    counts[q, j] = 0
            li += 1


def adam_table_of(
    opt: int,
    lr_prompt: float,
    wd: float,
    b1: float,
    b2: float,
    eps: float,
    adam_per_prompt: bool,
    T: int,
) -> np.ndarray:
    """The shared table of :func:`pop_run` for ``T`` optimizer steps (one Adam state over
    all prompts, :func:`.kadam.adam_table`), or a 1x1 placeholder where it is not read."""
    if opt != OPT_SGD and lr_prompt > 0.0 and not adam_per_prompt and T <= MAX_TABLE:
        return adam_table(lr_prompt, wd, opt == OPT_ADAMW, b1, b2, eps, T)
    return np.zeros((1, 2))


@jit_fast
def batch_gradients(theta, phi, correct, rare, has_rare, n_train, B, adv_c, adv_w, key, alg,
                    n_draws, gsum, sqsum):  # fmt: skip
    """Monte Carlo of the batch gradient at fixed parameters (no update, ratio 1).

    Each draw: a batch of ``B`` distinct train prompts (uniform) and their groups (``alg`` as
    in :func:`pop_run`, without dynamic sampling). Accumulates ``gsum[0] += g_theta`` (sum over
    the batch), ``gsum[1 + p] += g_phi_p`` and returns in ``sqsum`` the summed squared norms
    ``[|g_theta|^2, |g_phi|^2]`` over draws.
    """
    K = theta.shape[0]
    N = alg.N
    zb, e, cum, cvec, gth, pre, cnt, touched = _scratch(K, N, theta)
    pold = empty(1, np.float64)
    counts = zeros(N_CNT, np.int64)
    state = new_stream(key)
    ostate = new_stream(_mix64(key ^ ORDER_SALT))
    perm = empty(n_train, np.int64)  # 0 .. n_train - 1 (np.arange compiles Numba's allocator)
    for i in range(n_train):
        perm[i] = i
    inv_n = 1.0 / (B * N)
    for _ in range(n_draws):
        _shuffle(perm, ostate)
        for i in range(K):
            gth[i] = 0.0
        sq_phi = 0.0
        for b in range(B):
            p = perm[b]
            for i in range(K):
                zb[i] = theta[i] + phi[p, i]
            C, inv_s, nd, _X = _group_gradient(
                zb, e, cum, correct[p], rare[p], has_rare[p], state, cnt, touched, cvec, pre, adv_c,
                adv_w, alg, counts, pold,
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
