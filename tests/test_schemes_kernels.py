"""Likelihood-aware schemes (unlikeliness, ds) and the regularizers (entropy, kl exact / k3) in
both simulators' kernels, against independent NumPy steps written from the formulas (issue 21
item 3): the groups are reproduced from the run's random stream (the i.i.d. sampler's inverse
CDF of the same uniforms), everything else (ranks, advantages, ratios, clipping, regularizer
gradients, SGD / Adam / AdamW) is computed here from the definitions."""

from __future__ import annotations

import numpy as np
import pytest

from fgrpo_theory.population import PopulationConfig, simulate_population
from fgrpo_theory.population.generate import Population
from fgrpo_theory.schemes import parse_scheme
from fgrpo_theory.sim import SimConfig, simulate
from fgrpo_theory.sim.keys import run_keys
from fgrpo_theory.sim.rng import uniform_at

LOGITS = "0.5x1,0.0x2,-0.3x1,0.2x1,-1.0x1"  # actions 1 and 2 tie: equal log-probabilities
Z0 = np.array([0.5, 0.0, 0.0, -0.3, 0.2, -1.0])
CORRECT = np.array([1, 0, 1, 0, 0, 1], dtype=bool)
N = 8


# ---- independent reference ----------------------------------------------------------------
def _log_softmax(z):
    s = z - z.max()
    return s - np.log(np.exp(s).sum())


def _draws(z, key, n):
    """The i.i.d. sampler's draws for K <= 16: action = #(CDF entries <= u * total)."""
    e = np.exp(z - z.max())
    cum = np.cumsum(e)
    u = np.array([uniform_at(np.uint64(key), np.uint64(i + 1)) for i in range(n)])
    return np.array([(cum[:-1] <= t).sum() for t in u * cum[-1]])


def _ref_advantages(spec, c, L):
    sch = parse_scheme(spec)
    kw = sch.base.kw
    n = len(c)
    X = int(c.sum())
    r = c.astype(float)
    if sch.base.name == "unlikeliness":
        if X in (0, n):
            A = np.zeros(n)
        else:
            q = np.array([(L < L[i]).sum() + ((L == L[i]).sum() - 1) / 2 for i in range(n)])
            m = np.where(c, 1.0 - kw["penalty"] * q / n, 0.0)
            A = (m - m.mean()) / (m.std(ddof=1) + 1e-6)
    elif sch.base.name == "ds":
        A = (r - r.mean()) / (r.std() + 1e-6) - kw["gamma_p"] * r * L + kw["gamma_n"] * (1 - r) * L
    else:  # grpo, population std, eps = 0, rewards 1 / -1 (the simulators' defaults)
        R = np.where(c, 1.0, -1.0)
        A = np.zeros(n) if R.std() == 0 else (R - R.mean()) / R.std()
    return A * (1.0 - X / n) ** sch.gamma


def _ref_train(spec, z0, correct, draws, opt, lr, wd, inner, clip, scale, n_params=1):
    """``inner`` optimizer steps on one group (log-prob surrogate, PPO clip), ``scale`` = N."""
    sch = parse_scheme(spec)
    ent = sch.regularizer("entropy")
    kl = sch.regularizer("kl")
    lq = _log_softmax(z0)
    p_old = np.exp(lq)
    A = _ref_advantages(spec, correct[draws], lq[draws])
    z = z0.copy()
    m = np.zeros_like(z)
    v = np.zeros_like(z)
    for t in range(1, inner + 1):
        lp = _log_softmax(z)
        p = np.exp(lp)
        r = p[draws] / p_old[draws]
        clipped = ((A > 0) & (r > 1 + clip)) | ((A < 0) & (r < 1 - clip))
        w = np.where(clipped, 0.0, r)
        coef = A * w
        if kl is not None and kl["estimator"] == "k3":
            coef = coef + kl["coef"] * (np.exp(lq[draws] - lp[draws]) - 1.0)
        g = np.zeros_like(z)
        np.add.at(g, draws, coef)
        g = (g - p * coef.sum()) / scale
        if ent is not None:
            H = -(p * lp).sum()
            g += ent["coef"] * (-p * (lp + H))
        if kl is not None and kl["estimator"] == "exact":
            KLv = (p * (lp - lq)).sum()
            g -= kl["coef"] * p * (lp - lq - KLv)
        if opt == "sgd":
            z = z + n_params * lr * g
            continue
        gl = -g + (wd * z if opt == "adam" else 0.0)
        m = 0.9 * m + 0.1 * gl
        v = 0.999 * v + 0.001 * gl * gl
        step = lr / (1 - 0.9**t) * m / (np.sqrt(v) / np.sqrt(1 - 0.999**t) + 1e-8)
        z = (z * (1 - lr * wd) if opt == "adamw" else z) - n_params * step
    return z


