"""The simulator's float32 mode (``SimConfig.precision``, docs/precision.md)."""

from __future__ import annotations

import numpy as np
import pytest
from numba import njit

from fgrpo_theory.sim import SimConfig, simulate
from fgrpo_theory.sim.grid import config_hash
from fgrpo_theory.sim.kfloat import X_MIN32, _vexp_shift32

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
def _exp32(x):
    e = np.empty_like(x)
    ibuf = np.empty(x.shape[0], np.int64)
    _vexp_shift32(x, e, np.float32(0.0), ibuf, ibuf.view(np.float64))
    return e


def test_exp32_within_2_ulp_of_float64_exp():
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.uniform(X_MIN32, 0.0, 200_000), np.linspace(-1.0, 0.0, 10_001)])
    x = x.astype(np.float32)
    got = _exp32(x)
    ref = np.exp(x.astype(np.float64))  # the exact exp of the float32 argument, in float64
    ulp = np.spacing(ref.astype(np.float32)).astype(np.float64)
    err = np.abs(got.astype(np.float64) - ref) / ulp
    assert err.max() <= 2.0
    assert _exp32(np.array([-88.0, -200.0, 0.0], np.float32)).tolist() == [0.0, 0.0, 1.0]


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
    cfg = SimConfig(K=2000, N=64, steps=20, seeds=2, lr=0.3, sampler="sorted", precision="float32")
    a = _final(cfg)
    b = _final(cfg.replace(precision="float64"))
    assert np.all(np.isfinite(a)) and np.max(np.abs(a - b)) < 1e-3


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
    ],
)
def test_float32_refusals(kw, match):
    with pytest.raises(ValueError, match=f"precision must be float64 for.*{match}"):
        simulate(SimConfig(**kw, steps=2, precision="float32"))


def test_float32_accepted_at_the_bounds():
    # span exactly 80 and lr at the resolution of the smallest logit: accepted, and run
    df = simulate(SimConfig(K=40, logits="80,0x39", correct="1", steps=2, precision="float32"))
    assert np.isfinite(df.q_pos).all() and (df.q_pos > 0).all()
    simulate(SimConfig(K=40, logits="4x39,0", optimizer="adam", lr=1e-8, steps=2,
                       precision="float32"))  # fmt: skip
