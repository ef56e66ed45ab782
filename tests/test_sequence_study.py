"""Sequence-rung experiments over task draws x seeds (fgrpo_theory.sequence.study).

Oracles: (1) a run of :func:`run_draw` against :func:`run_sequence` on the same config (the
command's loop: the same final metrics to the bit); (2) the per-group theory records of the first
step against the brute-force answer probabilities (one forward pass per answer) of the SFT model
and the sampled answers counted by hand; (3) :func:`match_controls` on a hand-made table whose
ladder is linear in log lr, and the out-of-range flag.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch")

from fgrpo_theory.sequence.exact import answer_logprobs_bruteforce  # noqa: E402
from fgrpo_theory.sequence.run import preset, run_sequence  # noqa: E402
from fgrpo_theory.sequence.sft import load_or_train_sft  # noqa: E402
from fgrpo_theory.sequence.study import (  # noqa: E402
    SeqArm,
    draw_config,
    match_controls,
    rl_seed,
    run_draw,
)
from fgrpo_theory.sequence.task import make_prompts  # noqa: E402
from fgrpo_theory.tail_miss import tail_miss_probability  # noqa: E402


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FGRPO_THEORY_CACHE_DIR", str(tmp_path / "cache"))
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


def test_run_draw_equals_run_sequence():
    base = preset("smoke", steps=3, log_every=3)
    focal = SeqArm("focal 1", "grpo+focal:gamma=1", family="focal", coef="1")
    runs, groups = run_draw(base, 5, [focal], seeds=2, ladder=(1.0,))
    assert groups is None
    cfg = draw_config(base, 5)
    cfg = replace(cfg, rl=replace(cfg.rl, seed=rl_seed(5, 1), scheme="grpo+focal:gamma=1"))
    full = run_sequence(cfg)
    ref = full.query("step == 3").set_index("split")
    mine = runs.query("arm == 'focal 1' and seed_index == 1").set_index("split")
    for split in ("train", "test"):
        for c in ("pass_at_1", "pass_at_16", "rare_nll", "entropy", "tau"):
            assert mine.loc[split, c] == ref.loc[split, c]
    start = runs.query("role == 'start'").set_index("split")
    ref0 = full.query("step == 0").set_index("split")
    assert start.loc["test", "pass_at_1"] == ref0.loc["test", "pass_at_1"]
    # the ladder rung lr x 1 is GRPO, not the focal arm: a separate run, paired by seed
    lad = runs.query("role == 'ladder'")
    assert set(lad.lr_factor) == {1.0} and set(lad.scheme) == {"grpo"}


def test_ladder_rung_equal_to_an_arm_reuses_it(monkeypatch):
    from fgrpo_theory.sequence import study

    calls = []
    real = study.train_run

    def counting(cfg, *a, **k):
        calls.append((cfg.rl.scheme, cfg.rl.lr))
        return real(cfg, *a, **k)

    monkeypatch.setattr(study, "train_run", counting)
    base = preset("smoke", steps=2, log_every=2)
    runs, _ = run_draw(base, 0, [SeqArm("grpo")], seeds=1, ladder=(0.5, 1.0))
    assert len(calls) == 2, calls  # the arm and the x0.5 rung; the x1 rung is the arm's run
    assert "seconds" not in runs.columns  # no wall time in the rows: a rerun is identical
    a = runs.query("role == 'arm'").set_index("split")
    r = runs.query("role == 'ladder' and lr_factor == 1.0").set_index("split")
    assert (a.pass_at_1 == r.pass_at_1).all()
    r5 = runs.query("role == 'ladder' and lr_factor == 0.5").set_index("split")
    assert (r5.pass_at_1 != a.pass_at_1).any()


def test_checks_first_step_against_brute_force():
    base = preset("smoke", steps=1, log_every=1, N=4)
    runs, g = run_draw(base, 2, [SeqArm("grpo")], seeds=1, ladder=(), checks=True)
    cfg = draw_config(base, 2)
    prompts = make_prompts(cfg.task)
    model, _ = load_or_train_sft(cfg.task, cfg.model, cfg.sft, prompts=prompts)
    ids = g["prompt"].to_numpy()
    p = answer_logprobs_bruteforce(model, torch.from_numpy(prompts.tokens[ids]), 4).exp().numpy()
    mu = (p * prompts.correct[ids]).sum(1)
    tau = (p * prompts.rare[ids]).sum(1)
    np.testing.assert_allclose(g["mu"], mu, atol=1e-5)
    np.testing.assert_allclose(g["tau"], tau, atol=1e-5)
    has = prompts.rare[ids].any(1)
    np.testing.assert_allclose(g["p_lemma"][has], tail_miss_probability(4, mu, tau)[has],
                               atol=1e-5)  # fmt: skip
    # Q_u <= mu (the unsampled correct answers are some of the correct ones); a group with no
    # correct rollout leaves every correct answer unsampled: Q_u = mu
    assert (g["q_u"] <= g["mu"] + 1e-12).all()
    none = g["X"] == 0
    np.testing.assert_allclose(g.loc[none, "q_u"], g.loc[none, "mu"], rtol=1e-12)
    act = (g["X"] > 0) & (g["X"] < 4)
    assert (g["event_b"] == (act & g["has_rare"] & (g["rare_hits"] == 0))).all()


def _table(progress: dict[float, list[float]], target: list[float]) -> pd.DataFrame:
    rows = []
    for f, vals in progress.items():
        for s, v in enumerate(vals):
            for split, scale in (("train", 1.0), ("test", 0.5)):
                rows.append(dict(population_seed=0, seed_index=s, arm=f"grpo x{f:g}",
                                 role="ladder", family="grpo", coef="", N=8, lr_factor=f,
                                 split=split, pass_at_1=v * scale, entropy=1.0 - v))  # fmt: skip
    for s, v in enumerate(target):
        for split, scale in (("train", 1.0), ("test", 0.5)):
            rows.append(dict(population_seed=0, seed_index=s, arm="x", role="arm", family="x",
                             coef="", N=8, lr_factor=1.0, split=split, pass_at_1=v * scale,
                             entropy=0.0))  # fmt: skip
    return pd.DataFrame(rows)


def test_match_controls_hand_case():
    # ladder median progress 0.2, 0.4, 0.6 at factors 0.5, 1, 2 (linear in log2 f); the arm's
    # median 0.5 lies halfway between factors 1 and 2: f = sqrt(2), weight 1/2 on each rung
    lad = {0.5: [0.1, 0.3], 1.0: [0.3, 0.5], 2.0: [0.5, 0.7]}
    out = match_controls(_table(lad, [0.45, 0.55]), metrics=("pass_at_1", "entropy"))
    c = out.query("role == 'control'").set_index(["seed_index", "split"])
    assert c.lr_factor.iloc[0] == pytest.approx(np.sqrt(2.0))
    assert c.loc[(0, "train"), "pass_at_1"] == pytest.approx(0.4)  # (0.3 + 0.5) / 2
    assert c.loc[(1, "test"), "pass_at_1"] == pytest.approx(0.3)  # (0.5 + 0.7) / 4
    assert c.loc[(0, "train"), "entropy"] == pytest.approx(0.6)
    assert bool(c.matched.iloc[0]) and bool(c.monotone.iloc[0])
    assert c.match_error.iloc[0] == pytest.approx(0.0, abs=1e-12)
    # a target above the ladder's range: the nearest rung, flagged unmatched
    out = match_controls(_table(lad, [0.9, 0.95]), metrics=("pass_at_1",))
    c = out.query("role == 'control'")
    assert not c.matched.iloc[0] and c.lr_factor.iloc[0] == 2.0
    assert c.match_error.iloc[0] == pytest.approx(0.6 - 0.925)


def test_match_controls_refuses_other_tables():
    with pytest.raises(ValueError, match="runs must be"):
        match_controls(pd.DataFrame({"arm": ["a"]}))
