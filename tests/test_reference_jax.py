"""The JAX benchmark reference computes the simulator's algorithm (issue 14).

Checked against the NumPy reference on the same samples (one step, hand-derivable formulas that
test_benchmark_references.py checks against mpmath and exact enumeration), its generator and
sampler against their distributions, and whole runs against the simulator in distribution
(Monte Carlo tolerances from the standard errors at fixed seeds). Skipped when JAX is absent.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("jax") is None, reason="jax is not installed (bench extra)"
)


def _load(name: str):
    mod_name = f"_fgrpo_bench_{name}"
    if mod_name not in sys.modules:
        spec = importlib.util.spec_from_file_location(mod_name, BENCH / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[mod_name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[mod_name]


rj = _load("reference_jax")
rn = _load("reference_numpy")


def test_tabular_step_equals_numpy_reference_on_same_counts():
    rng = np.random.default_rng(1)
    K, N = 7, 8
    correct = np.arange(K) < 3
    for gamma in (0.0, 0.5, 1.0):
        z = rng.normal(size=(5, K))
        counts = rng.multinomial(N, np.full(K, 1.0 / K), size=5).astype(float)
        want = z + 0.3 * rn.logprob_gradient(
            rn.softmax(z), counts, correct, gamma, "grpo", 1.0, 0.0
        )
        got = np.asarray(rj.tabular_logprob_step(z, counts, correct, 0.3, gamma, 1.0, 0.0))
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-15)


def test_linear_adamw_steps_equal_numpy_reference_on_same_counts():
    rng = np.random.default_rng(2)
    K, N = 50, 16
    correct = np.arange(K) < 10
    z_np = rng.normal(size=K)
    z_jx, m, v = z_np.copy(), np.zeros(K), np.zeros(K)
    state = rn.AdamState.zeros_like(z_np)
    for t in range(1, 4):
        counts = rng.multinomial(N, rn.softmax(z_np)).astype(float)
        g = rn.linear_gradient(rn.softmax(z_np), counts, correct, 1.0, "mean", 1.0, -1.0)
        z_np = rn.adam_update(z_np, g, state, 0.05, weight_decay=0.01)
        z_jx, m, v = rj.linear_step(
            z_jx, m, v, float(t), counts, correct, 0.05, 1.0, "adamw", 0.01, 1.0, -1.0
        )
    np.testing.assert_allclose(np.asarray(z_jx), z_np, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_counter_based_uniforms_are_uniform(dtype):
    jnp = rj._jax().numpy
    dt = rj._dtype(dtype)
    u = np.asarray(rj.uniforms(rj._stream_key(3, 0), jnp.arange(100_000, dtype=jnp.uint64), dt))
    assert u.dtype == np.dtype(dtype)
    assert 0.0 <= u.min() and u.max() < 1.0
    assert stats.kstest(u.astype(float), "uniform").pvalue > 1e-3
    # different runs and different counters give different streams
    u2 = np.asarray(rj.uniforms(rj._stream_key(3, 1), jnp.arange(1_000, dtype=jnp.uint64), dt))
    assert not np.array_equal(u[:1_000], u2)


@pytest.mark.parametrize("N", [2, 40])  # two-level CDF (N * 128 <= 2K) and the full CDF
def test_sampler_counts_follow_the_policy(N):
    jax = rj._jax()
    jnp = jax.numpy
    K, reps = 300, 4_000
    p = np.random.default_rng(4).dirichlet(np.full(K, 0.5))
    key = rj._stream_key(5, 0)
    ctr = jnp.arange(reps * N, dtype=jnp.uint64).reshape(reps, N)
    u = rj.uniforms(key, ctr, jnp.float64)
    counts = jax.vmap(lambda uu: rj._draw_counts(jnp.asarray(p), uu, K, N, jnp.float64))(u)
    total = np.asarray(counts).sum(axis=0)
    assert total.sum() == reps * N
    # chi-square goodness of fit, pooling the actions expected fewer than 5 times
    exp = p * reps * N
    big = exp >= 5
    obs_f = np.append(total[big], total[~big].sum())
    exp_f = np.append(exp[big], exp[~big].sum())
    assert stats.chisquare(obs_f, exp_f).pvalue > 1e-4


def test_tabular_run_matches_simulator_in_distribution():
    from fgrpo_theory.sim import SimConfig, simulate

    K, N, steps, seeds = 6, 8, 30, 2_000
    cfg = SimConfig(
        K=K, logits="1.0x1,0.0x5", correct=2, N=N, steps=steps, seeds=seeds, algo="grpo",
        rule="logprob", advantage="grpo", gamma=0.0, optimizer="sgd", lr=0.1,
        r_correct=1.0, r_incorrect=0.0, log_steps=(0, steps),
    )  # fmt: skip
    df = simulate(cfg, threads=1)
    q_sim = df.loc[df["step"] == steps, "q_pos"].to_numpy()
    z0 = np.array([1.0, 0, 0, 0, 0, 0])
    _, q_jax = rj.run_tabular_logprob(z0, np.arange(K) < 2, N, steps, seeds, 0.1)
    se = np.hypot(q_sim.std(ddof=1), q_jax.std(ddof=1)) / np.sqrt(seeds)
    assert abs(q_sim.mean() - q_jax.mean()) < 4 * se
    assert stats.ks_2samp(q_sim, q_jax).pvalue > 1e-4


def test_linear_run_matches_simulator_in_distribution():
    from fgrpo_theory.sim import SimConfig, simulate

    K, N, steps, seeds = 64, 4, 40, 200
    logits = "3.0x1,1.0x15,0.0x48"
    cfg = SimConfig(
        K=K, logits=logits, correct=16, N=N, steps=steps, seeds=seeds, algo="grpo",
        rule="linear", advantage="dr-grpo", gamma=1.0, optimizer="adamw", lr=0.05,
        r_correct=1.0, r_incorrect=-1.0, log_steps=(0, steps),
    )  # fmt: skip
    df = simulate(cfg, threads=1)
    q_sim = df.loc[df["step"] == steps, "q_pos"].to_numpy()
    z0 = np.concatenate([[3.0], np.full(15, 1.0), np.zeros(48)])
    correct = np.arange(K) < 16
    q_jax = []
    for s in range(seeds):
        z = rj.run_linear(z0, correct, N, steps, 0.05, gamma=1.0, seed=s)
        q_jax.append(rn.softmax(z)[correct].sum())
    q_jax = np.asarray(q_jax)
    se = np.hypot(q_sim.std(ddof=1), q_jax.std(ddof=1)) / np.sqrt(seeds)
    assert abs(q_sim.mean() - q_jax.mean()) < 4 * se


def test_float32_tracks_float64():
    z0 = np.array([1.0, 0, 0, 0, 0, 0])
    correct = np.arange(6) < 2
    _, q64 = rj.run_tabular_logprob(z0, correct, 8, 50, 500, 0.1)
    _, q32 = rj.run_tabular_logprob(z0, correct, 8, 50, 500, 0.1, dtype="float32")
    assert q32.dtype == np.float32
    # same uniforms up to rounding: almost every seed draws the same groups
    assert np.median(np.abs(q32 - q64)) < 1e-5
    assert abs(q32.mean() - q64.mean()) < 1e-3


def test_bad_dtype_and_optimizer_are_refused():
    with pytest.raises(ValueError, match="dtype"):
        rj.run_tabular_logprob(np.zeros(3), np.array([1, 0, 0], bool), 2, 1, 1, 0.1, dtype="f16")
    with pytest.raises(ValueError, match="optimizer"):
        rj.run_linear(np.zeros(3), np.array([1, 0, 0], bool), 2, 1, 0.1, optimizer="rmsprop")


def test_tabular_adam_steps_equal_numpy_reference_on_same_counts():
    # issue 27: the dense Adam reference (log-prob ascent, Adam on the loss gradient)
    rng = np.random.default_rng(6)
    K, N = 9, 8
    correct = np.arange(K) < 3
    z_np = rng.normal(size=K)
    z_jx, m, v = z_np.copy(), np.zeros(K), np.zeros(K)
    state = rn.AdamState.zeros_like(z_np)
    for t in range(1, 4):
        p = rn.softmax(z_np)
        counts = rng.multinomial(N, p).astype(float)
        g = rn.logprob_gradient(p, counts, correct, 0.5, "grpo", 1.0, 0.0)
        z_np = rn.adam_update(z_np, g, state, 0.05)
        asc = rj._logprob_ascent(z_jx, rj._softmax(z_jx), counts, correct, 0.5, 1.0, 0.0)
        z_jx, m, v = rj._adam_step(z_jx, m, v, float(t), -asc, 0.05)
    # the zero-sum advantages leave a ~1e-16 rounding residue in sum_k n_k A_k that Adam
    # normalizes (both references differ there by ~1e-11); a wrong formula moves z by ~lr
    np.testing.assert_allclose(np.asarray(z_jx), z_np, rtol=0, atol=1e-9)


def test_metrics_rows_against_hand_formulas():
    # issue 27: the jitted metrics reference against the definitions in NumPy (long double sums)
    rng = np.random.default_rng(7)
    K = 500
    Z = rng.normal(0.0, 2.0, (3, K))
    correct = rng.random(K) < 0.3
    sub = np.zeros((2, K), bool)
    sub[0, :40] = True
    sub[1, 7] = True
    p0 = rn.softmax(rng.normal(size=K))
    got = rj.metrics_rows(Z, correct, sub, p0)
    for r in range(3):
        z = Z[r].astype(np.longdouble)
        e = np.exp(z - z.max())
        p = e / e.sum()
        lp = np.log(p)
        want = [
            p[correct].sum(),
            1 - np.maximum(p0[correct] - p[correct], 0).sum() / p0[correct].sum(),
            -(p * lp).sum(),
            p[sub[0]].sum(),
            p[sub[1]].sum(),
            -lp[sub[0]].mean(),
            -lp[sub[1]].mean(),
        ]
        np.testing.assert_allclose(got[r], np.array(want, dtype=float), rtol=1e-12)
