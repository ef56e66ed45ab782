"""Population kernel against the single-prompt simulator (bit for bit) and a NumPy reference.

With theta frozen and B = P = 1 a population is the single-prompt simulator: the same random
streams, the same arithmetic, now with inner updates, PPO / DAPO clipping, the dual clip and
CISPO's clipped weights at step sizes where the clips act (each case also checks that the run
differs from the same run with the clips wide open, so the comparison cannot pass vacuously).
With several prompts, shared theta and inner updates, the kernel is checked against an
independent NumPy transcription of the update (same random words, tolerance 1e-9).
"""

from __future__ import annotations

import numpy as np
import pytest

from fgrpo_theory.population import (
    Population,
    PopulationConfig,
    generate_population,
    simulate_population,
)
from fgrpo_theory.sim import SimConfig, simulate
from fgrpo_theory.sim.config import parse_index_set, parse_logits
from fgrpo_theory.sim.keys import GOLDEN_INT, mix64_py, run_keys, stream_words

WIDE = dict(clip_low=1.0, clip_high=100.0)  # ratios never reach these bounds here


def _single(z0: np.ndarray, correct: np.ndarray) -> Population:
    return Population(
        correct=correct[None].astype(np.uint8),
        rare=np.zeros((1, len(z0)), np.uint8),
        phi0=z0[None].astype(float),
        theta0=np.zeros(len(z0)),
        mu0=np.array([0.5]),
        breadth=np.full(len(z0), np.nan),
        n_train=1,
        dropped=0,
    )


def _pair(K, logits, correct, **kw):
    """(SimConfig, PopulationConfig, Population) of one prompt with the same fields ``kw``."""
    lr = kw.pop("lr")
    sc = SimConfig(K=K, logits=logits, correct=correct, backend="dense", sampler="iid", lr=lr, **kw)
    pc = PopulationConfig(P=1, P_test=0, K=K, B=1, lr_shared=0.0, lr_prompt=lr, **kw)
    z0 = parse_logits(logits, K)
    cm = np.zeros(K, np.uint8)
    cm[parse_index_set(correct, K, "correct")] = 1
    return sc, pc, _single(z0, cm)


def _assert_same_as_simulator(sc, pc, pop):
    ref = simulate(sc)
    got = simulate_population(pc, population=pop, per_prompt=True)
    assert np.array_equal(got["step"].to_numpy(), ref["step"].to_numpy())
    # The runs are the same bit for bit (steps, groups, active counts below); the two metric
    # passes sum differently (TwoSum in 256 lanes in the simulator, in 8 lanes here; log1p of
    # S - 1 here: docs/precision.md), so mu and entropy agree to a few ulps, not bit for bit.
    # A different trajectory moves them by far more than 1e-14.
    np.testing.assert_allclose(got["mu"].to_numpy(), ref["q_pos"].to_numpy(), rtol=1e-14, atol=0)
    np.testing.assert_allclose(
        got["entropy"].to_numpy(), ref["entropy"].to_numpy(), rtol=1e-14, atol=1e-15
    )
    assert np.array_equal(got["groups"].to_numpy(), ref["groups"].to_numpy())
    pos = ref["step"].to_numpy() > 0
    act = ref["active_frac"].to_numpy()[pos] * ref["groups"].to_numpy()[pos]
    assert np.array_equal(got["active"].to_numpy()[pos], np.round(act).astype(np.int64))
    return got


def test_stream_equals_simulator_stream():
    from fgrpo_theory.population.kernel import stream_uniforms

    key = int(run_keys(11, 3)[2])
    words = stream_words(key, 1000)
    ref = np.array([(w >> 11) * 2.0**-53 for w in words])
    assert np.array_equal(stream_uniforms(np.uint64(key), 1000), ref)


