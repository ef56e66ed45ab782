"""Numba kernels of the simulator: the hot loops only (arrays and seeds in, outputs filled).

The per-run loops of the dense and sum-tree paths and their metrics. What they compile in lives
in small modules shared with the populations' kernel: decorator flavours (:mod:`._jit`), random
streams (:mod:`.rng`), the sum tree (:mod:`.sumtree`), softmax, samplers, optimizers and update
coefficients (:mod:`.kcore`). The cache stamp covers all of them
(:mod:`fgrpo_theory._numba_cache`), so an edit in any recompiles every kernel. Kernels take
typed parameter records (:mod:`.records`: ``Problem``, ``Algorithm``, ``Optimizer``,
``Logging``, ``Tree``) and advance a ``State`` over a chunk of steps.

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

Equal-progress thresholds (``Logging.thresholds``, theory.md section 11): see :mod:`.kthresh`.
"""

from __future__ import annotations

import numpy as np

from ._jit import jit_batch, jit_fast_inline, jit_run_fast
from .kalloc import empty, zeros
from .kcore import (
    OPT_ADAMW,
    OPT_SGD,
    SAMPLER_IID,
    SAMPLER_SORTED,
    SCH_TABLE,
    _clear_counts,
    _coefficients,
    _coefficients_at,
    _kadd2,
    _likelihood_advantages,
    _local_rng,
    _masked_sum8,
    _max,
    _regularizer_coefficients,
    _tally,
)
from .kfloat import _adam_v, _draw_v, _exp_v, _sgd_v
from .kmetrics import (  # noqa: F401  (the metric slots are re-exported: runner, tests)
    M_ACTIVE,
    M_ENT,
    M_GROUPS,
    M_MRET,
    M_QPOS,
    M_RESAMPLES,
    M_SUB0,
    metrics_into,
)
from .kthresh import THR_MARGIN, THR_MARGIN32, _thr_check, _thr_pending, _tree_correct_sum
from .records import I_ACTIVE, I_COUNTDOWN, I_GROUPS, I_LOG, I_RESAMPLES, I_TOPT
from .rng import uniform_at
from .sumtree import tree_build, tree_find, tree_find_lanes, tree_leaf_range, tree_set


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


@jit_fast_inline
def _log_row(met, z, correct, submask, p0, sum_p0c, row, groups, active, resamples, tails):
    """Write the metrics of softmax(z) and the group counters into ``row``; reset ``tails``.
    ``met``: the metrics pass's address, or None (:func:`~.kmetrics.metrics_into`)."""
    metrics_into(met, z, correct, submask, p0, sum_p0c, row)
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


SAMPLER_TREE = 2  # Algorithm.sampler of the sum-tree path (draws from State.tree)


@jit_fast_inline
def _first_row(met, z, correct, submask, p0, sum_p0c, log_steps, out):
    """Row 0 (step 0, before any update) if it is logged; returns the next log index. ``met``:
    as in :func:`_log_row`."""
    if log_steps[0] != 0:
        return 0
    n_sub = submask.shape[0]
    metrics_into(met, z, correct, submask, p0, sum_p0c, out[0])
    for j in range(M_GROUPS, M_SUB0):
        out[0, j] = 0.0
    for s in range(n_sub):
        out[0, M_SUB0 + n_sub + s] = 0.0
    for j in range(M_SUB0 + 3 * n_sub, M_SUB0 + 4 * n_sub + 1):  # kept-group counters
        out[0, j] = 0.0
    return 1


#: Draws whose uniforms are computed together (vectorized) and, when the sum tree's descents
#: are done in lanes, descended together: the length of the buffers ``ub``, ``jb``.
TREE_BATCH = 16


