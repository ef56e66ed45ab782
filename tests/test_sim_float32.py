"""The simulator's float32 mode (``SimConfig.precision``, docs/precision.md)."""

from __future__ import annotations

import numpy as np
import pytest
from numba import njit

from fgrpo_theory.sim import SimConfig, simulate
from fgrpo_theory.sim.grid import config_hash
from fgrpo_theory.sim.kcore import SAMPLER_IID, SAMPLER_SORTED
from fgrpo_theory.sim.kfloat import X_MIN32, _draw32, _exp32, _exp_blocks32, _neg_log

# A small dense case with Adam and the linear surrogate (the paper's Fig. 2 family), K >= 32 so
# the vectorized float32 exp is used.
SMALL = dict(K=300, N=16, steps=60, rule="linear", optimizer="adam", lr=0.05, log_every=60)


def _final(cfg: SimConfig) -> np.ndarray:
    df = simulate(cfg)
    return df[df.step == cfg.steps].sort_values("run")[["q_pos", "m_ret"]].to_numpy()


def test_default_hashes_unchanged():
    # values printed by config_hash on branch m2 before the option existed (independent oracle)
    assert config_hash(SimConfig()) == "4b3e4be7e19feb72"
    cfg = SimConfig(K=300, N=16, optimizer="adam", rule="linear", thresholds=(0.5,))
    assert config_hash(cfg) == "ea0bca28e1cf81b3"
    assert config_hash(cfg.replace(precision="float64")) == "ea0bca28e1cf81b3"
    assert config_hash(cfg.replace(precision="float32")) != "ea0bca28e1cf81b3"


@njit(cache=False)
def _exp32_all(x):
    e = np.empty_like(x)
    for i in range(x.shape[0]):
        e[i] = _exp32(x[i])
    return e


@njit(cache=False)
def _blocks(z, m):
    e = np.empty_like(z)
    cum = np.empty(z.shape[0])
    S = _exp_blocks32(z, e, m, cum)
    return e, cum, S


@njit(cache=False)
def _neg_log_all(u):
    out = np.empty_like(u)
    for i in range(u.shape[0]):
        out[i] = _neg_log(u[i])
    return out


@njit(cache=False)
def _counts(sampler, e, S, cum, N, reps, key):
    K = e.shape[0]
    gaps = np.empty(N + 1)
    state = np.array([key, 0], np.uint64)
    cnt = np.zeros(K, np.int64)
    touched = np.empty(min(N, K) + 1, np.int64)
    correct = np.zeros(K, np.uint8)
    total = np.zeros(K, np.int64)
    for _ in range(reps):
        nd, X = _draw32(sampler, e, S, cum, gaps, correct, N, state, cnt, touched)
        for j in range(nd):
            total[touched[j]] += cnt[touched[j]]
            cnt[touched[j]] = 0
    return total


def test_exp32_within_2_ulp_of_float64_exp():
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.uniform(X_MIN32, 0.0, 200_000), np.linspace(-1.0, 0.0, 10_001)])
    x = x.astype(np.float32)
    got = _exp32_all(x)
    ref = np.exp(x.astype(np.float64))  # the exact exp of the float32 argument, in float64
    ulp = np.spacing(ref.astype(np.float32)).astype(np.float64)
    err = np.abs(got.astype(np.float64) - ref) / ulp
    assert err.max() <= 2.0
    assert _exp32_all(np.array([-88.0, -200.0, 0.0], np.float32)).tolist() == [0.0, 0.0, 1.0]


@pytest.mark.parametrize("K", [1, 63, 64, 1000, 4096])
def test_block_cdf_is_the_cumulative_block_mass(K):
    z = np.random.default_rng(K).normal(0.0, 3.0, K).astype(np.float32)
    m = z.max()
    e, cum, S = _blocks(z, m)
    np.testing.assert_array_equal(e, _exp32_all(z - m))
    nb = (K + 63) // 64
    ref = np.cumsum([e[b * 64 : b * 64 + 64].astype(np.float64).sum() for b in range(nb)])
    np.testing.assert_allclose(cum[:nb], ref, rtol=1e-6)  # 8 lanes x 8 float32 terms per block
    assert S == cum[nb - 1]


def test_neg_log_against_numpy():
    u = np.concatenate(
        [np.random.default_rng(1).random(200_000), np.geomspace(2.0**-53, 1.0, 20_001)]
    )
    u = u[u > 0]
    assert np.max(np.abs(_neg_log_all(u) + np.log(u))) < 1e-12


