"""Exact metrics of the sequence policy (issue 24 step 3): the prefix-tree walk against brute force.

Oracles: every answer scored by its own full forward pass (causal mask, no cache); pass@k against
the closed form of ``fgrpo_theory.passk.pass_at_k_exact`` on the brute-force success mass; masses,
entropy and rare NLL recomputed with NumPy from the brute-force probabilities.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from fgrpo_theory.passk import pass_at_k_exact  # noqa: E402
from fgrpo_theory.sequence import exact  # noqa: E402
from fgrpo_theory.sequence.exact import (  # noqa: E402
    PASS_K,
    answer_logprobs,
    answer_logprobs_bruteforce,
    prompt_metrics,
    split_metrics,
)
from fgrpo_theory.sequence.model import ModelConfig, build_model  # noqa: E402
from fgrpo_theory.sequence.task import GridTask, make_prompts  # noqa: E402

TASK = GridTask(L=4, n_train=5, n_test=3, max_walls=4, min_correct=2, rare_turns=2, seed=7)


@pytest.fixture(autouse=True)
def _one_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


def _model(task, seed=3, d=16, layers=2, double=True):
    m = build_model(ModelConfig(d_model=d, n_layers=layers, n_heads=2, seed=seed), task.vocab,
                    task.prompt_len + task.L)  # fmt: skip
    with torch.no_grad():  # larger weights than the init, so that the distribution is far from flat
        for p in m.parameters():
            p.mul_(20.0) if p.ndim > 1 else None
    return m.double() if double else m


def test_tree_walk_equals_brute_force_in_float64():
    p = make_prompts(TASK)
    m = _model(TASK)
    tree = answer_logprobs(m, p.tokens, TASK.L)
    ref = answer_logprobs_bruteforce(m, p.tokens, TASK.L)
    assert tree.shape == (p.n, 4**TASK.L)
    np.testing.assert_allclose(tree.numpy(), ref.numpy(), rtol=0, atol=1e-12)
    np.testing.assert_allclose(tree.exp().sum(1).numpy(), 1.0, rtol=0, atol=1e-12)
    assert tree.exp().max() > 10 * tree.exp().min()  # not a flat distribution


def test_tree_walk_equals_brute_force_at_full_size_in_float32():
    task = GridTask(n_train=2, n_test=0, seed=1)
    p = make_prompts(task)
    m = _model(task, d=64, double=False)
    with torch.no_grad():
        for q in m.parameters():
            q.div_(10.0) if q.ndim > 1 else None
    tree = answer_logprobs(m, p.tokens[:1], task.L)
    ref = answer_logprobs_bruteforce(m, p.tokens[:1], task.L)
    np.testing.assert_allclose(tree.numpy(), ref.numpy(), rtol=0, atol=2e-4)


def test_chunking_does_not_change_the_numbers(monkeypatch):
    p = make_prompts(TASK)
    m = _model(TASK)
    whole = answer_logprobs(m, p.tokens, TASK.L)
    monkeypatch.setattr(exact, "CHUNK_ELEMENTS", 1)  # one prompt per chunk
    torch.testing.assert_close(answer_logprobs(m, p.tokens, TASK.L), whole, rtol=0, atol=1e-13)


def test_metrics_against_numpy_and_the_closed_form_of_pass_at_k():
    p = make_prompts(TASK)
    m = _model(TASK)
    ids = p.split("train")
    ref = answer_logprobs_bruteforce(m, p.tokens[ids], TASK.L).numpy()
    q = np.exp(ref)
    met = prompt_metrics(answer_logprobs(m, p.tokens[ids], TASK.L), p, ids)
    c, r = p.correct[ids], p.rare[ids]
    np.testing.assert_allclose(met["mu"], (q * c).sum(1), rtol=1e-11)
    np.testing.assert_allclose(met["tau"], (q * r).sum(1), rtol=1e-11)
    np.testing.assert_allclose(met["entropy"], -(q * ref).sum(1), rtol=1e-11)
    np.testing.assert_allclose(met["nll_rare_sum"], (-ref * r).sum(1), rtol=1e-11)
    s = split_metrics(met)
    for k in PASS_K:
        want = np.mean(pass_at_k_exact((q * c).sum(1), k))
        np.testing.assert_allclose(s[f"pass_at_{k}"], want, rtol=1e-10, atol=1e-14)
        cov = np.mean(1 - (1 - (q * r).sum(1)) ** k)
        np.testing.assert_allclose(s[f"coverage_at_{k}"], cov, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(s["rare_nll"], (-ref * r).sum() / r.sum(), rtol=1e-11)
    assert s["n_prompts"] == len(ids) and 0 < s["pass_at_1"] < s["pass_at_1024"] <= 1


def test_single_variant_has_nan_rare_columns():
    task = GridTask(L=4, variant="single", n_train=3, n_test=0, max_walls=8, seed=2)
    p = make_prompts(task)
    m = _model(task)
    s = split_metrics(prompt_metrics(answer_logprobs(m, p.tokens, 4), p, np.arange(3)))
    assert np.isnan(s["coverage_at_1"]) and np.isnan(s["rare_nll"]) and np.isfinite(s["pass_at_1"])


def test_refusals():
    m = _model(TASK)
    with pytest.raises(ValueError, match="tokens must be"):
        answer_logprobs(m, torch.zeros(0, 9, dtype=torch.long), 4)
    with pytest.raises(ValueError, match="L must be"):
        answer_logprobs(m, make_prompts(TASK).tokens, 6)  # beyond the model's positions
