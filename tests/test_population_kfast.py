"""The population kernel's faster primitives equal the simulator's, bit for bit.

``population.kfast`` reorganizes the softmax exp and the i.i.d. sampler of ``sim.kcore`` (a
vectorizable scale, running sums searched instead of walked); ``population.kadam`` tables the
Adam scalars and replays idle steps in contiguous buffers. Each is compared here with the
``sim.kcore`` function it replaces (written independently, for another simulator) on random
inputs over the sizes where their code paths branch. The metrics pass is checked against mpmath
here and against the single-prompt simulator in ``test_population_kernel.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import njit

from fgrpo_theory.population.kadam import _adam_catchup, _adam_idle, adam_table
from fgrpo_theory.population.kfast import _draw_p, _exp_shift_v
from fgrpo_theory.sim._jit import FM
from fgrpo_theory.sim.kcore import (
    _adam_move,
    _adam_scalars,
    _clear_counts,
    _exp_shift,
    _sample_iid,
)
from fgrpo_theory.sim.rng import new_stream


@njit(fastmath=FM, error_model="numpy")
def _both_exp(z):
    K = z.shape[0]
    m = z.max()
    e1 = np.empty(K)
    e2 = np.empty(K)
    ib = np.empty(K, np.int64)
    s1 = _exp_shift(z, e1, m, ib, ib.view(np.float64))
    s2 = _exp_shift_v(z, e2, m)
    return e1, e2, s1, s2


@njit(fastmath=FM, error_model="numpy")
def _draws(e, correct, N, key, reps, new):
    """Counts of ``reps`` groups from kcore's sampler (``new`` False) or the population
    kernel's ``_draw_p`` (True), and each group's X."""
    K = e.shape[0]
    cum = np.empty(K)
    pre = np.empty(K)
    cnt = np.zeros(K, np.int64)
    touched = np.empty(min(N, K) + 1, np.int64)
    state = new_stream(key)
    out = np.zeros((reps, K), np.int64)
    xs = np.zeros(reps, np.int64)
    for r in range(reps):
        if new:
            nd, X = _draw_p(e, e.sum(), cum, pre, correct, N, state, cnt, touched)
        else:
            nd, X = _sample_iid(e, cum, correct, N, state, cnt, touched)
        out[r] = cnt
        xs[r] = X
        _clear_counts(cnt, touched, nd)
    return out, xs


SIZES = [3, 16, 17, 31, 32, 63, 64, 65, 128, 200, 256, 300, 640, 1000]


@pytest.mark.parametrize("K", SIZES)
def test_exp_and_sampler_equal_kcore_bit_for_bit(K):
    rng = np.random.default_rng(K)
    for scale in (0.01, 1.0, 8.0, 300.0):
        z = rng.normal(size=K) * scale
        z[rng.integers(K, size=K // 4)] -= 800.0  # weights that underflow to 0
        e1, e2, s1, s2 = _both_exp(z)
        assert e1.view(np.int64).tolist() == e2.view(np.int64).tolist()
        assert s1 == s2
        correct = (rng.random(K) < 0.3).astype(np.uint8)
        for N in (1, 8, 64):
            a, xa = _draws(e1, correct, N, np.uint64(K * 7 + N), 300, False)
            b, xb = _draws(e1, correct, N, np.uint64(K * 7 + N), 300, True)
            assert np.array_equal(a, b) and np.array_equal(xa, xb)


def test_sampler_follows_the_softmax():
    """Not only equal to kcore: the draw frequencies match the probabilities (within 5 SE)."""
    K, reps = 200, 20_000
    rng = np.random.default_rng(3)
    z = rng.normal(size=K) * 2.0
    e = np.exp(z - z.max())
    p = e / e.sum()
    cnt, _ = _draws(e, np.zeros(K, np.uint8), 4, np.uint64(11), reps, True)
    freq = cnt.sum(axis=0) / (4 * reps)
    se = np.sqrt(p * (1 - p) / (4 * reps))
    assert np.all(np.abs(freq - p) < 5 * se + 1e-12)


@njit(error_model="numpy")
def _eager(z, mm, vv, t0, t1, lr, b1, b2, eps):
    """Idle Adam steps written out with kcore's scalars and element step (the reference)."""
    for t in range(t0 + 1, t1 + 1):
        sc = _adam_scalars(lr, 0.0, False, b1, b2, eps, t)
        for i in range(z.shape[0]):
            zi = z[i]
            _adam_move(z, mm, vv, i, zi, sc[8] * zi, sc)


