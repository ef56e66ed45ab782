"""The transformer and its SFT checkpoint (issue 24 step 2): seeded weights, determinism, cache.

Oracles: two independent builds / trainings compared bit for bit; the teacher's known bias
(rare routes get exp(-beta * turns) of the weight) against the trained model's exact masses.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from fgrpo_theory.sequence.model import ModelConfig, build_model  # noqa: E402
from fgrpo_theory.sequence.sft import (  # noqa: E402
    SFTConfig,
    load_or_train_sft,
    sft_cache_path,
    train_sft,
)
from fgrpo_theory.sequence.task import GridTask, make_prompts  # noqa: E402

TASK = GridTask(L=5, n_train=24, n_test=8, max_walls=5, min_correct=3, rare_turns=3, seed=2)
MODEL = ModelConfig(d_model=32, n_layers=2, n_heads=4, seed=1)


@pytest.fixture(autouse=True)
def _one_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


def _same(a, b) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def test_seed_gives_the_same_weights_whatever_the_global_rng():
    a = build_model(MODEL, TASK.vocab, 16)
    torch.manual_seed(123)
    torch.randn(1000)
    b = build_model(MODEL, TASK.vocab, 16)
    c = build_model(ModelConfig(d_model=32, n_layers=2, n_heads=4, seed=2), TASK.vocab, 16)
    assert _same(a, b) and not _same(a, c)


def test_parameter_count_matches_the_module():
    m = build_model(MODEL, TASK.vocab, 16)
    assert MODEL.n_params(TASK.vocab, 16) == sum(p.numel() for p in m.parameters())


def test_too_large_a_model_is_refused_before_allocation():
    t = time.perf_counter()
    with pytest.raises(ValueError, match="d_model must be small enough"):
        build_model(ModelConfig(d_model=1024, n_layers=12, n_heads=8), 100, 64)
    assert time.perf_counter() - t < 0.5


@pytest.mark.parametrize(
    "kw, words", [(dict(n_heads=5), "n_heads must be"), (dict(d_model=4), "d_model must be in")]
)
def test_model_config_refusals(kw, words):
    with pytest.raises(ValueError, match=words):
        ModelConfig(**kw)


def test_sft_is_deterministic_and_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("FGRPO_THEORY_CACHE_DIR", str(tmp_path))
    sft = SFTConfig(steps=15, batch=16)
    m1, cached1 = load_or_train_sft(TASK, MODEL, sft)
    path = sft_cache_path(TASK, MODEL, sft)
    assert not cached1 and path.is_file() and path.is_relative_to(tmp_path / "sequence")
    m2, cached2 = load_or_train_sft(TASK, MODEL, sft)
    assert cached2 and _same(m1, m2)
    assert _same(m1, train_sft(TASK, MODEL, sft))  # a second training gives the same bits
    assert not _same(m1, build_model(MODEL, TASK.vocab, TASK.prompt_len + TASK.L))
    assert sft_cache_path(TASK, MODEL, SFTConfig(steps=16, batch=16)) != path
    assert not list(path.parent.glob(".*.tmp"))


def test_sft_learns_the_task_and_the_teachers_bias():
    from fgrpo_theory.sequence.exact import answer_logprobs, prompt_metrics
    from fgrpo_theory.sequence.task import teacher_probabilities

    p = make_prompts(TASK)
    sft = SFTConfig(steps=250, batch=32, lr=3e-3, teacher_beta=2.0)
    m = train_sft(TASK, MODEL, sft, prompts=p)
    ids = p.split("train")
    met = prompt_metrics(answer_logprobs(m, p.tokens[ids], TASK.L), p, ids)
    q = teacher_probabilities(p, 2.0)[ids]
    teacher_rare = (q * p.rare[ids]).sum(1).mean()
    assert met["mu"].mean() > 0.6, met["mu"].mean()
    # most correct mass on the common routes, as the teacher had it (rare share well below half)
    share = met["tau"].mean() / met["mu"].mean()
    assert share < 0.5 and share < 3 * teacher_rare, (share, teacher_rare)
    assert np.isfinite(met["entropy"]).all()


def test_checkpoint_digest_covers_the_sft_sources_only():
    from pathlib import Path

    import fgrpo_theory
    from fgrpo_theory._imports import import_closure
    from fgrpo_theory.sequence import sft

    pkg = Path(fgrpo_theory.__file__).parent
    files = {str(p.relative_to(pkg)) for p in
             import_closure([Path(sft.__file__)], {pkg.name: pkg}, packages=False)}  # fmt: skip
    assert {"sequence/task.py", "sequence/model.py", "sequence/sft.py"} <= files
    assert not files & {"sequence/rl.py", "sequence/run.py", "sequence/exact.py", "cli/sequence.py"}


def test_interrupted_cache_write_leaves_no_file(tmp_path, monkeypatch):
    monkeypatch.setenv("FGRPO_THEORY_CACHE_DIR", str(tmp_path))

    def save(obj, f):
        open(f, "wb").write(b"half")  # noqa: SIM115 - a partial file, then Ctrl-C
        raise KeyboardInterrupt

    monkeypatch.setattr(torch, "save", save)
    with pytest.raises(KeyboardInterrupt):
        load_or_train_sft(TASK, MODEL, SFTConfig(steps=2, batch=4))
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]
