"""The RL loop of the sequence rung (issue 24 step 4).

Oracles: (1) one step's gradient and SGD update against a hand computation: advantages from the
formula (r - mean r) / std r written out here, the surrogate's log-probabilities from the
prefix-tree walk (the cached path, not the causal forward pass the loop differentiates);
(2) rollout frequencies against the exact answer probabilities within binomial standard errors,
and the frequency of Lemma 3.1's event (active group, no rollout in the rare set) against
``tail_miss_probability`` with the model's own mu and tau.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from fgrpo_theory.schemes import entropy_term, k3_estimate, k3_logp_gradient, kl_term  # noqa: E402
from fgrpo_theory.sequence.exact import _walk_chunk, answer_logprobs  # noqa: E402
from fgrpo_theory.sequence.model import ModelConfig  # noqa: E402
from fgrpo_theory.sequence.rl import (  # noqa: E402
    RLConfig,
    make_optimizer,
    regularizer_loss,
    rl_step,
    sample_answers,
    scheme_advantages,
    surrogate_loss,
    token_logprobs,
)
from fgrpo_theory.sequence.sft import SFTConfig, train_sft  # noqa: E402
from fgrpo_theory.sequence.task import GridTask, answer_index, make_prompts  # noqa: E402
from fgrpo_theory.tail_miss import tail_miss_probability  # noqa: E402

TASK = GridTask(L=4, n_train=12, n_test=4, max_walls=3, min_correct=3, rare_turns=2, seed=1)


@pytest.fixture(autouse=True)
def _one_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


@pytest.fixture(scope="module")
def sft_model():
    with torch.random.fork_rng():
        torch.set_num_threads(1)
        m = train_sft(TASK, ModelConfig(d_model=16, n_layers=2, n_heads=2, seed=4),
                      SFTConfig(steps=40, batch=32, lr=1e-2, teacher_beta=1.0))  # fmt: skip
    return m


def _hand_grpo(r: np.ndarray) -> np.ndarray:
    """(r - mean r) / population std per group, 0 for a flat group (GRPO, P-3)."""
    out = np.zeros_like(r)
    for g in range(len(r)):
        s = r[g].std()
        out[g] = 0.0 if s == 0 else (r[g] - r[g].mean()) / s
    return out


@pytest.mark.parametrize("aggregation", ["token-mean", "sequence-sum"])
def test_one_sgd_step_equals_the_hand_gradient(sft_model, aggregation):
    import copy

    model = copy.deepcopy(sft_model).double()
    p = make_prompts(TASK)
    cfg = RLConfig(B=4, N=6, scheme="grpo", aggregation=aggregation, optimizer="sgd", lr=0.05)
    ids = np.array([0, 3, 5, 8])
    # the hand computation: the same rollouts (same generator seed), advantages by formula, the
    # surrogate from the tree walk's log-probabilities of every answer
    moves, _ = sample_answers(model, torch.from_numpy(p.tokens[ids]), cfg.N, TASK.L,
                              torch.Generator().manual_seed(9))  # fmt: skip
    r = p.rewards(ids, moves.numpy())
    assert ((r.sum(1) > 0) & (r.sum(1) < cfg.N)).any(), "need an active group"
    A = torch.from_numpy(_hand_grpo(r))
    lp_all = _walk_chunk(model, torch.from_numpy(p.tokens[ids]), TASK.L)  # differentiable
    lp = lp_all.gather(1, torch.from_numpy(answer_index(moves.numpy())))
    per = TASK.L if aggregation == "token-mean" else 1
    f = -(A * lp).sum() / (cfg.B * cfg.N * per)
    hand = torch.autograd.grad(f, list(model.parameters()))
    before = [q.detach().clone() for q in model.parameters()]
    st = rl_step(model, make_optimizer(model, cfg), p, ids, cfg, torch.Generator().manual_seed(9))
    np.testing.assert_array_equal(st["rewards"], r)
    for q0, q1, g in zip(before, model.parameters(), hand, strict=True):
        torch.testing.assert_close(q1.detach() - q0, -cfg.lr * g, rtol=1e-7, atol=1e-12)
    assert max(float(g.abs().max()) for g in hand) > 1e-3  # the step is not trivially zero


def test_first_ppo_update_equals_the_logprob_surrogate_gradient(sft_model):
    import copy

    model = copy.deepcopy(sft_model).double()
    p = make_prompts(TASK)
    ptok = torch.from_numpy(p.tokens[:3])
    moves, _ = sample_answers(model, ptok, 5, TASK.L, torch.Generator().manual_seed(2))
    A = scheme_advantages("grpo", torch.from_numpy(p.rewards(np.arange(3), moves.numpy())))
    cfg = RLConfig(inner_updates=4)
    lp = token_logprobs(model, ptok, moves)
    g1 = torch.autograd.grad(surrogate_loss(lp, A, cfg), list(model.parameters()))
    lp = token_logprobs(model, ptok, moves)
    g2 = torch.autograd.grad(surrogate_loss(lp, A, cfg, lp.detach()), list(model.parameters()))
    for a, b in zip(g1, g2, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-15)
    # a ratio beyond the clip range has no gradient through the clipped branch
    lp = token_logprobs(model, ptok, moves)
    far = surrogate_loss(lp, torch.ones_like(A), cfg, lp.detach() - 1.0)  # r = e > 1.2, A > 0
    g3 = torch.autograd.grad(far, list(model.parameters()))
    assert all(float(g.abs().max()) == 0.0 for g in g3)


def test_schemes_of_the_registry_by_hand():
    r = torch.tensor([[1.0, 0, 0, 0], [1, 1, 1, 0], [0, 0, 0, 0]], dtype=torch.float64)
    a0 = scheme_advantages("grpo", r)
    a1 = scheme_advantages("grpo+focal:gamma=1", r)
    g = torch.tensor([0.75, 0.25, 1.0], dtype=torch.float64)[:, None]
    torch.testing.assert_close(a1, a0 * g)
    torch.testing.assert_close(scheme_advantages("focal:gamma=1", r), a1)
    np.testing.assert_allclose(a0[0].numpy(), _hand_grpo(r.numpy())[0])
    # MaxRL (theory.md section 15): A = (r - mean r) / mean r for binary rewards, 0 if no success
    m = scheme_advantages("maxrl", r)
    torch.testing.assert_close(
        m[:2], (r[:2] - r[:2].mean(1, keepdim=True)) / r[:2].mean(1, keepdim=True)
    )
    assert (m[2] == 0).all()


def test_rollout_frequencies_and_lemma_3_1_against_exact_probabilities(sft_model):
    p = make_prompts(TASK)
    ids = np.array([0, 1])
    ptok = torch.from_numpy(p.tokens[ids])
    n_groups, N = 2500, 8
    moves, lp_seq = sample_answers(sft_model, ptok, n_groups * N, TASK.L,
                                   torch.Generator().manual_seed(0))  # fmt: skip
    exact = answer_logprobs(sft_model, ptok, TASK.L).exp().numpy()
    idx = answer_index(moves.numpy())
    np.testing.assert_allclose(lp_seq.numpy(), np.log(exact[np.arange(2)[:, None], idx]),
                               atol=1e-5)  # fmt: skip
    n = n_groups * N
    for g in range(2):
        counts = np.bincount(idx[g], minlength=4**TASK.L)
        se = np.sqrt(n * exact[g] * (1 - exact[g]))
        z = (counts - n * exact[g]) / np.maximum(se, 1e-300)
        assert np.abs(z[n * exact[g] >= 5]).max() < 5.0
        # Lemma 3.1: groups of N consecutive rollouts, active and missing every rare answer
        corr = p.correct[ids[g]][idx[g]].reshape(n_groups, N)
        rare = p.rare[ids[g]][idx[g]].reshape(n_groups, N)
        X = corr.sum(1)
        event = (X > 0) & (X < N) & ~rare.any(1)
        mu = exact[g][p.correct[ids[g]]].sum()
        tau = exact[g][p.rare[ids[g]]].sum()
        pb = tail_miss_probability(N, mu, tau)
        assert 0.02 < pb < 0.98, (mu, tau, pb)
        assert abs(event.mean() - pb) < 5 * np.sqrt(pb * (1 - pb) / n_groups)


def test_same_seed_same_numbers_and_refusals():
    from fgrpo_theory.sequence.run import SequenceConfig, run_sequence

    cfg = SequenceConfig(
        task=TASK, model=ModelConfig(d_model=16, n_layers=1, n_heads=2),
        sft=SFTConfig(steps=10, batch=16), rl=RLConfig(B=3, N=4, steps=4, log_every=2),
    )  # fmt: skip
    a = run_sequence(cfg, cache=False)
    b = run_sequence(cfg, cache=False)
    assert a.equals(b) and list(a["step"]) == [0, 0, 2, 2, 4, 4]
    want = {"pass_at_1", "pass_at_1024", "coverage_at_256", "rare_nll", "rare_nll_rise",
            "entropy", "active_frac", "tail_miss_rate", "config_hash"}  # fmt: skip
    assert want <= set(a.columns)
    with pytest.raises(ValueError, match="B must be <= the number of train prompts"):
        SequenceConfig(task=TASK, rl=RLConfig(B=13))
    with pytest.raises(ValueError, match="N must be such that B x N"):
        RLConfig(B=1000, N=1000)
    with pytest.raises(ValueError, match="scheme must be one of"):
        RLConfig(scheme="foo")
    assert (
        RLConfig(scheme="grpo+kl:coef=0.01,estimator=k3").scheme == "grpo+kl:coef=0.01,estimator=k3"
    )
    assert RLConfig(scheme="focal:gamma=1").scheme == "grpo+focal:gamma=1"
    with pytest.raises(ValueError, match="aggregation must be one of token-mean, sequence-sum"):
        RLConfig(aggregation="mean")


# -- regularizers (issue 24 step 4): values and logit gradients against the registry's NumPy
# closed forms (fgrpo_theory.schemes.regularizers), and a hand case


def test_regularizers_hand_case():
    z = torch.zeros(1, 1, 1, 4, dtype=torch.float64)
    zr = torch.tensor([np.log(2.0), 0, 0, 0], dtype=torch.float64).expand(1, 1, 1, 4)
    mv = torch.zeros(1, 1, 1, dtype=torch.long)  # the sampled move has p = 1/4, q = 2/5
    _, parts = regularizer_loss(z, mv, "grpo+entropy:coef=1+kl:coef=1", "token-mean", zr)
    assert parts["entropy"] == pytest.approx(np.log(4), rel=1e-15)
    assert parts["kl"] == pytest.approx(0.25 * (np.log(5 / 8) + 3 * np.log(5 / 4)), rel=1e-14)
    _, parts = regularizer_loss(z, mv, "grpo+kl:estimator=k3", "token-mean", zr)
    rho = (2 / 5) / (1 / 4)
    assert parts["kl"] == pytest.approx(rho - np.log(rho) - 1, rel=1e-14)
    assert regularizer_loss(z, mv, "grpo", "token-mean")[1] == {}
    with pytest.raises(ValueError, match="ref_model must be the reference policy"):
        regularizer_loss(z, mv, "grpo+kl", "token-mean")


@pytest.mark.parametrize("aggregation", ["token-mean", "sequence-sum"])
@pytest.mark.parametrize("term", ["entropy:coef=0.3", "kl:coef=0.2", "kl:coef=0.2,estimator=k3"])
def test_regularizer_values_and_gradients_against_the_registry(term, aggregation):
    G, N, L = 2, 3, 4
    g = torch.Generator().manual_seed(5)
    z = torch.randn(G, N, L, 4, generator=g, dtype=torch.float64).requires_grad_(True)
    zr = torch.randn(G, N, L, 4, generator=g, dtype=torch.float64)
    mv = torch.randint(0, 4, (G, N, L), generator=g)
    loss, parts = regularizer_loss(z, mv, "grpo+" + term, aggregation, zr)
    (grad,) = torch.autograd.grad(loss, [z])
    zn, zrn, m = z.detach().numpy(), zr.numpy(), mv.numpy()
    denom = G * N * L if aggregation == "token-mean" else G * N
    coef = float(term.split("coef=")[1].split(",")[0])
    if term.startswith("entropy"):
        H, dH = entropy_term(zn)
        value, want = H.sum() / denom, -coef * dH / denom
    elif "k3" in term:
        lp = zn - np.log(np.exp(zn).sum(-1, keepdims=True))
        lq = zrn - np.log(np.exp(zrn).sum(-1, keepdims=True))
        a = np.take_along_axis(lp, m[..., None], -1)[..., 0]
        b = np.take_along_axis(lq, m[..., None], -1)[..., 0]
        value = k3_estimate(a, b).sum() / denom
        dlogp = np.eye(4)[m] - np.exp(lp)  # d log p(a) / dz
        want = coef * k3_logp_gradient(a, b)[..., None] * dlogp / denom
    else:
        K, dK = kl_term(zn, zrn)
        value, want = K.sum() / denom, coef * dK / denom
    name = "entropy" if term.startswith("entropy") else "kl"
    assert parts[name] == pytest.approx(value, rel=1e-12)
    np.testing.assert_allclose(grad.numpy(), want, rtol=1e-10, atol=1e-15)


@pytest.mark.parametrize("spec", ["grpo+entropy:coef=0.01", "grpo+kl:coef=0.1",
                                  "grpo+kl:coef=0.1,estimator=k3"])  # fmt: skip
def test_rl_step_with_regularizers(sft_model, spec):
    import copy

    model = copy.deepcopy(sft_model).double()
    ref = copy.deepcopy(model)
    p = make_prompts(TASK)
    ids = np.array([0, 3, 5, 8])
    cfg = RLConfig(B=4, N=6, scheme=spec, optimizer="sgd", lr=0.5)
    opt = make_optimizer(model, cfg)
    st = rl_step(model, opt, p, ids, cfg, torch.Generator().manual_seed(9), ref_model=ref)
    if "entropy" in spec:  # the mean entropy of the sampled positions: between 0 and log 4
        assert 0 < st["entropy"] < np.log(4)
    else:  # the policy is its reference: both KL terms are exactly 0
        assert st["kl"] == 0.0
        st = rl_step(model, opt, p, ids, cfg, torch.Generator().manual_seed(9), ref_model=ref)
        assert st["kl"] > 0  # one step later they are not
        with pytest.raises(ValueError, match="ref_model must be the reference policy"):
            rl_step(model, opt, p, ids, cfg, torch.Generator().manual_seed(9))


def test_likelihood_schemes_get_the_sequence_logprobs(sft_model):
    """DS-GRPO's advantages in the loop against the formula with the exact log-probabilities
    of the tree walk: A = (r - mean r) / (std r + 1e-6) - g_p c L + g_n (1 - c) L."""
    p = make_prompts(TASK)
    ids = np.array([0, 3, 5])
    cfg = RLConfig(B=3, N=6, scheme="ds:gamma_p=0.1,gamma_n=0.2", optimizer="sgd", lr=0.0)
    seen = {}

    def grab(moves, rewards, adv):
        seen.update(moves=moves.numpy(), r=rewards, adv=adv.numpy())

    model = sft_model
    rl_step(model, make_optimizer(model, cfg), p, ids, cfg, torch.Generator().manual_seed(3),
            before_update=grab)  # fmt: skip
    exact = answer_logprobs(model, torch.from_numpy(p.tokens[ids]), TASK.L).numpy()
    Ls = exact[np.arange(3)[:, None], answer_index(seen["moves"])]
    r = seen["r"]
    want = (r - r.mean(1, keepdims=True)) / (r.std(1, keepdims=True) + 1e-6)
    want = want - 0.1 * r * Ls + 0.2 * (1 - r) * Ls
    np.testing.assert_allclose(seen["adv"], want, rtol=1e-5, atol=1e-5)
    # unlikeliness runs too (ranks of the same log-probabilities)
    cfg = RLConfig(B=3, N=6, scheme="unlikeliness", optimizer="sgd", lr=0.0)
    rl_step(model, make_optimizer(model, cfg), p, ids, cfg, torch.Generator().manual_seed(3))


def test_same_seed_same_numbers_at_two_threads():
    """The same seed and thread count give identical numbers at 2 threads too (SFT, rollouts,
    updates and the exact evaluation, under torch_settings' deterministic algorithms)."""
    from fgrpo_theory.sequence.run import SequenceConfig, run_sequence

    cfg = SequenceConfig(
        task=TASK, model=ModelConfig(d_model=32, n_layers=2, n_heads=2),
        sft=SFTConfig(steps=10, batch=32), rl=RLConfig(B=4, N=8, steps=3, log_every=3),
        threads=2,
    )  # fmt: skip
    a = run_sequence(cfg, cache=False)
    b = run_sequence(cfg, cache=False)
    assert a.equals(b) and torch.get_num_threads() == 1  # restored


def _far_model(seed=3, n_layers=2):
    """A float64 model whose policy is far from flat (scaled-up weights)."""
    from fgrpo_theory.sequence.model import build_model

    m = build_model(ModelConfig(d_model=16, n_layers=n_layers, n_heads=2, seed=seed), TASK.vocab,
                    TASK.prompt_len + TASK.L)  # fmt: skip
    with torch.no_grad():
        for q in m.parameters():
            q.mul_(20.0) if q.ndim > 1 else None
    return m.double()


@pytest.mark.parametrize(
    ("max_pack", "n_layers"), [(32, 2), (4, 2), (1, 2), (32, 1)]
)  # N = 6: one pack, packs of 3, of 1; a one-block model (its only block is the last)
def test_packed_training_pass_equals_the_causal_forward_pass(monkeypatch, max_pack, n_layers):
    """The loop's pass over packed groups (each prompt once, then its N answers; or N / c packs
    of c answers; the last block at the used positions only) against the plain causal forward
    pass over every prompt + answer sequence, values and gradients."""
    from fgrpo_theory.sequence import model as model_module
    from fgrpo_theory.sequence.rl import token_logits

    monkeypatch.setattr(model_module, "MAX_PACK", max_pack)
    m = _far_model(n_layers=n_layers)
    p = make_prompts(TASK)
    ptok = torch.from_numpy(p.tokens[[0, 2, 5]])
    moves = torch.randint(0, 4, (3, 6, TASK.L), generator=torch.Generator().manual_seed(1))
    seq = torch.cat([ptok.repeat_interleave(6, 0), moves.reshape(18, TASK.L)[:, :-1]], dim=1)
    want = m(seq)[:, ptok.shape[1] - 1 :].reshape(3, 6, TASK.L, 4)
    got = token_logits(m, ptok, moves)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    w = torch.randn(want.shape, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    g1 = torch.autograd.grad((want * w).sum(), list(m.parameters()))
    g2 = torch.autograd.grad((token_logits(m, ptok, moves) * w).sum(), list(m.parameters()))
    for a, b in zip(g1, g2, strict=True):
        torch.testing.assert_close(b, a, rtol=1e-10, atol=1e-12)


def test_sampler_draws_by_inverse_cdf_of_the_forward_pass(monkeypatch):
    """Each sampled move is the inverse-CDF draw, at the generator's uniforms (L draws of
    [G, N]), of the move distribution of the plain causal forward pass given the sampled prefix;
    the sequence log-probability is the sum of the drawn moves' log-probabilities; decoding in
    chunks of one row gives the same moves (log-probabilities to rounding: a one-row product is
    another BLAS kernel)."""
    import fgrpo_theory.sequence.rl as rl

    m = _far_model(seed=5)
    p = make_prompts(TASK)
    ptok = torch.from_numpy(p.tokens[[1, 4]])
    G, N, L = 2, 6, TASK.L
    moves, lp = sample_answers(m, ptok, N, L, torch.Generator().manual_seed(3))
    gen = torch.Generator().manual_seed(3)
    u = torch.stack([torch.rand(G, N, generator=gen, dtype=torch.float64) for _ in range(L)])
    seq = torch.cat([ptok.repeat_interleave(N, 0), moves.reshape(G * N, L)], dim=1)
    with torch.no_grad():
        logq = torch.log_softmax(m(seq[:, :-1])[:, ptok.shape[1] - 1 :], -1)  # [G N, L, 4]
    cum = logq.exp().cumsum(-1).reshape(G, N, L, 4).permute(2, 0, 1, 3)  # [L, G, N, 4]
    want = (cum[..., :3] <= u[..., None]).sum(-1).permute(1, 2, 0)
    assert torch.equal(moves, want)
    assert len(set(map(tuple, moves.reshape(-1, L).tolist()))) > 3  # not one repeated answer
    lp_want = logq.gather(-1, moves.reshape(G * N, L, 1)).sum((1, 2)).reshape(G, N)
    torch.testing.assert_close(lp, lp_want, rtol=1e-12, atol=1e-12)
    monkeypatch.setattr(rl, "SAMPLE_BUFFER_BYTES", 1)  # one rollout per chunk
    m1, lp1 = sample_answers(m, ptok, N, L, torch.Generator().manual_seed(3))
    assert torch.equal(m1, moves)
    torch.testing.assert_close(lp1, lp, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("n_layers", [1, 2])
def test_sampler_prompt_pass_equals_the_prefill(n_layers):
    """The sampler's prompt pass (one fused causal attention call per block, the last block at
    the last position only) against :meth:`TinyDecoder.prefill` (attention written out, every
    position): the first move's logits and every layer's keys and values."""
    m = _far_model(seed=6, n_layers=n_layers)
    ptok = torch.from_numpy(make_prompts(TASK).tokens[[0, 3, 7]])
    with torch.no_grad():
        want, want_kv = m.prefill(ptok)
        got, got_kv = m.prompt_cache(ptok)
    assert want.abs().max() > 1.0  # far from flat: a real comparison
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    assert len(got_kv) == len(want_kv) == n_layers
    for (k1, v1), (k2, v2) in zip(got_kv, want_kv, strict=True):
        torch.testing.assert_close(k1, k2, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(v1, v2, rtol=1e-12, atol=1e-12)