@pytest.mark.parametrize("T", [8, 2])  # the table covers every step, or only the first two
def test_adam_catchup_and_idle_equal_per_step_updates(T):
    rng = np.random.default_rng(5)
    K = 37
    z0 = rng.normal(size=K)
    m0 = rng.normal(size=K) * 1e-3
    v0 = rng.random(K) * 1e-6
    tab = adam_table(0.01, 0.0, False, 0.9, 0.999, 1e-8, T)
    want = [a.copy() for a in (z0, m0, v0)]
    _eager(*want, 1, 6, 0.01, 0.9, 0.999, 1e-8)
    got = [a.copy() for a in (z0, m0, v0)]
    for t in range(2, 7):
        _adam_idle(got[0], 0.01, 0.0, False, 0.9, 0.999, 1e-8, t, got[1], got[2], tab)
    for a, b in zip(got, want, strict=True):
        assert a.tobytes() == b.tobytes()
    # a lazy catch-up of a subset: those elements as above, the others untouched
    idx = np.array([0, 3, 4, 10, 36, 0], np.int64)
    n = 5
    lazy = [a.copy() for a in (z0, m0, v0)]
    buf = [np.empty(K) for _ in range(3)]
    _adam_catchup(*lazy, idx, n, 1, 6, 0.01, 0.0, False, 0.9, 0.999, 1e-8, tab, *buf)
    sel = idx[:n]
    other = np.setdiff1d(np.arange(K), sel)
    for a, b, a0 in zip(lazy, want, (z0, m0, v0), strict=True):
        assert a[sel].tobytes() == b[sel].tobytes()
        assert a[other].tobytes() == a0[other].tobytes()
    full = [a.copy() for a in (z0, m0, v0)]
    _adam_catchup(*full, np.arange(K), K, 1, 6, 0.01, 0.0, False, 0.9, 0.999, 1e-8, tab, *buf)
    for a, b in zip(full, want, strict=True):
        assert a.tobytes() == b.tobytes()


def _metrics_oracle(z, correct, rare):
    import mpmath

    with mpmath.workdps(50):
        zz = [mpmath.mpf(float(x)) for x in z]
        lse = mpmath.log(mpmath.fsum(mpmath.exp(x) for x in zz))
        lp = [x - lse for x in zz]
        p = [mpmath.exp(x) for x in lp]
        ok = [i for i in range(len(z)) if correct[i]]
        cr = [i for i in ok if rare[i]]
        return [
            float(mpmath.fsum(p[i] for i in ok)),
            float(mpmath.fsum(p[i] for i in cr)),
            float(-mpmath.fsum(a * b for a, b in zip(p, lp, strict=True))),
            float(-mpmath.fsum(lp[i] for i in cr)),
        ]


@pytest.mark.parametrize("K", [1, 7, 8, 20, 64, 301, 20_000])
@pytest.mark.parametrize("case", ["spread", "dominant"])
def test_metrics_pass_against_mpmath(K, case):
    """The population's metrics (mu, rare correct mass, entropy, sum of -log p over the rare
    correct strategies) against mpmath at 50 digits from the same float64 logits: spread logits
    with probabilities down to 1e-15 and one at exactly 0 in float64 (800 below the largest),
    and a near-deterministic policy (the others 30 nats down, entropy 1e-11 to 1e-7, where
    ``log`` of the rounded softmax sum is wrong from the 8th digit); rare marks on incorrect
    strategies too (they do not count), and an empty rare set (exact zeros). At K = 20,000 a
    plain float64 sum of the probabilities is off by about 1e-14: the sums must be compensated."""
    from fgrpo_theory.population.kfast import _prompt_metrics_row

    rng = np.random.default_rng(K)
    if case == "spread":
        z = rng.normal(0.0, 3.0, K)
        z[: K // 3] -= 30.0
        if K > 2:
            z[1] = z.max() - 800.0
    else:
        z = rng.normal(-30.0, 0.5, K)
        z[0] = 0.0
    correct = (rng.random(K) < 0.5).astype(np.uint8)
    correct[0] = 1
    K8 = (K + 7) // 8 * 8
    for rare in ((rng.random(K) < 0.5).astype(np.uint8), np.zeros(K, np.uint8)):
        row = np.full(4, np.nan)
        _prompt_metrics_row(z, correct, rare, row, np.empty(K8), np.empty((4, K8)), np.empty(64))
        ref = _metrics_oracle(z, correct, rare)
        for j in range(4):
            # each term's relative error is a few ulps (exp <= 1.01 ulp, the division by the
            # sum and the product's roundings) and the compensated sum adds about one: the
            # terms are nonnegative, so the sum's relative error is below 8e-16
            assert abs(row[j] - ref[j]) <= 8e-16 * abs(ref[j]), (j, row[j], ref[j])
        if not rare.any():
            assert row[1] == 0.0 and row[3] == 0.0


def test_metrics_pass_refuses_short_scratch():
    from fgrpo_theory.population.kfast import _prompt_metrics_row

    z = np.zeros(5)
    ok = np.ones(5, np.uint8)
    with pytest.raises(ValueError, match="scratch"):
        _prompt_metrics_row(z, ok, ok, np.empty(4), np.empty(5), np.empty((4, 8)), np.empty(64))