@pytest.mark.parametrize("sampler", [SAMPLER_IID, SAMPLER_SORTED])
def test_float32_samplers_draw_the_softmax(sampler):
    # 200,000 draws over 300 actions (some of zero weight): counts within 5 binomial standard
    # errors of n p (fixed seed; chance of a miss at 300 cells ~ 2e-4) and never a zero weight
    K = 300
    z = np.random.default_rng(5).normal(0.0, 1.5, K).astype(np.float32)
    z[::37] = -200.0  # exp gives 0 below -87
    e, cum, S = _blocks(z, z.max())
    N = 2_000 if sampler == SAMPLER_SORTED else 50
    n = 200_000
    got = _counts(sampler, e, S, cum, N, n // N, 7)
    p = e.astype(np.float64) / e.astype(np.float64).sum()
    assert got.sum() == n and np.all(got[p == 0] == 0)
    z_score = np.abs(got - n * p) / np.sqrt(n * p * (1 - p) + 1e-300)
    assert z_score[p > 0].max() < 5.0


def test_float32_agrees_with_float64_in_distribution():
    # independent seeds, so the two means differ by Monte Carlo error only
    n = 48
    a = _final(SimConfig(**SMALL, seeds=n, seed=1, precision="float32"))
    b = _final(SimConfig(**SMALL, seeds=n, seed=10_001))
    for j in range(2):
        se = np.sqrt(a[:, j].var(ddof=1) / n + b[:, j].var(ddof=1) / n)
        assert abs(a[:, j].mean() - b[:, j].mean()) <= 4.0 * se + 1e-6
    # and paired (same seeds) runs stay close: float32 rounding, not a different process
    c = _final(SimConfig(**SMALL, seeds=8, seed=1))
    d = _final(SimConfig(**SMALL, seeds=8, seed=1, precision="float32"))
    assert np.median(np.abs(c - d)) < 1e-3


def test_float32_state_is_float32_and_metrics_exact():
    from fgrpo_theory.policy import probabilities
    from fgrpo_theory.sim.runner import build_records, prepare

    cfg = SimConfig(K=40, logits="1.3x10,0.1x30", correct="0..9", precision="float32")
    a = prepare(cfg)
    assert a["z0"].dtype == np.float32 and a["backend"] == "dense"
    rec = build_records(cfg, a)
    # p0 is the softmax of the float32 logits, computed in float64
    z = np.float32([1.3] * 10 + [0.1] * 30).astype(np.float64)
    np.testing.assert_allclose(rec["prob"].p0, probabilities(z), rtol=1e-15)
    df = simulate(cfg.replace(steps=1, log_every=1))
    # step 0: nothing lost (p0 is the float32 start's softmax; float64 logits 1.3 and 0.1 would
    # differ by ~1e-8 in p0 and give m_ret ~ 1 - 1e-8)
    assert abs(df.m_ret.iloc[0] - 1.0) < 1e-14


def test_float32_thread_count_reproducible():
    cfg = SimConfig(**SMALL, seeds=6, precision="float32")
    one = simulate(cfg, threads=1)
    two = simulate(cfg, threads=2)
    assert one.equals(two)


def test_float32_sorted_sampler_and_sgd_run():
    # the sorted sampler and SGD in float32 learn like float64 (same config, different streams
    # of draws: the spacings use a vectorized log, so compare the mean over seeds loosely)
    cfg = SimConfig(K=2000, N=64, steps=20, seeds=8, lr=0.3, sampler="sorted", precision="float32")
    a = _final(cfg)
    b = _final(cfg.replace(precision="float64"))
    assert np.all(np.isfinite(a))
    # two samples of 8 seeds: the difference of the means within 5 of its standard errors
    se = np.sqrt(a[:, 0].var(ddof=1) / len(a) + b[:, 0].var(ddof=1) / len(b))
    assert se > 0 and abs(a[:, 0].mean() - b[:, 0].mean()) < 5 * se


def test_auto_backend_is_dense_in_float32():
    from fgrpo_theory.sim.runner import prepare

    cfg = SimConfig(K=6, N=8, precision="float32")  # auto picks the sum tree in float64
    assert prepare(cfg.replace(precision="float64"))["backend"] == "sumtree"
    assert prepare(cfg)["backend"] == "dense"


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(precision="float16"), "precision must be one of"),
        (dict(precision="float32", backend="sumtree"), "backend must be dense or auto"),
    ],
)
def test_config_refusals(kw, match):
    with pytest.raises(ValueError, match=match):
        SimConfig(**kw)


