"""One step of the sequence rung's RL loop against one step of TRL's GRPOTrainer (issue 24
step 4): the same model (the TinyDecoder, wrapped by :mod:`fgrpo_theory.sequence.hf` with its
parameters shared), the same completions (TRL's ``rollout_func`` returns the loop's own
samples), TRL computing its advantages, loss and gradients by its own code. The loss and every
parameter's gradient must agree to float32 rounding, for each documented option mapping
(docs/sequence.md, "The RL engine and TRL"). Skipped without TRL >= 1.16 (it runs in
``make test``'s trainer venv, tests/constraints-trainers.txt).
"""

from __future__ import annotations

import copy
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl", minversion="1.16")  # luspo, entropy_coef, use_bias_correction_kl

from fgrpo_theory.sequence.model import ModelConfig  # noqa: E402
from fgrpo_theory.sequence.rl import RLConfig, rl_step, sample_answers  # noqa: E402
from fgrpo_theory.sequence.sft import SFTConfig, train_sft  # noqa: E402
from fgrpo_theory.sequence.task import GridTask, make_prompts  # noqa: E402

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
TASK = GridTask(L=4, n_train=12, n_test=4, max_walls=3, min_correct=3, rare_turns=2, seed=1)
IDS = np.array([0, 3, 5, 8])
N = 6
SEED = 9


@pytest.fixture(autouse=True)
def _one_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


@pytest.fixture(scope="module")
def sft_model():
    torch.set_num_threads(1)
    return train_sft(TASK, ModelConfig(d_model=16, n_layers=2, n_heads=2, seed=4),
                     SFTConfig(steps=40, batch=32, lr=1e-2, teacher_beta=1.0))  # fmt: skip


def _ours(model, ref, spec, aggregation):
    """Loss and gradients of one step of rl_step (SGD with lr 0: the gradients stay on .grad).

    ``inner_updates = 2``: the first update's loss is then PPO's ratio form, whose value at
    r = 1 is what TRL reports (its ratio exp(logp - logp.detach())); with lr 0 the second
    update repeats the first, and its gradient is the log-prob surrogate's."""
    p = make_prompts(TASK)
    cfg = RLConfig(B=len(IDS), N=N, scheme=spec, aggregation=aggregation, optimizer="sgd", lr=0.0,
                   inner_updates=2)  # fmt: skip
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    st = rl_step(model, opt, p, IDS, cfg, torch.Generator().manual_seed(SEED), ref_model=ref)
    grads = {n: q.grad.detach().clone() for n, q in model.named_parameters()}
    return st, grads


def _trl(model, ref, tmp_path, **config):
    """Loss and gradients of TRL's first training step on the loop's completions."""
    from transformers import TrainerCallback

    from fgrpo_theory.sequence.hf import grpo_trainer, register_auto, to_hf

    p = make_prompts(TASK)
    moves, _ = sample_answers(model, torch.from_numpy(p.tokens[IDS]), N, TASK.L,
                              torch.Generator().manual_seed(SEED))  # fmt: skip
    hf = to_hf(model)
    if ref is not None:  # TRL loads its reference model from the policy's path
        register_auto()
        to_hf(ref).save_pretrained(tmp_path / "ref")
        hf.config._name_or_path = str(tmp_path / "ref")
    tr = grpo_trainer(hf, p, IDS, N, moves=moves, output_dir=str(tmp_path / "out"),
                      learning_rate=0.0, **config)  # fmt: skip
    rec = {}
    compute = tr.compute_loss

    def recorded(*a, **k):
        loss = compute(*a, **k)
        rec["loss"], rec["inputs"] = float(loss.detach()), a[1]
        rec["calls"] = rec.get("calls", 0) + 1
        return loss

    tr.compute_loss = recorded

    class Grads(TrainerCallback):
        def on_pre_optimizer_step(self, args, state, control, model=None, **kw):
            rec["grads"] = {
                n: q.grad.detach().clone()
                for n, q in model.named_parameters()
                if q.grad is not None
            }  # the decoder's 4-way head is unused

    tr.add_callback(Grads())
    tr.train()
    return rec, moves