@pytest.mark.parametrize(
    "K,logits,correct,opt,gamma,adv,N,rule",
    [
        (6, "1.0x2,0.0x4", "0,3", "sgd", 0.0, "grpo", 8, "logprob"),
        (6, "1.0x2,0.0x4", "0,3", "adam", 0.5, "dr-grpo", 4, "logprob"),
        (100, "2.0x3,0.0x97", "0..1,50", "adam", 1.0, "grpo", 16, "logprob"),
        (100, "2.0x3,0.0x97", "0..1,50", "sgd", 0.0, "rloo", 8, "logprob"),
        (40, "1.0x5,0.0x35", "0..2,30", "adamw", 0.0, "dr-grpo", 8, "linear"),
    ],
)
def test_one_prompt_theta_frozen_equals_single_prompt_simulator(
    K, logits, correct, opt, gamma, adv, N, rule
):
    lr = 0.5 if opt == "sgd" else 0.05
    wd = 0.01 if opt == "adamw" else 0.0
    sc, pc, pop = _pair(
        K, logits, correct, N=N, steps=120, rule=rule, advantage=adv, gamma=gamma,
        optimizer=opt, lr=lr, weight_decay=wd, seeds=3, seed=5, log_every=40,
    )  # fmt: skip
    _assert_same_as_simulator(sc, pc, pop)


# One incorrect action (0) holds most of the mass, so it dominates the sampled groups: the
# ratios move by more than the clip bounds within a step, and with the linear rule a rarely
# drawn incorrect action can gain probability (the dual clip's case, A < 0 and r > c).
SETUP = (8, "2.0x1,0.5x3,0.0x4", "1,5")
LR = {("sgd", "logprob"): 1.0, ("sgd", "linear"): 4.0, ("adam", "logprob"): 0.1,
      ("adam", "linear"): 0.1}  # fmt: skip


@pytest.mark.parametrize("opt", ["sgd", "adam"])
@pytest.mark.parametrize("rule", ["linear", "logprob"])
@pytest.mark.parametrize("algo", ["grpo", "dapo", "cispo"])
@pytest.mark.parametrize("inner", [2, 4])
def test_inner_updates_and_clipping_equal_single_prompt_simulator(inner, algo, rule, opt):
    """Inner updates with non-default clip bounds (0.05 / 0.1 for every algorithm), bit for
    bit; one group per step whatever the number of inner updates."""
    kw = dict(N=8, steps=40, rule=rule, advantage="grpo", optimizer=opt, lr=LR[opt, rule],
              seeds=2, seed=3, log_every=20, algo=algo, inner_updates=inner)  # fmt: skip
    sc, pc, pop = _pair(*SETUP, **kw, clip_low=0.05, clip_high=0.1)
    got = _assert_same_as_simulator(sc, pc, pop)
    assert (got.loc[got.step > 0, "groups"] == 20).all()  # sampled groups, not inner updates
    wide = simulate_population(pc.replace(**WIDE), population=pop, per_prompt=True)
    assert not np.array_equal(got["mu"].to_numpy(), wide["mu"].to_numpy())  # the clips acted


@pytest.mark.parametrize(("algo", "opt", "inner"), [("grpo", "sgd", 4), ("dapo", "adam", 2)])
def test_dual_clip_equals_single_prompt_simulator(algo, opt, inner):
    kw = dict(N=8, steps=40, rule="linear", advantage="grpo", optimizer=opt,
              lr=LR[opt, "linear"], seeds=2, seed=3, log_every=20, algo=algo,
              inner_updates=inner, **WIDE)  # fmt: skip
    sc, pc, pop = _pair(*SETUP, **kw, dual_clip=1.05)
    got = _assert_same_as_simulator(sc, pc, pop)
    off = simulate_population(pc.replace(dual_clip=None), population=pop, per_prompt=True)
    assert not np.array_equal(got["mu"].to_numpy(), off["mu"].to_numpy())  # the dual clip acted


