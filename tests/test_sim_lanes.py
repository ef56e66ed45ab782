"""The small-K dense path with runs in SIMD lanes (fgrpo_theory.sim.klanes) against the general
run loop (fgrpo_theory.sim.kernels.run_steps), bit for bit.

The lanes kernel advances a tile of runs side by side with the same operations per run as the
one-run loops, so every logged number must be identical, not close. The general loop is checked
against independent oracles elsewhere (test_sim_reference, test_sim_stats); this file checks that
the vectorized layout is the same computation, over configs that exercise each branch it has
(SGD, Adam, AdamW, odd and even K, surrogates, clipping, CISPO, dynamic sampling with redraws,
subsets and their tail counts, focal weights, a partial tile, chunked steps, two threads).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fgrpo_theory.sim import SimConfig, kexp, klanes, runner, simulate
from fgrpo_theory.sim.ksmall import TARGET_FMA, small_eligible

# the lanes kernel is taken where the small loop is (an FMA target) and the replica of libm's exp
# matches this machine's (kexp's self-check; tests/test_kexp.py requires it on glibc x86-64 FMA)
needs_fma = pytest.mark.skipif(
    not (TARGET_FMA and kexp.exp_lane_matches_libm()),
    reason="Numba's target CPU has no FMA, or libm's exp is not the one kexp replicates",
)

CONFIGS = [
    dict(K=6, optimizer="sgd", lr=0.1),
    dict(K=6, optimizer="adam", lr=0.05),
    dict(K=5, optimizer="adam", lr=0.05),  # odd K: the first element divides
    dict(K=7, optimizer="adamw", lr=0.05, weight_decay=0.1),
    dict(K=2, optimizer="adam", lr=0.2, N=4, correct=1),
    dict(K=3, optimizer="sgd", lr=0.5, weight_decay=0.05),
    dict(K=16, optimizer="sgd", lr=0.3, N=32),
    dict(K=6, rule="linear", lr=0.5, advantage="dr-grpo", r_incorrect=-1.0),
    dict(K=6, optimizer="adam", lr=0.05, scheme="trl+focal:gamma=1"),
    dict(K=6, algo="cispo", lr=0.2, optimizer="adam"),
    dict(K=7, dynamic_sampling="dapo", lr=0.2, optimizer="adam", correct=3),
    dict(K=6, dynamic_sampling="dapo", lr=0.3, correct=1, subsets={"rare": "1..3"}),
    dict(K=6, lr=0.3, subsets={"rare": "1..3", "one": "2"}, optimizer="adamw"),
    dict(K=6, lr=0.1, optimizer="adam", beta1=0.5, beta2=0.9, adam_eps=1e-3),
    dict(K=4, lr=0.2, optimizer="sgd", seeds=130),  # two full tiles and a partial one
]


def _config(kw: dict) -> SimConfig:
    base = dict(N=8, steps=100, seeds=40, correct=2, log_every=7, backend="dense", seed=5)
    base.update(kw)
    base.setdefault("logits", f"1.0x1,0.0x{base['K'] - 1}")
    return SimConfig(**base)


def _general(cfg: SimConfig, monkeypatch, **kw) -> pd.DataFrame:
    monkeypatch.setattr(runner, "SMALL_PATH", False)
    out = simulate(cfg, threads=1, **kw)
    monkeypatch.setattr(runner, "SMALL_PATH", True)
    return out


@needs_fma
@pytest.mark.parametrize("kw", CONFIGS, ids=[str(i) for i in range(len(CONFIGS))])
def test_lanes_are_bit_identical_to_the_general_loop(kw, monkeypatch):
    cfg = _config(kw)
    rec = runner.build_records(cfg, runner.prepare(cfg))
    z = np.zeros((cfg.seeds, cfg.K))
    assert small_eligible(rec, z) and klanes.lanes_eligible(rec, z)
    calls = []
    monkeypatch.setattr(klanes, "run_lanes", _counting(klanes.run_lanes, calls))
    lanes = simulate(cfg, threads=1)
    assert calls, "the lanes kernel was not taken"
    pd.testing.assert_frame_equal(_general(cfg, monkeypatch), lanes, check_exact=True)
    assert lanes["q_pos"].nunique() > 10  # the runs moved
    if cfg.dynamic_sampling != "off":
        assert lanes["resamples"].sum() > 0  # redraws happened


def _counting(fn, calls):
    def wrapped(*args):
        calls.append(1)
        return fn(*args)

    return wrapped


@needs_fma
def test_chunks_and_threads_do_not_change_the_lanes(monkeypatch):
    cfg = _config(dict(K=6, optimizer="adam", lr=0.05, steps=90, seeds=70))
    calls = []
    monkeypatch.setattr(klanes, "run_lanes", _counting(klanes.run_lanes, calls))
    general = _general(cfg, monkeypatch, chunk_steps=13)
    assert not calls
    pd.testing.assert_frame_equal(general, simulate(cfg, threads=1, chunk_steps=13),
                                  check_exact=True)  # fmt: skip
    pd.testing.assert_frame_equal(general, simulate(cfg, threads=2), check_exact=True)
    assert len(calls) >= 7 + 2  # 7 chunks on one thread, then a block per thread


def test_adam_above_the_scalar_loop_is_not_taken():
    cfg = _config(dict(K=9, optimizer="adam", lr=0.05))
    rec = runner.build_records(cfg, runner.prepare(cfg))
    assert not klanes.lanes_eligible(rec, np.zeros((cfg.seeds, cfg.K)))


@needs_fma
@pytest.mark.parametrize(
    "kw",
    [  # exp(z - max z) underflows to 0 for some actions (ties in the CDF)
        dict(logits="0.0x3,-800.0x3", lr=0.5, rule="linear", advantage="dr-grpo",
             r_incorrect=-1.0),
        dict(logits="-800.0x1,0.0x5", lr=0.3, rule="linear"),
        dict(logits="5.0x1,-800.0x4,0.0x1", lr=0.3, optimizer="adam"),
    ],
    ids=["top", "first", "middle"],
)  # fmt: skip
def test_zero_weights_in_lanes(kw, monkeypatch):
    from fgrpo_theory import _validate

    # the metrics of a zero-probability action are not finite (M_ret divides by p0): the
    # simulator refuses such a run after the kernel; here the kernels' logs are compared whole
    monkeypatch.setattr(_validate, "fail", lambda *a, **k: None)
    cfg = _config(dict(K=6, **kw))
    calls = []
    monkeypatch.setattr(klanes, "run_lanes", _counting(klanes.run_lanes, calls))
    lanes = simulate(cfg, threads=1)
    assert calls
    general = _general(cfg, monkeypatch)
    assert general.equals(lanes)  # NaN where NaN
    assert lanes["q_pos"].nunique() > 10


def test_draws_on_zero_weights_move_down_as_nonzero_below_moves_them():
    """_draw_lanes against a hand oracle: each draw t = u S lands on #{i < K-1: cum_i <= t}, then
    on the nearest action below with positive weight (kcore._nonzero_below), counted per lane.
    ``S`` is set above the CDF's total so that draws reach zero-weight actions at the top
    (with the real total they cannot), and action 0 has zero weight in one lane."""
    from fgrpo_theory.sim.rng import uniform_at

    K, L, N = 5, 3, 64
    e = np.array([[1.0, 0.0, 2.0], [0.0, 3.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 1.0],
                  [0.0, 0.0, 0.0]])  # fmt: skip
    cum = np.cumsum(e, axis=0)
    S = cum[-1] * 2.0
    correct = np.array([1, 0, 1, 0, 0], np.uint8)
    key = np.array([11, 22, 33], np.uint64)
    ctr = np.array([5, 0, 9], np.uint64)
    start = ctr.copy()
    cnt = np.zeros((K, L), np.int64)
    X = np.zeros(L, np.int64)
    klanes._draw_lanes(e, cum, S, correct, N, key, ctr, np.zeros(L, np.uint64),
                       np.ones(L, np.bool_), np.zeros((K, L), np.int64), cnt, X,
                       np.empty(L))  # fmt: skip
    moved = 0
    for lane in range(L):
        want = np.zeros(K, np.int64)
        for j in range(N):
            t = uniform_at(key[lane], start[lane] + np.uint64(j + 1)) * S[lane]
            k = int(sum(cum[i, lane] <= t for i in range(K - 1)))
            moved += e[k, lane] == 0.0
            while e[k, lane] == 0.0 and k > 0:
                k -= 1
            want[k] += 1
        assert np.array_equal(cnt[:, lane], want), lane
        assert X[lane] == int(want @ correct)
        assert ctr[lane] == start[lane] + N
    assert moved > N  # about half the draws landed on a zero weight and were moved
    assert cnt[4].sum() == 0 and cnt[3, 0] == 0 and cnt[1, 0] == 0  # zero weights: no draw
    assert cnt[0, 1] == 0  # lane 1: action 0 has zero weight (cum_0 = 0 <= t: never drawn)