def _compare(ours, theirs, atol_rel=2e-6):
    st, g = ours
    rec, _ = theirs
    assert st["loss"] == pytest.approx(rec["loss"], rel=1e-5, abs=1e-7)
    tg = rec["grads"]
    scale = max(float(v.abs().max()) for v in g.values())
    assert scale > 1e-4  # not a trivially zero step
    for name, v in g.items():
        if name == "head.weight" or name == "head.bias":
            other = tg["lm_head." + name.split(".")[1]]
            assert float(other[4:].abs().max()) == 0.0  # the masked rows get exactly nothing
            other = other[:4]
        else:
            other = tg["backbone.decoder." + name]
        torch.testing.assert_close(v, other, rtol=1e-4, atol=atol_rel * scale)


# (our scheme, our aggregation) -> TRL's GRPOConfig: the documented mapping
CASES = [
    ("trl", "token-mean", dict(loss_type="dapo", scale_rewards="group")),
    ("trl", "token-mean", dict(loss_type="bnpo", scale_rewards="group")),
    ("trl", "token-mean", dict(loss_type="grpo", scale_rewards="group")),
    ("trl", "sequence-sum", dict(loss_type="luspo", scale_rewards="group")),
    ("dr-grpo", "token-mean", dict(loss_type="dr_grpo", scale_rewards="none")),
    ("trl-batch", "token-mean", dict(loss_type="dapo", scale_rewards="batch")),
    ("trl+entropy:coef=0.05", "token-mean", dict(entropy_coef=0.05)),
]


@pytest.mark.parametrize("spec, aggregation, config", CASES)
def test_one_step_equals_trl(sft_model, tmp_path, spec, aggregation, config):
    a, b = copy.deepcopy(sft_model), copy.deepcopy(sft_model)
    ours = _ours(a, None, spec, aggregation)
    theirs = _trl(b, None, tmp_path, **config)
    st = ours[0]
    r = st["rewards"]
    assert ((r.sum(1) > 0) & (r.sum(1) < N)).sum() >= 2, "need active groups"
    # TRL's advantages (its own scale_rewards code) are the scheme's: rows matched by (prompt,
    # completion), since TRL shuffles the rows of a generation batch
    from fgrpo_theory.sequence.rl import scheme_advantages

    p = make_prompts(TASK)
    adv = scheme_advantages(spec.split("+")[0], torch.from_numpy(r)).numpy()
    moves = theirs[1].numpy()
    want = sorted((tuple(p.tokens[IDS[g]]), tuple(moves[g, i]), adv[g, i])
                  for g in range(len(IDS)) for i in range(N))  # fmt: skip
    x = theirs[0]["inputs"]
    got = sorted((tuple(a), tuple(c), float(v)) for a, c, v in
                 zip(x["prompt_ids"].tolist(), x["completion_ids"].tolist(),
                     x["advantages"].tolist(), strict=True))  # fmt: skip
    assert [w[:2] for w in want] == [g[:2] for g in got]
    np.testing.assert_allclose([g[2] for g in got], [w[2] for w in want], rtol=1e-5, atol=1e-6)
    _compare(ours, theirs)


def test_k3_kl_equals_trl_beta(sft_model, tmp_path):
    """``kl:coef=beta,estimator=k3`` is TRL's ``beta`` with ``use_bias_correction_kl=False``
    (its per-token k3 against the reference model, added to the per-token loss; TRL 1.16's
    default True multiplies k3 by the differentiable ratio, which changes the gradient to
    (log pi - log pi_ref) dlog pi: not the same estimator). The policy is moved away from its
    reference first (two SGD steps), so the KL and its gradient are not zero."""
    policy = copy.deepcopy(sft_model)
    p = make_prompts(TASK)
    cfg = RLConfig(B=4, N=8, scheme="trl", optimizer="sgd", lr=0.5)
    opt = torch.optim.SGD(policy.parameters(), lr=0.5)
    for s in range(2):
        rl_step(policy, opt, p, np.array([1, 2, 6, 9]), cfg, torch.Generator().manual_seed(s))
    spec = "trl+kl:coef=0.3,estimator=k3"
    ours = _ours(copy.deepcopy(policy), sft_model, spec, "token-mean")
    assert ours[0]["kl"] > 1e-4
    theirs = _trl(copy.deepcopy(policy), sft_model, tmp_path, beta=0.3, loss_type="dapo",
                  use_bias_correction_kl=False)  # fmt: skip
    _compare(ours, theirs)