@pytest.mark.parametrize(
    "kw, match",
    [
        # a correct action 81 nats below the max: exp(-81) ~ 6.6e-36, refused at span > 80
        (dict(K=40, logits="81,0x39", correct="1"), "spanning 81"),
        # Adam moves a logit by <= lr = 1e-8; half an ulp of float32 at |z| >= 4 is 2.4e-7
        (dict(K=40, logits="4x40", optimizer="adam", lr=1e-8), "lr = 1e-08"),
        # SGD: |A| <= 1 (GRPO, N = 2), |g| <= 2: lr * 2 < half an ulp at 4
        (dict(K=40, N=2, logits="4x40", lr=1e-8), "lr = 1e-08"),
        (dict(K=40, optimizer="adam", adam_eps=1e-40), "adam_eps"),
        # one logit of 0 does not let the others move (the largest |z| decides)
        (dict(K=40, logits="4x39,0", optimizer="adam", lr=1e-8), "lr = 1e-08"),
        # Adam's step <= 3.16 lr (default betas): 3.16 * 7e-8 = 2.2e-7 < 2.38e-7 = half an ulp at 4
        (dict(K=40, logits="4x40", optimizer="adam", lr=7e-8), "lr = 7e-08"),
        (dict(K=4, logits="1e39,0,0,0", correct="0"), "logits up to 1e\\+39"),
        (dict(K=4, logits="100000000,100000001,100000002,100000003", correct="3"), "rounding"),
        (dict(K=4, optimizer="adam", beta2=1 - 1e-9), "beta2"),
    ],
)
def test_float32_refusals(kw, match):
    with pytest.raises(ValueError, match=f"precision must be float64 for.*{match}"):
        simulate(SimConfig(**kw, steps=2, precision="float32"))


def test_float32_accepted_at_the_bounds():
    # span exactly 80, and Adam's step bound just above half an ulp of the largest logits
    # (3.16 * 1e-7 > 2.38e-7 at |z| = 4): accepted, and run
    df = simulate(SimConfig(K=40, logits="80,0x39", correct="1", steps=2, precision="float32"))
    assert np.isfinite(df.q_pos).all() and (df.q_pos > 0).all()
    simulate(SimConfig(K=40, logits="4x40", optimizer="adam", lr=1e-7, steps=2,
                       precision="float32"))  # fmt: skip
    # SGD with PPO ratios of a second inner update: unbounded for A < 0 without a dual clip, so
    # no step bound exists and nothing is refused
    simulate(SimConfig(K=40, N=2, logits="4x40", lr=1e-8, inner_updates=2, steps=2,
                       precision="float32"))  # fmt: skip


def test_float32_thresholds_dynamic_sampling_and_inner_updates():
    # the dense path's other branches in float32 (threshold checks, DAPO redraws, subsets, a
    # second inner update with ratios): every recorded crossing has Q_pos >= its threshold, and
    # paired with float64 (same draws while rounding decides nothing) the crossing steps agree
    cfg = SimConfig(
        K=300, N=8, steps=300, seeds=4, rule="logprob", optimizer="adam", lr=0.05,
        dynamic_sampling="dapo", thresholds=(0.3, 0.6, 0.9), subsets={"a": "1"},
        inner_updates=2, logits="1.0x10,0.0x290", correct="0..9", backend="dense",
    )  # fmt: skip
    t32 = simulate(cfg.replace(precision="float32"), tables=True).thresholds
    t64 = simulate(cfg, tables=True).thresholds
    assert t32.reached.all() and (t32.q_pos >= t32.threshold).all()
    same = (t32.step.to_numpy() == t64.step.to_numpy()).mean()
    assert same >= 0.9
    assert np.abs(t32.step.to_numpy() - t64.step.to_numpy()).max() <= 2


def test_float32_adamw_decay_is_not_lost_to_rounding():
    """Hand case: z = 1, lr = 2e-8, wd = 1 (decay lr wd z = 2e-8), first Adam step on gradient 1
    (move lr / (1 + eps) ~ 2e-8). Exactly, z becomes 1 - 4e-8, whose nearest float32 is
    1 - 2**-24; rounding the factor 1 - lr wd to float32 (it is 1.0) or the decay on its own
    (below half an ulp) would leave 1 - 2e-8, i.e. 1.0."""
    from fgrpo_theory.sim.kfloat import _adam32

    z = np.ones(1, np.float32)
    mm = np.zeros(1, np.float32)
    vv = np.zeros(1, np.float32)
    e = np.ones(1, np.float32)
    cvec = np.zeros(1, np.float32)
    # gradient of the loss g = e * inv_s * C * inv_n - cvec * inv_n = 1
    _adam32(z, e, 1.0, cvec, 1.0, 1.0, 2e-8, 1.0, True, 0.9, 0.999, 1e-8, 1, mm, vv)
    exact = 1.0 - 2e-8 - 2e-8 / (1.0 + 1e-8)
    assert z[0] == np.float32(exact) == np.float32(1.0 - 2.0**-24)


def test_rows_say_their_precision():
    cfg = SimConfig(K=6, N=4, steps=2, seeds=2, thresholds=(0.5,))
    for p in ("float64", "float32"):
        t = simulate(cfg.replace(precision=p), tables=True)
        assert (t.log.precision == p).all() and (t.thresholds.precision == p).all()