@jit_fast_inline
def _draw_tree(tree, P, correct, N, state, cnt, touched, ub, jb, lanes, kd, r_lo, r_hi):
    """N draws from the sum tree (inverse CDF of the same uniforms as the i.i.d. sampler),
    ``TREE_BATCH`` at a time: the uniforms first, then the descents, one after another
    (:func:`~.sumtree.tree_find`, predicted branches) or in lanes
    (:func:`~.sumtree.tree_find_lanes`, no branches) as ``lanes`` says; the same leaves either
    way; one after another, a target in ``[r_lo, r_hi]`` (the range of leaf ``kd``,
    :func:`~.sumtree.tree_leaf_range`) is ``kd`` without a descent. Returns (distinct actions,
    correct draws X)."""
    nd = 0
    X = 0
    total = tree[1]
    key = state[0]
    c = state[1]
    for lo in range(0, N, TREE_BATCH):
        m = TREE_BATCH if N - lo > TREE_BATCH else N - lo
        for i in range(m):
            ub[i] = uniform_at(key, c + np.uint64(i + 1)) * total
        c += np.uint64(m)
        if lanes:
            tree_find_lanes(tree, P, ub, jb, m)
            for i in range(m):
                nd, X = _tally(jb[i], nd, X, touched, cnt, correct)
        else:
            for i in range(m):
                t = ub[i]
                # in leaf kd's range (tree_leaf_range): no descent
                k = kd if (t >= r_lo) & (t <= r_hi) else tree_find(tree, P, t)
                nd, X = _tally(k, nd, X, touched, cnt, correct)
    state[1] = c
    return nd, X


# ONE run loop for both paths: ``tr`` is the sum tree's record, or ``None`` on the dense path.
# Numba compiles a function once per argument type and prunes ``if tr is None`` branches at
# compile time where ``tr`` IS None (not where it is a record: Numba decides ``x is None`` at
# compile time only for an argument typed None), so the dense code sits under ``if dn is not
# None``, ``dn`` = None on the sum-tree path; each path gets a specialization without the other's
# code (measured: the sum-tree path compiled the dense code too before; nothing is decided
# per step at run time): the bookkeeping of a group (active count, tail misses, dynamic-sampling
# redraws), the logged rows and the thresholds are written once. (Measured before: a draw
# function dispatching on the path at run time was 1.7x slower on the sum-tree path at K = 6.)


