"""Exact identities of the simulator: random streams, reproducibility, focal gamma = 0, CISPO."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fgrpo_theory.sim import SimConfig, simulate
from fgrpo_theory.sim.kernels import n_metrics
from fgrpo_theory.sim.keys import run_keys, stream_words
from fgrpo_theory.sim.records import new_state
from fgrpo_theory.sim.runner import _run_chunk, build_records, prepare

CONFIG_COLS = ["algo", "clip_low", "clip_high", "config_hash", "gamma", "advantage"]


def test_numba_stream_matches_documented_formula():
    from numba import njit

    from fgrpo_theory.sim.rng import next_u64, next_uniform

    @njit
    def words(key, n):
        st = np.empty(2, np.uint64)
        st[0] = key
        st[1] = 0
        out = np.empty(n, np.uint64)
        for i in range(n):
            out[i] = next_u64(st)
        return out

    @njit
    def uniforms(key, n):
        st = np.empty(2, np.uint64)
        st[0] = key
        st[1] = 0
        out = np.empty(n)
        for i in range(n):
            out[i] = next_uniform(st)
        return out

    key = int(run_keys(7, 3)[2])
    # SplitMix64 reference values computed by hand from the published constants
    mask = (1 << 64) - 1

    def mix(x):
        x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & mask
        x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & mask
        return x ^ (x >> 31)

    expected = [mix((key + i * 0x9E3779B97F4A7C15) & mask) for i in range(1, 6)]
    assert [int(w) for w in words(np.uint64(key), 5)] == expected == stream_words(key, 5)
    u = uniforms(np.uint64(key), 5)
    assert u.tolist() == [(w >> 11) * 2.0**-53 for w in expected]
    # known SplitMix64 output: seed 0 -> first word 0xE220A8397B1DCDAF
    assert mix(0x9E3779B97F4A7C15) == 0xE220A8397B1DCDAF


@pytest.mark.parametrize("seed", [0, 1, 12345, 2**63 + 7, 2**64 - 1])
def test_run_keys_follow_the_documented_formula(seed):
    # oracle: key_r = mix64(mix64(seed) ^ mix64(r + GOLDEN)) on Python integers modulo 2**64
    def mix(x):
        x &= (1 << 64) - 1
        x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & ((1 << 64) - 1)
        x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & ((1 << 64) - 1)
        return x ^ (x >> 31)

    base = mix(seed)
    want = [mix(base ^ mix(r + 0x9E3779B97F4A7C15)) for r in range(300)]
    assert run_keys(seed, 300).tolist() == want


def test_run_keys_distinct():
    k = run_keys(0, 1000)
    assert len(set(k.tolist())) == 1000
    assert not set(run_keys(1, 1000).tolist()) & set(k.tolist())


SMALL = dict(K=6, logits="0.5x1,0.2x1,0.0x4", correct=2, N=8, steps=40, seeds=16, log_every=5)
CASES = {
    "sgd-small": dict(SMALL),
    "adam-linear-dynamic": dict(
        SMALL, optimizer="adam", rule="linear", lr=0.05, dynamic_sampling="dapo", algo="dapo"
    ),
    "adamw-sorted": dict(
        K=3000, logits="2.0x1,1.0x299,0.0x2700", correct="0..299", subsets={"rare": "1..299"},
        N=64, steps=20, seeds=4, optimizer="adamw", weight_decay=0.01, lr=0.01,
        sampler="sorted", inner_updates=2,
    ),
    "sumtree": dict(
        K=20000, logits="2.0x1,1.0x1999,0.0x18000", correct="0..1999", subsets={"r": "1..1999"},
        N=16, steps=200, seeds=4, lr=1.0, advantage="dr-grpo",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_bit_identical_for_1_and_2_threads_and_reruns(case):
    import numba

    cfg = SimConfig(**CASES[case])
    one = simulate(cfg, threads=1)
    two = simulate(cfg, threads=min(2, numba.config.NUMBA_NUM_THREADS))
    again = simulate(cfg, threads=1)
    batched = simulate(cfg, progress=lambda done, total: None)
    for other in (two, again, batched):
        pd.testing.assert_frame_equal(one, other, check_exact=True)
    # and the runs are not copies of each other, nor of another seed
    first = one[one.step == cfg.steps].q_pos.to_numpy()
    assert len(np.unique(first)) == cfg.n_runs
    other_seed = simulate(cfg.replace(seed=1))
    assert not np.array_equal(other_seed.q_pos.to_numpy(), one.q_pos.to_numpy())


def _run_with_tables(cfg, adv_c, adv_w):
    a = prepare(cfg)
    a["adv_c"], a["adv_w"] = adv_c, adv_w
    out = np.zeros((cfg.n_runs, len(a["log_steps"]), n_metrics(0)))
    rec = build_records(cfg, a)
    keys = run_keys(cfg.seed, cfg.n_runs)
    st = new_state(rec["prob"], rec["log"], rec["opt"], keys, rec["tree"] is not None)
    _run_chunk(rec, st, 0, cfg.steps, out)
    return out


@pytest.mark.parametrize("advantage", ["grpo", "dr-grpo", "rloo"])
def test_focal_gamma_zero_is_vanilla_and_gamma_one_scales_by_one_minus_xhat(advantage):
    """gamma = 0 must use the unweighted advantages exactly (including 0**0 = 1 at X = N)."""
    from fgrpo_theory.advantages import binary_advantages

    cfg = SimConfig(**SMALL, optimizer="adam", lr=0.05, advantage=advantage)
    N = cfg.N
    X = np.arange(N + 1)
    ac, aw = binary_advantages(X, N, advantage, r_correct=1.0, r_incorrect=-1.0)
    vanilla = _run_with_tables(cfg, np.asarray(ac, float), np.asarray(aw, float))
    got = simulate(cfg.replace(gamma=0.0))
    np.testing.assert_array_equal(got.q_pos.to_numpy(), vanilla[:, :, 0].ravel())
    np.testing.assert_array_equal(got.entropy.to_numpy(), vanilla[:, :, 2].ravel())
    # gamma = 1: advantages times (1 - X/N) (P-12, P-13), built here by hand
    w = 1.0 - X / N
    focal = _run_with_tables(cfg, np.asarray(ac) * w, np.asarray(aw) * w)
    got1 = simulate(cfg.replace(gamma=1.0))
    np.testing.assert_array_equal(got1.q_pos.to_numpy(), focal[:, :, 0].ravel())
    assert not np.array_equal(got1.q_pos.to_numpy(), got.q_pos.to_numpy())


@pytest.mark.parametrize(
    "extra",
    [
        dict(),
        dict(optimizer="adam", lr=0.05, dynamic_sampling="dapo", max_resamples=3),
        dict(gamma=1.0, advantage="rloo", optimizer="adamw", weight_decay=0.1, lr=0.05),
        dict(clip_low=0.0, clip_high=0.0),
    ],
)
def test_cispo_with_one_inner_update_equals_logprob_grpo(extra):
    g = simulate(SimConfig(**SMALL, **extra, algo="grpo"))
    for other in ("cispo", "dapo"):
        c = simulate(SimConfig(**SMALL, **extra, algo=other))
        pd.testing.assert_frame_equal(
            g.drop(columns=CONFIG_COLS), c.drop(columns=CONFIG_COLS), check_exact=True
        )


def test_cispo_differs_from_grpo_with_inner_updates():
    kw = dict(SMALL, lr=1.0, inner_updates=3)
    g = simulate(SimConfig(**kw, algo="grpo"))
    c = simulate(SimConfig(**kw, algo="cispo"))
    assert not np.array_equal(g.q_pos.to_numpy(), c.q_pos.to_numpy())


def test_output_columns_and_counts():
    cfg = SimConfig(**SMALL, subsets={"rare": "1", "wrong": "2..5"}, pass_k=[1, 4])
    df = simulate(cfg)
    for col in [
        "run", "prompt", "seed_index", "step", "q_pos", "m_ret", "entropy", "mass_rare",
        "mass_wrong", "pass_at_1", "pass_at_4", "groups", "active_frac", "tail_miss_rare",
        "tail_miss_wrong", "resamples", "N", "gamma", "algo", "config_hash", "backend",
    ]:  # fmt: skip
        assert col in df.columns, col
    assert len(df) == cfg.n_runs * len(cfg.log_schedule())
    first = df[df.step == 0]
    q0 = (np.exp(0.5) + np.exp(0.2)) / (np.exp(0.5) + np.exp(0.2) + 4)
    np.testing.assert_allclose(first.q_pos, q0, rtol=1e-14)
    assert (first.groups == 0).all() and first.active_frac.isna().all()
    later = df[df.step > 0]
    assert (later.groups == 5).all()  # log_every = 5
    np.testing.assert_allclose(later.pass_at_1, later.q_pos, rtol=1e-15)
    np.testing.assert_allclose(later.pass_at_4, 1 - (1 - later.q_pos) ** 4, rtol=1e-12)
    np.testing.assert_allclose(df.mass_wrong, 1 - df.q_pos, rtol=1e-12)
    assert ((df.m_ret <= 1) & (df.m_ret >= 0)).all()
    assert (later.tail_miss_wrong <= later.groups).all()


def test_prompts_times_seeds():
    df = simulate(SimConfig(**{**SMALL, "seeds": 3}, prompts=2))
    assert sorted(set(zip(df.prompt, df.seed_index, strict=True))) == [
        (p, s) for p in range(2) for s in range(3)
    ]


@pytest.mark.parametrize(
    "kw",
    [
        # dense: Adam, 3 inner updates with clipping, dynamic sampling, subsets, pass@k
        dict(K=40, correct=3, N=6, steps=23, algo="dapo", optimizer="adamw", lr=0.1,
             weight_decay=0.01, inner_updates=3, dynamic_sampling="dapo", subsets={"a": "0..2"},
             pass_k=[1, 4], log_every=5, seeds=3, backend="dense"),
        # dense sorted sampler, CISPO, linear surrogate
        dict(K=50, correct="0..4", N=8, steps=19, algo="cispo", rule="linear",
             optimizer="adam", lr=0.05, inner_updates=2, gamma=1.0, log_steps=[0, 4, 11, 19],
             seeds=2, backend="dense", sampler="sorted"),
        # sum tree with a rebuild every 3 steps and the tabulated exp(dz)
        dict(K=6, N=8, steps=29, seeds=4, log_every=4, backend="sumtree", renorm_every=3,
             dynamic_sampling="dapo", subsets={"t": "1..2"}, advantage="dr-grpo", lr=0.5),
    ],
)  # fmt: skip
def test_chunked_runs_are_bit_identical(kw):
    """Chunks of steps carry the whole state: any chunk length (boundaries inside log intervals,
    at logged steps, one step) gives the same numbers as one kernel call, on 1 and 2 threads."""
    cfg = SimConfig(**kw)
    ref = simulate(cfg, threads=1, chunk_steps=cfg.steps)
    for chunk, threads in [(1, 1), (3, 2), (4, 1), (7, 2), (cfg.steps - 1, 1)]:
        df = simulate(cfg, threads=threads, chunk_steps=chunk)
        pd.testing.assert_frame_equal(df, ref, check_exact=True)
    ticks = []
    simulate(cfg, chunk_steps=5, progress=lambda d, t: ticks.append((d, t)))
    R = cfg.n_runs
    assert len(ticks) == -(-cfg.steps // 5) and ticks[-1] == (R, R)
    assert [d for d, _ in ticks] == sorted(d for d, _ in ticks)


def test_chunks_shrink_to_the_measured_rate_on_a_slow_machine(monkeypatch):
    """The planned chunk is an estimate: on a machine four times slower than planned, every
    kernel call took 2 s, and Ctrl-C (acted on between calls) waited that long. The kernel is
    replaced by a sleep of that speed (a hand case; no number is computed): after the first
    call the chunks take about CHUNK_SECONDS, and the steps still run in order, none skipped
    or repeated. (The real kernels' numbers do not depend on chunks:
    test_chunked_runs_are_bit_identical.)"""
    import time

    from fgrpo_theory.sim import runner
    from fgrpo_theory.sim.budget import CHUNK_SECONDS, plan_chunks

    cfg = SimConfig(K=6, N=8, steps=200_000_000, seeds=2, log_every=100_000_000)
    _, planned = plan_chunks(cfg, 1)
    per_step = 4 * CHUNK_SECONDS / planned
    calls = []

    def slow(rec, st, s_lo, s_hi, *rest):
        t0 = time.perf_counter()
        time.sleep((s_hi - s_lo) * per_step)
        calls.append((s_lo, s_hi, time.perf_counter() - t0))
        if len(calls) == 4:
            raise KeyboardInterrupt

    monkeypatch.setattr(runner, "_run_chunk", slow)
    with pytest.raises(KeyboardInterrupt):
        simulate(cfg, threads=1)
    assert calls[0][1] - calls[0][0] == planned
    assert [c[0] for c in calls[1:]] == [c[1] for c in calls[:-1]]  # contiguous steps
    for _, _, took in calls[1:]:
        assert took < 2 * CHUNK_SECONDS, calls  # 4 x CHUNK_SECONDS before