# ---- the kernels --------------------------------------------------------------------------
def _sim_logits(cfg):
    from fgrpo_theory.sim.kernels import n_metrics
    from fgrpo_theory.sim.records import new_state
    from fgrpo_theory.sim.runner import _run_chunk, build_records, prepare

    a = prepare(cfg)
    rec = build_records(cfg, a)
    st = new_state(rec["prob"], rec["log"], rec["opt"], run_keys(cfg.seed, 1), False)
    out = np.zeros((1, len(a["log_steps"]), n_metrics(0)))
    _run_chunk(rec, st, 0, cfg.steps, out)
    return st.z[0]


SCHEMES = [
    "unlikeliness",
    "unlikeliness:penalty=0.9+focal:gamma=1",
    "ds:gamma_p=0.1,gamma_n=0.2",
    "grpo+entropy:coef=0.05",
    "grpo+kl:coef=0.1",
    "grpo+kl:coef=0.1,estimator=k3",
    "ds+entropy:coef=0.02+kl:coef=0.05,estimator=k3",
]


def _sim_cfg(spec, opt, **kw):
    base = dict(
        K=6, logits=LOGITS, correct="0,2,5", N=N, steps=1, scheme=spec, optimizer=opt,
        lr=0.3, weight_decay=0.01 if opt != "sgd" else 0.0, sampler="iid", backend="dense",
        seed=3, log_every=1,
    )  # fmt: skip
    base.update(kw)
    return SimConfig(**base)


@pytest.mark.parametrize("opt", ["sgd", "adam", "adamw"])
@pytest.mark.parametrize("spec", SCHEMES)
def test_sim_one_step(spec, opt):
    cfg = _sim_cfg(spec, opt)
    draws = _draws(Z0, run_keys(cfg.seed, 1)[0], N)
    assert len(set(draws)) < N  # repeated actions: tied rollouts
    ref = _ref_train(spec, Z0, CORRECT, draws, opt, cfg.lr, cfg.weight_decay, 1, 0.2, N)
    np.testing.assert_allclose(_sim_logits(cfg), ref, rtol=0, atol=1e-9)
    assert not np.allclose(ref, Z0)


@pytest.mark.parametrize("opt", ["sgd", "adam"])
@pytest.mark.parametrize("spec", ["unlikeliness+kl:coef=0.2,estimator=k3", "ds+entropy:coef=0.1"])
def test_sim_inner_updates_with_clipping(spec, opt):
    lr = 3.0 if opt == "sgd" else 0.5
    cfg = _sim_cfg(spec, opt, lr=lr, inner_updates=4, weight_decay=0.0)
    draws = _draws(Z0, run_keys(cfg.seed, 1)[0], N)
    ref = _ref_train(spec, Z0, CORRECT, draws, opt, lr, 0.0, 4, 0.2, N)
    np.testing.assert_allclose(_sim_logits(cfg), ref, rtol=0, atol=1e-9)
    # the clip was active at some inner update (else this would not test it)
    no_clip = _ref_train(spec, Z0, CORRECT, draws, opt, lr, 0.0, 4, 1e9, N)
    assert not np.allclose(no_clip, ref, atol=1e-6)


def test_unlikeliness_worked_example_and_ties():
    """schemes_spec.md section 1: N = 4, r = [1,0,1,1], L = [-0.1,-0.5,-0.3,-0.9]."""
    s = parse_scheme("unlikeliness")
    r = np.array([[1.0, 0.0, 1.0, 1.0]])
    A = s.advantages(r, logprobs=np.array([[-0.1, -0.5, -0.3, -0.9]]))
    np.testing.assert_allclose(A[0], [0.3093, -1.4778, 0.4468, 0.7217], atol=5e-5)
    # ties: average rank (0.5 each for the two least likely, correct ones): m = 1 - 0.25*0.5/4
    A = s.advantages(np.array([[1.0, 1.0, 0.0]]), logprobs=np.array([[-2.0, -2.0, -0.1]]))
    m = np.array([1 - 0.25 * 0.5 / 3, 1 - 0.25 * 0.5 / 3, 0.0])
    np.testing.assert_allclose(A[0], (m - m.mean()) / (m.std(ddof=1) + 1e-6), rtol=1e-12)
    assert np.all(s.advantages(np.ones((1, 4)), logprobs=-np.ones((1, 4))) == 0)


def test_ds_hand_case():
    s = parse_scheme("ds:gamma_p=0.1,gamma_n=0.2")
    A = s.advantages(np.array([[1.0, 0.0]]), logprobs=np.array([[-2.0, -1.0]]))
    # mean 0.5, population std 0.5: (+-0.5)/(0.5 + 1e-6), then -0.1 (-2) and +0.2 (-1)
    np.testing.assert_allclose(A[0], [0.5 / 0.500001 + 0.2, -0.5 / 0.500001 - 0.2], rtol=1e-12)
    # all correct: only the DS term
    A = s.advantages(np.ones((1, 2)), logprobs=np.array([[-2.0, -1.0]]))
    np.testing.assert_allclose(A[0], [0.2, 0.1], rtol=1e-12)


