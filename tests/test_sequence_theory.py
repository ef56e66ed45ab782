"""Lemma 3.1 at the sequence level (issue 24): sampled groups of the transformer against the lemma
evaluated with the model's own exact mu and tau.

Oracles: the closed form (1 - tau)^N - (mu - tau)^N - (1 - mu)^N written out here; frequencies of
the event among independently sampled groups within standard errors (fixed seeds).
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from fgrpo_theory.sequence.model import ModelConfig  # noqa: E402
from fgrpo_theory.sequence.rl import RLConfig  # noqa: E402
from fgrpo_theory.sequence.run import SequenceConfig, run_sequence  # noqa: E402
from fgrpo_theory.sequence.sft import SFTConfig, train_sft  # noqa: E402
from fgrpo_theory.sequence.task import GridTask, make_prompts  # noqa: E402
from fgrpo_theory.sequence.theory import lemma31_check, tail_miss_z  # noqa: E402

TASK = GridTask(L=4, n_train=12, n_test=4, max_walls=3, min_correct=3, rare_turns=2, seed=1)
MODEL = ModelConfig(d_model=16, n_layers=2, n_heads=2, seed=4)
SFT = SFTConfig(steps=40, batch=32, lr=1e-2, teacher_beta=1.0)


@pytest.fixture(autouse=True)
def _one_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


def test_lemma31_check_per_prompt_and_pooled():
    p = make_prompts(TASK)
    m = train_sft(TASK, MODEL, SFT, prompts=p)
    df = lemma31_check(m, p, np.arange(5), N=8, n_groups=1000, seed=3)
    per = df[df["prompt"] != "all"]
    mu, tau = per["mu"].to_numpy(float), per["tau"].to_numpy(float)
    np.testing.assert_allclose(per["p_lemma"], (1 - tau) ** 8 - (mu - tau) ** 8 - (1 - mu) ** 8,
                               rtol=1e-9, atol=1e-15)  # fmt: skip
    assert (per["p_lemma"] > 0.01).sum() >= 3  # the event is not negligible on these prompts
    assert np.abs(per["z"].to_numpy(float)).max() < 5
    assert abs(float(df["z"].iloc[-1])) < 5 and len(per) == 5


def test_tail_miss_z_by_hand():
    assert tail_miss_z(3.0, np.array([0.5, 0.5])) == pytest.approx(2 / np.sqrt(0.5))
    assert np.isnan(tail_miss_z(0.0, np.zeros(3)))


def test_lemma_check_during_rl():
    cfg = SequenceConfig(task=TASK, model=MODEL, sft=SFT,
                         rl=RLConfig(B=10, N=8, steps=30, log_every=15, lr=1e-3))  # fmt: skip
    df = run_sequence(cfg, cache=False, lemma_check=True)
    tr = df[(df["split"] == "train") & (df["step"] > 0)]
    assert len(tr) == 2 and (tr["groups"] == 150).all()
    assert (tr["p_tail_miss_lemma"] > 0.02).all()
    assert (np.abs(tr["tail_miss_z"]) < 5).all(), tr[["p_tail_miss", "p_tail_miss_lemma"]]
    plain = run_sequence(cfg, cache=False)  # the check only observes: same training numbers
    cols = ["pass_at_1", "coverage_at_16", "rare_nll", "tail_miss_rate"]
    assert plain[cols].equals(df[cols])