@pytest.mark.parametrize(
    "opt,max_res,ds,ds_range",
    [("sgd", 3, True, None), ("adam", 1, "dapo", None), ("sgd", 2, "openrlhf", (0.3, 0.9)),
     ("sgd", 2, "verl", None)],
)  # fmt: skip
def test_dynamic_sampling_one_prompt_equals_single_prompt_simulator(opt, max_res, ds, ds_range):
    """A trainer's filter: with B = P = 1 and theta frozen, the single-prompt simulator's
    trajectory and redraw counts, bit for bit (an easy prompt, so most groups are all-correct).
    The filters share one keep table (``ds_keep_table``); openrlhf's range here drops groups
    with 0, 1 or 4 correct of 4."""
    kw = dict(N=4, steps=90, optimizer=opt, lr=0.5 if opt == "sgd" else 0.05, seeds=3, seed=2,
              log_every=30, advantage="grpo", dynamic_sampling=ds, max_resamples=max_res,
              ds_range=ds_range)  # fmt: skip
    sc, pc, pop = _pair(20, "3.0x2,0.0x18", "0..1", **kw)
    got = _assert_same_as_simulator(sc, pc, pop)
    ref = simulate(sc)
    assert np.array_equal(got["resamples"].to_numpy(), ref["resamples"].to_numpy())
    assert got["resamples"].sum() > 0
    off = simulate_population(pc.replace(dynamic_sampling=False, ds_range=None), population=pop)
    assert (off["resamples"] == 0).all()
    with pytest.raises(ValueError, match="max_resamples must be >= 1"):
        pc.replace(max_resamples=0)


# ---- several prompts, shared theta, inner updates: an independent NumPy transcription --------


class _Stream:
    """Uniforms of the counter-based stream ``mix64(key + i * GOLDEN)`` (sim.keys)."""

    def __init__(self, key: int):
        self.key, self.i = int(key), 0

    def __call__(self) -> float:
        self.i += 1
        return (mix64_py(self.key + self.i * GOLDEN_INT) >> 11) * 2.0**-53


def _reference(cfg: PopulationConfig, pop: Population, key: int) -> np.ndarray:
    """Final softmax of every prompt after ``cfg.steps`` steps, written from the model's
    description: draw the batch (Fisher-Yates per epoch from the order stream) and its groups
    (inverse CDF, K <= 16) under the current policy, then ``inner_updates`` optimizer steps,
    each recomputing the batch's softmax, ratio weights (PPO clip / dual clip / CISPO), the
    gradient (c - p C) / (B N) per prompt and theta's batch sum; SGD, or Adam over all
    parameters with one step per inner update (eagerly, idle prompts included) or per prompt."""
    from fgrpo_theory.population.kernel import ORDER_SALT
    from fgrpo_theory.population.runner import advantage_tables

    adv_c, adv_w, _ = advantage_tables(cfg)
    lo, hi = cfg.clip_bounds()
    dual = np.inf if cfg.dual_clip is None else cfg.dual_clip
    P, B, N, K = pop.n_train, cfg.B, cfg.N, pop.theta0.shape[0]
    theta, phi = pop.theta0.copy(), pop.phi0.copy()
    corr = pop.correct.astype(bool)
    main, order = _Stream(key), _Stream(mix64_py(key ^ int(ORDER_SALT)))
    adam = cfg.optimizer == "adam"
    m_th, v_th, m_ph, v_ph = (np.zeros(K), np.zeros(K), np.zeros((P, K)), np.zeros((P, K)))
    t, tp = 0, np.zeros(P, int)

    def softmax(z):
        e = np.exp(z - z.max())
        return e / e.sum()

    def adam_step(z, g, m, v, t, lr):  # g: gradient of the loss (-J); updates in place
        m[:] = cfg.beta1 * m + (1 - cfg.beta1) * g
        v[:] = cfg.beta2 * v + (1 - cfg.beta2) * g * g
        mh, vh = m / (1 - cfg.beta1**t), v / (1 - cfg.beta2**t)
        z -= lr * mh / (np.sqrt(vh) + cfg.adam_eps)

    perm, pos = list(range(P)), P
    for _ in range(cfg.steps):
        if pos + B > P:
            for i in range(P - 1, 0, -1):
                j = int(order() * (i + 1))
                perm[i], perm[j] = perm[j], perm[i]
            pos = 0
        groups = []
        for p in perm[pos : pos + B]:
            pr = softmax(theta + phi[p])
            cum = np.cumsum(np.exp(theta + phi[p] - (theta + phi[p]).max()))
            n = np.zeros(K)
            for _ in range(N):
                n[int(np.sum(cum[:-1] <= main() * cum[-1]))] += 1
            groups.append((p, n, int(n[corr[p]].sum()), pr))
        for _ in range(cfg.inner_updates):
            t += 1
            g_th, g_ph = np.zeros(K), np.zeros((P, K))
            for p, n, X, pold in groups:
                pr = softmax(theta + phi[p])
                r = pr / pold
                A = np.where(corr[p], adv_c[X], adv_w[X])
                if cfg.algo == "cispo":
                    w = np.clip(r, 1 - lo, 1 + hi)
                else:
                    clipped = ((A > 0) & (r > 1 + hi)) | ((A < 0) & ((r < 1 - lo) | (r > dual)))
                    w = np.where(clipped, 0.0, r if cfg.rule == "logprob" else 1.0)
                if cfg.rule == "linear":
                    w = w * pr
                c = n * A * w
                g_ph[p] = (c - pr * c.sum()) / (B * N)
                g_th += g_ph[p]
            if not adam:
                phi[:P] += cfg.lr_prompt * g_ph
                theta += cfg.lr_shared * g_th
                continue
            for p in range(P):
                if cfg.adam_state == "global":
                    adam_step(phi[p], -g_ph[p], m_ph[p], v_ph[p], t, cfg.lr_prompt)
                elif p in perm[pos : pos + B]:
                    tp[p] += 1
                    adam_step(phi[p], -g_ph[p], m_ph[p], v_ph[p], tp[p], cfg.lr_prompt)
            adam_step(theta, -g_th, m_th, v_th, t, cfg.lr_shared)
        pos += B
    return np.array([softmax(theta + phi[p]) for p in range(phi.shape[0])])