# ---- population model ---------------------------------------------------------------------
def _tiny_population():
    K = Z0.shape[0]
    phi0 = Z0[None, :].copy()
    return Population(
        correct=CORRECT[None, :].astype(np.uint8), rare=np.zeros((1, K), np.uint8), phi0=phi0,
        theta0=np.zeros(K), mu0=np.array([0.5]), breadth=np.full(K, np.nan), n_train=1,
        dropped=0,
    )  # fmt: skip


@pytest.mark.parametrize(
    "spec,opt,inner",
    [
        ("unlikeliness", "adam", 1),
        ("ds:gamma_p=0.1,gamma_n=0.2", "sgd", 1),
        ("grpo+entropy:coef=0.05", "adamw", 1),
        ("grpo+kl:coef=0.1", "adam", 1),
        ("unlikeliness+kl:coef=0.2,estimator=k3", "sgd", 3),
    ],
)
def test_population_one_step(spec, opt, inner):
    """One train prompt, B = 1: theta and phi get the same gradient, so the prompt's logits
    move by twice one parameter's step; the logged mu and entropy are exact functions of them."""
    lr = 0.3 if opt == "sgd" else 0.05
    wd = 0.01 if opt == "adamw" else 0.0
    cfg = PopulationConfig(
        P=1, P_test=0, K=6, B=1, N=N, steps=1, seeds=1, seed=5, log_every=1, scheme=spec,
        optimizer=opt, lr_shared=lr, lr_prompt=lr, weight_decay=wd, inner_updates=inner,
        pass_k=(1,),
    )  # fmt: skip
    df = simulate_population(cfg, population=_tiny_population(), per_prompt=True)
    key = run_keys(cfg.seed, 1)[0]
    draws = _draws(Z0, key, N)
    # theta starts at 0 and phi at Z0 with the same gradient: AdamW decays each separately
    if opt == "adamw":
        th = _ref_train(spec, Z0, CORRECT, draws, opt, lr, wd, inner, 0.2, N) - Z0
        z1 = Z0 + th  # phi's move (decay of Z0 included) ...
        th0 = th + lr * wd * Z0  # ... and theta's (no decay at theta = 0 in step 1)
        z1 = z1 + th0
    else:
        z1 = _ref_train(spec, Z0, CORRECT, draws, opt, lr, wd, inner, 0.2, N, n_params=2)
    lp = _log_softmax(z1)
    row = df[df.step == 1].iloc[0]
    # rtol 1e-9: unlikeliness advantages sum to 0 exactly by definition, and the kernel's
    # centred C makes an unsampled logit's gradient exactly 0 where this reference leaves a
    # ~1e-18 residue, which Adam normalizes into moves of lr * 1e-10 (measured 1.4e-11 here)
    np.testing.assert_allclose(row["mu"], np.exp(lp)[CORRECT].sum(), rtol=1e-9)
    np.testing.assert_allclose(row["entropy"], -(np.exp(lp) * lp).sum(), rtol=1e-9)
    assert abs(row["mu"] - np.exp(_log_softmax(Z0))[CORRECT].sum()) > 1e-4  # it moved


# ---- threads, bad input -------------------------------------------------------------------
def test_threads_identical():
    cfg = SimConfig(
        K=300, N=8, steps=20, seeds=4, scheme="unlikeliness+kl:coef=0.01,estimator=k3",
        optimizer="adam", lr=0.02, inner_updates=2, log_every=5,
    )  # fmt: skip
    a = simulate(cfg, threads=1)
    b = simulate(cfg, threads=2)
    assert a.equals(b)
    pc = PopulationConfig(
        P=8, P_test=2, K=16, B=2, steps=10, seeds=3, log_every=5, scheme="ds+entropy:coef=0.01"
    )
    pa = simulate_population(pc, threads=1, per_prompt=True)
    pb = simulate_population(pc, threads=2, per_prompt=True)
    assert pa.equals(pb)


@pytest.mark.parametrize(
    "kw,words",
    [
        (dict(scheme="ds", precision="float32"), "precision"),
        (dict(scheme="grpo+entropy", backend="sumtree"), "backend"),
        (dict(scheme="unlikeliness:penalty=2"), "scheme unlikeliness:penalty"),
        (dict(scheme="ds:gamma_p=-1"), "scheme ds:gamma_p"),
    ],
)
def test_bad_input_one_line(kw, words):
    with pytest.raises(ValueError) as e:
        SimConfig(**kw)
    msg = str(e.value)
    assert words in msg and "\n" not in msg
