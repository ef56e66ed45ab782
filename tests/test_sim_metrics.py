"""The simulator's exact metrics pass (:mod:`fgrpo_theory.sim.kmetrics`) against an mpmath oracle.

Oracles: every metric computed with mpmath at 50 digits from the same float64 logits (hand
definitions: softmax, entropy, correct mass, lost mass of M_ret, subset masses and mean NLLs);
the pass's exp against ``numpy.exp`` and bit for bit against the training path's vectorized exp
(:func:`fgrpo_theory.sim.kcore._vexp_shift`, whose arithmetic it reuses).
"""

from __future__ import annotations

import mpmath
import numpy as np
import pytest

from fgrpo_theory.sim.kcore import _vexp_shift
from fgrpo_theory.sim.kernels import M_ENT, M_MRET, M_QPOS, M_SUB0, m_nll, n_metrics
from fgrpo_theory.sim.kmetrics import MB, _metrics, _vexp_block

mpmath.mp.dps = 50


def _oracle(z, correct, submask, p0):
    e = [mpmath.exp(mpmath.mpf(float(x))) for x in z]
    s = mpmath.fsum(e)
    p = [x / s for x in e]
    lp = [mpmath.log(x) for x in p]
    c = correct.astype(bool)
    q = mpmath.fsum(p[i] for i in range(len(z)) if c[i])
    lost = mpmath.fsum(
        max(mpmath.mpf(float(p0[i])) - p[i], 0) for i in range(len(z)) if c[i]
    )  # fmt: skip
    sum_p0c = mpmath.fsum(mpmath.mpf(float(p0[i])) for i in range(len(z)) if c[i])
    ent = -mpmath.fsum(a * b for a, b in zip(p, lp, strict=True))
    out = {"q": q, "mret": 1 - lost / sum_p0c, "ent": ent}
    for j in range(submask.shape[0]):
        idx = np.flatnonzero(submask[j])
        out[f"mass{j}"] = mpmath.fsum(p[i] for i in idx)
        out[f"nll{j}"] = -mpmath.fsum(lp[i] for i in idx) / len(idx)
    return out


@pytest.mark.parametrize("K", [7, 300, 2 * MB + 13])
def test_metrics_against_mpmath(K):
    rng = np.random.default_rng(K)
    z = rng.normal(0.0, 3.0, K)
    z[: K // 3] -= 30.0  # tiny probabilities too
    correct = (rng.random(K) < 0.4).astype(np.uint8)
    correct[0] = 1
    submask = np.zeros((2, K), np.uint8)
    submask[0, rng.choice(K, max(1, K // 5), replace=False)] = 1
    submask[1, K - 1] = 1  # one action (the last, partial block)
    p0 = np.exp(rng.normal(0.0, 1.0, K))
    p0 /= p0.sum()
    row = np.zeros(n_metrics(2))
    _metrics(z, correct, submask, p0, float(p0[correct == 1].sum()), row)
    ref = _oracle(z, correct, submask, p0)
    got = {
        "q": row[M_QPOS],
        "mret": row[M_MRET],
        "ent": row[M_ENT],
        "mass0": row[M_SUB0],
        "mass1": row[M_SUB0 + 1],
        "nll0": row[m_nll(2)],
        "nll1": row[m_nll(2) + 1],
    }
    for k, v in got.items():
        # a few ulps: the exps (<= 1.01 ulp each) and the final roundings; M_ret also carries
        # the rounding of the float64 sum of p0 over the correct actions
        tol = 8e-16 * abs(float(ref[k])) + (1e-15 if k == "mret" else 0.0)
        assert abs(v - float(ref[k])) <= tol, (k, v, float(ref[k]))


def test_metrics_exp_matches_training_exp_bit_for_bit():
    rng = np.random.default_rng(1)
    n = 4 * MB + 5
    z = np.concatenate([rng.uniform(-750.0, 0.0, n - 5), [0.0, -708.0, -707.9, -1e-300, -800.0]])
    e1 = np.empty(n)
    ib = np.empty(n, np.int64)
    _vexp_shift(z, e1, 0.0, ib, ib.view(np.float64))
    e2 = np.empty(n)
    _vexp_block(z, e2, 0.0, n)
    assert np.array_equal(e1.view(np.int64), e2.view(np.int64))
    ok = z > -700.0
    assert np.max(np.abs(e2[ok] / np.exp(z[ok]) - 1.0)) < 2.3e-16  # <= 1.01 ulp


def test_the_pass_called_through_its_address_writes_what_a_direct_call_writes():
    """``call_metrics`` (the small-K loop's call, through the address, no linking) against the
    direct call, on rows with subsets, several blocks and a ragged last block; other argument
    types do not type (the address was compiled for ``METRICS_ARGS`` only)."""
    import numba

    from fgrpo_theory.sim.kmetrics import call_metrics, metrics_address

    @numba.njit
    def through(addr, z, correct, submask, p0, sum_p0c, out):
        for r in range(out.shape[0]):
            call_metrics(addr, z[r], correct, submask, p0, sum_p0c, out[r])

    rng = np.random.default_rng(3)
    K = 2 * MB + 37
    z = rng.normal(0.0, 3.0, (4, K))
    correct = (rng.random(K) < 0.3).astype(np.uint8)
    submask = (rng.random((3, K)) < 0.2).astype(np.uint8)
    p0 = np.exp(z[0] - z[0].max())
    p0 /= p0.sum()
    sum_p0c = float(p0[correct == 1].sum())
    got = np.full((4, n_metrics(3)), np.nan)
    through(metrics_address(), z, correct, submask, p0, sum_p0c, got)
    want = np.full((4, n_metrics(3)), np.nan)
    for r in range(4):
        _metrics(z[r], correct, submask, p0, sum_p0c, want[r])
    assert np.array_equal(got, want, equal_nan=True)
    with pytest.raises(numba.core.errors.TypingError):
        through(metrics_address(), z.astype(np.float32), correct, submask, p0, sum_p0c, got)