@pytest.mark.parametrize(
    "kw",
    [
        dict(optimizer="sgd", lr_shared=1.0, lr_prompt=1.5, algo="grpo", rule="logprob"),
        dict(optimizer="sgd", lr_shared=4.0, lr_prompt=4.0, algo="dapo", rule="linear",
             dual_clip=1.05),
        dict(optimizer="adam", lr_shared=0.1, lr_prompt=0.1, algo="cispo", rule="logprob"),
        dict(optimizer="adam", lr_shared=0.1, lr_prompt=0.05, algo="grpo", rule="linear",
             adam_state="per-prompt"),
    ],
)  # fmt: skip
def test_shared_theta_inner_updates_against_numpy_reference(kw):
    """P = 5 train + 2 test prompts, B = 2 (epochs of 2 batches, one prompt left over), 3 inner
    updates, clip bounds 0.05 / 0.1: the kernel (global Adam with its lazy replay of idle
    prompts, counted in optimizer steps) equals the eager NumPy reference to 1e-9."""
    cfg = PopulationConfig(
        P=5, P_test=2, K=10, B=2, N=6, steps=9, inner_updates=3, clip_low=0.05, clip_high=0.1,
        seeds=2, seed=4, log_every=9, population_seed=1, breadth=(1.0, 2.0), unsolvable="refuse",
        **kw,
    )  # fmt: skip
    pop = generate_population(cfg)
    assert pop.n_train == 5
    got = simulate_population(cfg, population=pop, per_prompt=True)
    keys = run_keys(cfg.seed, cfg.seeds)
    for run in range(cfg.seeds):
        probs = _reference(cfg, pop, int(keys[run]))
        ref_mu = (probs * pop.correct).sum(axis=1)
        last = got[(got.run == run) & (got.step == cfg.steps)].sort_values("prompt")
        np.testing.assert_allclose(last["mu"].to_numpy(), ref_mu, rtol=1e-9, atol=1e-12)
        first = got[(got.run == run) & (got.step == 0)].sort_values("prompt")
        assert np.abs(last["mu"].to_numpy() - first["mu"].to_numpy())[5:].max() > 1e-3  # theta
    wide = _reference(cfg.replace(**WIDE, dual_clip=None), pop, int(keys[0]))
    assert np.abs(wide - _reference(cfg, pop, int(keys[0]))).max() > 1e-6  # the clips acted