@jit_run_fast
def run_steps(prob, log, alg, opt, tr, dn, ad, sr, ds, z_io, mm_io, vv_io, tree_io, shift_io,
              state_io, ints, tails_io, step_lo, step_hi, out, thr_out, thr_step, met):  # fmt: skip
    """Steps ``step_lo+1 .. step_hi`` of one run; ``tr`` = None is the dense path (every logit
    moves), a :class:`~.records.Tree` the sum-tree path (SGD + log-prob + one update + zero-sum
    advantages); ``dn``: None on the sum-tree path, True on the dense path (see above); ``ad``:
    None for SGD (the Adam code is not compiled), else True; ``ds``: None without dynamic
    sampling (the redraw code is not compiled: the sum-tree loop then compiled in 0.83x the
    time, median of 10 alternating cold compiles each way, 0.75-0.99x), else True.
    ``thr_out``, ``thr_step`` = None: no thresholds (their code is not compiled). ``met``: the
    metrics pass's address (:func:`~.kmetrics.metrics_address`), or None: a direct call.
    ``sr`` = None: the scheme is its per-X tables; a :class:`~.records.SchemeTerms`
    (dense path only): per-action advantages of a likelihood-aware scheme computed from the
    group's ``p_old`` (:func:`~.kcore._likelihood_advantages`) and/or the regularizers' weights
    added to every logit's coefficient (:func:`~.kcore._regularizer_coefficients`), at each
    inner update.

    ``z_io``, ``mm_io``, ``vv_io``, ``tree_io``, ``shift_io``, ``state_io``, ``ints``,
    ``tails_io`` are the run's rows of :class:`~.records.State` (advanced in place; the random
    stream is copied in and out); ``out[n_log, n_metrics]`` receives the logged rows.
    ``step_lo = 0`` starts the run (and writes row 0 if step 0 is logged).
    ``thr_out[n_thr, n_metrics]`` and ``thr_step[n_thr]`` (-1 = pending) receive the threshold
    crossings: the state after step s is checked at the start of step s + 1 and the last state
    at the end of the run. On the dense path the cheap Q_pos comes from that step's
    ``exp(z - max)`` (no extra exp); on the sum-tree path from a compensated running sum of the
    correct leaves over ``tree[1]`` (recomputed at each chunk start and rebuild), O(1) per update.

    Sum-tree path: only sampled logits move (``dz_k = lr n_k A_k / N``, theory.md section 6), so
    a sum tree over ``exp(z - shift)`` gives O(log K) sampling and updates. Parents are
    recomputed from their children after every leaf change (no drift); the tree is rebuilt from
    the logits with a fresh shift every ``renorm_every`` steps or when a logit rises 64 above the
    shift. For small N the new leaf weight is the old one times a tabulated ``exp(dz)``
    (``etab_c[X, n]``, ``etab_w[X, n]``; 1x1 arrays disable it): the weights then carry rounding
    of order 1e-16 per update relative to ``exp(z - shift)`` until the next rebuild, which only
    affects a draw whose uniform falls within that distance of a CDF boundary; the logits and
    every logged metric are computed from ``z`` itself. Sampling is the same inverse-CDF map of
    the same uniforms as the dense i.i.d. sampler; the descents run in lanes without branches
    unless the last group put >= 3/4 of its draws on one action (:func:`_draw_tree`; the same
    leaves either way). With predicted branches, a target in the range of the last group's
    most drawn leaf (:func:`~.sumtree.tree_leaf_range`, computed once the tree has not changed
    for two steps and forgotten when it changes) is that leaf without a descent. A group whose
    advantages are all 0 moves nothing and its update is skipped (with tabulated weights: the
    weight times ``exp(0) = 1`` is the weight).
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
    max_res = alg.max_res
    keep = alg.keep
    n_sub = submask.shape[0]
    z = z_io
    tails = tails_io
    state = _local_rng(state_io)
    # empty and loops, not zeros, and no min() (cold start: see kmetrics._metrics)
    cnt = empty(K, np.int64)
    for i in range(K):
        cnt[i] = 0
    D = N if N < K else K
    touched = empty(D + 1, np.int64)  # +1: branch-free writes
    hit = empty(n_sub, np.bool_)  # (_count_tail clears it before use)
    inv_n = 1.0 / N
    ktails = tails[n_sub : 2 * n_sub]  # tail misses among kept active groups (dynamic sampling)
    # thr_step = None (no thresholds): the threshold code is pruned at compile time
    if thr_step is None:
        n_thr = 0
        ti = 0
    else:
        thresholds = log.thresholds
        n_thr = thresholds.shape[0]
        ti = _thr_pending(thr_step)
        scratch = zeros(out.shape[1], np.float64)
    li = ints[I_LOG]
    if step_lo == 0:
        li = _first_row(met, z, correct, submask, p0, sum_p0c, log_steps, out)
    groups = ints[I_GROUPS]
    active = ints[I_ACTIVE]
    resamples = ints[I_RESAMPLES]
    if tr is None:
        if dn is not None:  # (prunes the dense code on the sum-tree path)
            dual_c = alg.dual_c
            sampler = alg.sampler
            mm = mm_io
            vv = vv_io
            e = empty(K, z.dtype)  # weights and cvec in the logits' precision (kfloat)
            cum = empty(K if sampler == SAMPLER_IID else 1, np.float64)
            gaps = empty(N + 1 if sampler == SAMPLER_SORTED else 1, np.float64)
            cvec = zeros(K, z.dtype)
            ibuf = empty(K, np.int64)
            sc = ibuf.view(np.float64)
            pold = empty(D, np.float64)
            lo_b = 1.0 - alg.clip_lo
            hi_b = 1.0 + alg.clip_hi
            # the correct mask as floats (cheap Q_pos)
            cf = empty(K if ti < n_thr else 1, np.float64)
            if ti < n_thr:
                for i in range(K):
                    cf[i] = correct[i]
            t_opt = ints[I_TOPT]
            margin = THR_MARGIN if z.itemsize == 8 else THR_MARGIN32
            zmax = _max(z)  # (the value left by the previous update, recomputed: max is exact)
            if sr is not None:
                lik = sr.kind != SCH_TABLE  # a likelihood-aware advantage (else the tables)
                reg = sr.ent_coef != 0.0 or sr.kl_coef != 0.0  # a regularizer moves every logit
                adv_t = empty(D, np.float64)
                lp_t = empty(D, np.float64)
                order = empty(D, np.int64)
                lq = sr.lq[0]
    else:
        P = 1
        while P < K:
            P *= 2
        tree = tree_io
        lr = opt.lr
        countdown = ints[I_COUNTDOWN]
        shift = shift_io[0]
        if step_lo == 0:
            shift = tree_build(z, tree, P)
            countdown = tr.renorm_every
        track = ti < n_thr  # keep the running correct mass wc (+ compensation wcc) of the tree
        wc = 0.0
        wcc = 0.0
        if thr_step is not None:
            if track:
                wc, wcc = _tree_correct_sum(tree, P, correct)
        etab_c = tr.etab_c
        etab_w = tr.etab_w
        renorm_every = tr.renorm_every
        use_tab = etab_c.shape[0] == N + 1
        ub = empty(TREE_BATCH, np.float64)
        jb = empty(TREE_BATCH, np.int64)
        # descents in lanes unless the last group put >= 3/4 of its draws on one action (then
        # nearly every descent takes the same path and predicted branches are faster; lanes
        # measured 1.9x faster over a run that stays spread at K = 6, N = 8 and 3.2x at
        # K = 1,000, as fast on one that concentrates)
        lanes = True
        # the last concentrated group's most drawn leaf kd and a range of targets [r_lo, r_hi]
        # that descend to it (two descents to find; measured +18 % on bench_sim_small), found
        # once the tree has not changed for two steps, forgotten (empty) when it changes; the
        # comparison with the range is written with & (a short-circuit "and" there measured 2x
        # slower: it breaks the loop of predicted descents into branches)
        kd = np.int64(0)  # (a literal 0 would compile tree_leaf_range for it too)
        r_lo = 1.0
        r_hi = 0.0
        quiet = 0
    for step in range(step_lo + 1, step_hi + 1):
        if tr is None:
            if dn is not None:
                S = _exp_v(z, e, zmax, ibuf, sc)
                if thr_step is not None:
                    if ti < n_thr and _masked_sum8(e, cf) >= (thresholds[ti] - margin) * S:
                        ti = _thr_check(
                            z, correct, submask, p0, sum_p0c, thresholds, ti, step - 1, scratch,
                            thr_out, thr_step,
                        )  # fmt: skip
        else:
            if thr_step is not None:
                if track and wc + wcc >= (thresholds[ti] - THR_MARGIN) * tree[1]:
                    ti = _thr_check(
                        z, correct, submask, p0, sum_p0c, thresholds, ti, step - 1, scratch,
                        thr_out, thr_step,
                    )  # fmt: skip
                    track = ti < n_thr
        # the group, then (dynamic sampling) redraws of a group the filter drops (keep[X] == 0):
        # one call site per sampler (each is inlined: a second site compiled it twice)
        r = 0
        while True:
            if tr is None:
                if dn is not None:
                    nd, X = _draw_v(sampler, e, S, cum, gaps, correct, N, state, cnt, touched, sc)
            else:
                nd, X = _draw_tree(
                    tree, P, correct, N, state, cnt, touched, ub, jb, lanes, kd, r_lo, r_hi
                )
            if r == 0:
                groups += 1
                if 0 < X < N:  # an active group (mixed rewards, P-7): count its tail misses
                    active += 1
                    if n_sub > 0:
                        _count_tail(touched, nd, submask, hit, tails)
            if ds is None:  # no dynamic sampling (the redraw code is pruned at compile time)
                break
            if keep[X] != 0 or r >= max_res:
                break
            _clear_counts(cnt, touched, nd)
            r += 1
        if ds is not None:
            resamples += r
            if 0 < X < N:  # the kept group is active: count it and its tail misses
                tails[2 * n_sub] += 1
                if n_sub > 0:
                    _count_tail(touched, nd, submask, hit, ktails)
        if tr is None:
            if dn is not None:
                inv_s = 1.0 / S
                if alg.inner > 1:
                    for j in range(nd):
                        pold[j] = e[touched[j]] * inv_s
                if sr is not None:
                    if lik:
                        if alg.inner == 1:
                            for j in range(nd):
                                pold[j] = e[touched[j]] * inv_s
                        _likelihood_advantages(
                            sr, touched, nd, cnt, correct, X, N, pold, lp_t, order, adv_t
                        )
                for u in range(alg.inner):
                    if u > 0:
                        S = _exp_v(z, e, zmax, ibuf, sc)
                        inv_s = 1.0 / S
                    if sr is None:
                        C = _coefficients(
                            touched, nd, cnt, correct, X, adv_c, adv_w, e, inv_s, pold,
                            u == 0, alg.rule, alg.algo, lo_b, hi_b, alg.zero_sum, cvec, dual_c,
                        )  # fmt: skip
                    else:
                        if lik:
                            C = _coefficients_at(
                                touched, nd, cnt, adv_t, e, inv_s, pold, u == 0, alg.rule,
                                alg.algo, lo_b, hi_b, alg.zero_sum, cvec, dual_c,
                            )  # fmt: skip
                        else:
                            C = _coefficients(
                                touched, nd, cnt, correct, X, adv_c, adv_w, e, inv_s, pold,
                                u == 0, alg.rule, alg.algo, lo_b, hi_b, alg.zero_sum, cvec, dual_c,
                            )  # fmt: skip
                        if reg:
                            C += _regularizer_coefficients(
                                sr, z, e, zmax, inv_s, lq, touched, nd, cnt, N, cvec
                            )
                    t_opt += 1
                    # ad = None (SGD): decided at compile time, the Adam branch is pruned
                    if ad is None or opt.kind == OPT_SGD:
                        _sgd_v(z, e, inv_s, cvec, C, inv_n, opt.lr, opt.wd)
                    else:
                        _adam_v(
                            z, e, inv_s, cvec, C, inv_n, opt.lr, opt.wd, opt.kind == OPT_ADAMW,
                            opt.b1, opt.b2, opt.eps, t_opt, mm, vv,
                        )  # fmt: skip
                    zmax = _max(z)
                    if sr is None:
                        for j in range(nd):
                            cvec[touched[j]] = 0.0
                    elif reg:
                        for i in range(K):
                            cvec[i] = 0.0
                    else:
                        for j in range(nd):
                            cvec[touched[j]] = 0.0
                _clear_counts(cnt, touched, nd)
        else:
            ac = adv_c[X]
            aw = adv_w[X]
            countdown -= 1  # step % renorm_every == 0, without an integer division per step
            rebuild = countdown == 0
            if rebuild:
                countdown = renorm_every
            cmax = 0
            kmax = np.int64(0)  # not the literal 0: one type for tree_leaf_range's argument
            for j in range(nd):
                if cnt[touched[j]] > cmax:
                    cmax = cnt[touched[j]]
                    kmax = touched[j]
            # a group whose advantages are all 0 (X = 0 or N for the zero-sum conventions)
            # moves nothing: z + lr * 0 = z and the leaf times the tabulated exp(0) = 1 is the
            # leaf, so its update is skipped (most steps once a run has concentrated its mass)
            if use_tab and ac == 0.0 and aw == 0.0:
                nd_up = 0
                _clear_counts(cnt, touched, nd)
            else:
                nd_up = nd
            for j in range(nd_up):
                k = touched[j]
                c = correct[k]
                n = cnt[k]
                A = ac if c else aw
                zk = z[k] + lr * ((n * A) * inv_n)
                z[k] = zk
                if zk - shift > 64.0:
                    rebuild = True
                if use_tab:  # exp(zk - shift) as old weight * tabulated exp(dz): no exp here
                    w = tree[P + k] * (etab_c[X, n] if c else etab_w[X, n])
                else:
                    w = np.exp(zk - shift)
                if thr_step is not None:
                    if track and c:  # running correct mass: + new weight - old, compensated
                        wc, wcc = _kadd2(wc, wcc, w)
                        wc, wcc = _kadd2(wc, wcc, -tree[P + k])
                tree_set(tree, P, k, w)
                cnt[k] = 0
            lanes = 4 * cmax < 3 * N
            if rebuild:
                shift = tree_build(z, tree, P)
                if thr_step is not None:
                    if track:
                        wc, wcc = _tree_correct_sum(tree, P, correct)
            if rebuild or nd_up > 0:
                r_lo = 1.0
                r_hi = 0.0
                quiet = 0
            else:
                quiet += 1
                if quiet == 2 and not lanes:
                    kd = kmax
                    r_lo, r_hi = tree_leaf_range(tree, P, kd)
        if li < n_log and step == log_steps[li]:
            _log_row(met, z, correct, submask, p0, sum_p0c, out[li], groups, active, resamples,
                     tails)  # fmt: skip
            groups = 0
            active = 0
            resamples = 0
            li += 1
    if thr_step is not None:
        if ti < n_thr and step_hi == log.n_steps:  # the last state of the run
            ti = _thr_check(
                z, correct, submask, p0, sum_p0c, thresholds, ti, step_hi, scratch, thr_out,
                thr_step,
            )  # fmt: skip
    state_io[1] = state[1]
    if tr is None:
        if dn is not None:
            ints[I_TOPT] = t_opt
    else:
        shift_io[0] = shift
        ints[I_COUNTDOWN] = countdown
    ints[I_LOG] = li
    ints[I_GROUPS] = groups
    ints[I_ACTIVE] = active
    ints[I_RESAMPLES] = resamples


@jit_batch
def run_batch(prob, log, alg, opt, tr, dn, ad, sr, ds, st, step_lo, step_hi, out, thr_out, thr_step,
              met):  # fmt: skip
    """:func:`run_steps` for every run (row) of ``st``, one after another, without the GIL (the
    runner gives each thread a block of rows; ``tr`` = None: the dense path; ``sr`` = None:
    tables only); ``out[r, n_log, n_met]``, ``thr_out[r, n_thr, n_met]``,
    ``thr_step[r, n_thr]``; ``ds``, ``met``: as in :func:`run_steps`."""
    for r in range(st.z.shape[0]):
        if thr_step is None:  # no thresholds (pruned at compile time)
            run_steps(
                prob, log, alg, opt, tr, dn, ad, sr, ds, st.z[r], st.mm[r], st.vv[r], st.tree[r],
                st.shift[r : r + 1], st.rng[r], st.ints[r], st.tails[r], step_lo, step_hi,
                out[r], None, None, met,
            )  # fmt: skip
        else:
            run_steps(
                prob, log, alg, opt, tr, dn, ad, sr, ds, st.z[r], st.mm[r], st.vv[r], st.tree[r],
                st.shift[r : r + 1], st.rng[r], st.ints[r], st.tails[r], step_lo, step_hi,
                out[r], thr_out[r], thr_step[r], met,
            )  # fmt: skip
