"""Two-level population experiments (fgrpo_theory.population.draws, issue 22)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fgrpo_theory.population import PopulationConfig, generate_population, simulate_population
from fgrpo_theory.population.draws import (
    arm,
    compare_arms,
    compare_arms_on_draws,
    population_seeds,
    summarize_arms,
    variance_components,
)
from fgrpo_theory.population.runner import final_metrics

SMALL = dict(P=24, P_test=24, K=12, B=6, N=4, steps=40, seeds=4, log_every=10,
             optimizer="sgd", lr_shared=2.0, lr_prompt=2.0, pass_k=(1, 16, 256))  # fmt: skip


def test_final_metrics_match_the_per_prompt_policy():
    cfg = PopulationConfig(**SMALL)
    fm = final_metrics(cfg)
    pp = simulate_population(cfg, per_prompt=True)  # every logged step, raw mu per prompt
    last = pp[(pp.step == cfg.steps) & (pp.split == "test")].sort_values(["run", "prompt"])
    mu = last["mu"].to_numpy().reshape(cfg.seeds, -1).clip(0, 1)
    for k in (1, 16, 256):  # pass@k = mean_p 1 - (1 - mu_p)^k, written here independently
        want = (1 - (1 - mu) ** k).mean(axis=1)
        np.testing.assert_allclose(fm["test"][f"pass_at_{k}"], want, rtol=0, atol=1e-12)
    ent = last["entropy"].to_numpy().reshape(cfg.seeds, -1).mean(axis=1)
    np.testing.assert_allclose(fm["test"]["entropy"], ent, rtol=0, atol=1e-12)


def test_an_lr_arm_is_matched_by_the_reference_at_its_own_factor_exactly():
    base = PopulationConfig(**SMALL)
    df = compare_arms(base, [arm("half", lr_factor=0.5), arm("focal", scheme="focal:gamma=1")])
    ctl = df[(df.role == "control") & (df.split == "train")]
    half = ctl[ctl.arm == "half"]
    assert half.lr_factor.iloc[0] == 0.5 and half.match_error.iloc[0] == 0.0  # grid point
    a = df[(df.arm == "half") & (df.role == "arm")].sort_values(["split", "seed_index"])
    c = df[(df.arm == "half") & (df.role == "control")].sort_values(["split", "seed_index"])
    np.testing.assert_array_equal(a.pass_at_256.to_numpy(), c.pass_at_256.to_numpy())
    foc = ctl[ctl.arm == "focal"]
    assert abs(foc.match_error.iloc[0]) <= 5e-4 and foc.matched.iloc[0]
    # the achieved progress is the control's own median train pass@1
    assert foc.achieved.iloc[0] == pytest.approx(float(np.median(foc.pass_at_1)), abs=1e-15)


def test_draws_are_deterministic_and_summary_is_two_level():
    # each (setting, draw) task is a pure function of its config and arms, which is what makes
    # the rows independent of the number of worker processes
    base = PopulationConfig(**{**SMALL, "steps": 20})
    arms = [arm("focal", scheme="focal:gamma=1")]
    one = compare_arms_on_draws(base, arms, population_seeds(3, 2))
    two = compare_arms_on_draws(base, arms, population_seeds(3, 2))
    assert one.equals(two)
    assert sorted(one.population_seed.unique()) == [3, 4]
    s = summarize_arms(one, ["pass_at_1"], split="train")
    assert s.draws.iloc[0] == 2 and s.seeds.iloc[0] == 4 and len(s.draw_diffs.iloc[0]) == 2
    # the per-draw differences are the differences of each draw's medians, by hand
    for i, d in enumerate((3, 4)):
        e = one[(one.population_seed == d) & (one.split == "train")]
        want = np.median(e[e.role == "arm"].pass_at_1) - np.median(e[e.role == "control"].pass_at_1)
        assert s.draw_diffs.iloc[0][i] == pytest.approx(want, abs=1e-15)


def test_run_diffs_are_every_draw_and_seed_arm_minus_control_by_hand():
    # 2 draws (5 and 2, given out of order) x 2 seeds; values exact in binary so the expected
    # differences are written out by hand: draw 2 first (sorted), seed 0 then seed 1
    vals = {("arm", 2): (0.25, 0.5), ("control", 2): (0.125, 0.75),
            ("arm", 5): (0.75, 0.5), ("control", 5): (0.5, 0.625)}  # fmt: skip
    rows = [dict(arm="x", family="x", coef="", role=role, split=split, population_seed=d,
                 seed_index=si, pass_at_1=v[si], match_error=0.0, matched=True)
            for (role, d), v in vals.items()
            for split in ("train", "test") for si in (1, 0)]  # fmt: skip
    df = pd.DataFrame(rows[::-1])
    s = summarize_arms(df, ["pass_at_1"], split="test", scale={"pass_at_1": 100.0}, n_boot=200)
    r = s.iloc[0]
    assert (r.draws, r.seeds) == (2, 2)
    # draw 2: 25 - 12.5, 50 - 75; draw 5: 75 - 50, 50 - 62.5 (points)
    assert list(r.run_diffs) == [12.5, -25.0, 25.0, -12.5]
    # each draw's difference of medians: 37.5 - 43.75 and 62.5 - 56.25
    assert list(r.draw_diffs) == [-6.25, 6.25]


def test_population_seeds_keep_the_declared_distribution():
    cfg = PopulationConfig(**SMALL)
    a, b = (generate_population(cfg.replace(population_seed=s)) for s in (0, 1))
    assert not np.array_equal(a.correct, b.correct)
    assert population_seeds(5, 3) == (5, 6, 7)
    with pytest.raises(ValueError, match="draws"):
        population_seeds(0, 1)
    with pytest.raises(ValueError, match="population_seeds"):
        compare_arms_on_draws(cfg, [arm("x", lr_factor=0.5)], [1, 1])


def test_variance_components_recover_known_between_and_within():
    rng = np.random.default_rng(7)
    D, S = 400, 6
    x = rng.normal(0, 2.0, (D, 1)) + rng.normal(0, 1.0, (D, S))  # between 4, within 1
    v = variance_components(x)
    se_w = np.sqrt(2 / (D * (S - 1)))  # s.e. of the pooled within variance (normal data)
    assert abs(v["within"] - 1.0) < 4 * se_w
    assert abs(v["between"] - 4.0) < 4 * 4.0 * np.sqrt(2 / (D - 1)) + 0.05


def test_arena_arms_are_the_preregistered_grid():
    from fgrpo_theory.population.arena import arena_arms, missing_reason, population_arms

    arms = arena_arms()
    names = [a.name for a in arms]
    assert names[0] == "grpo" and len(names) == len(set(names)) == 31  # docs/arena.md table
    assert {"focal 0.5", "focal 1", "focal 2", "pkpo 8", "w-reinforce 0.03", "larger-N 32",
            "unlikeliness 0.25", "kl 0.1", "entropy 0.001"} <= set(names)  # fmt: skip
    base = PopulationConfig(**SMALL)
    by = {a.name: a for a in arms}
    (f1,) = population_arms([by["focal 1"]], base, compute_budget=24)
    cfg = f1.config(base)
    assert (cfg.advantage, cfg.gamma, cfg.scheme) == ("grpo", 1.0, "")  # grpo+focal folds
    (n,) = population_arms([by["larger-N 16"]], base, compute_budget=24)
    assert (n.config(base).N, n.config(base).B) == (16, 1)  # B x N = 24 // 16 x 16
    (lo,) = population_arms([by["low-lr m1=0.5"]], base)
    assert lo.config(base).lr_shared == base.lr_shared * 0.5
    assert missing_reason(by["maxrl"], base) == ""


def test_compare_arms_trains_each_config_once(monkeypatch):
    """GRPO's own arm is the search's point at factor 1 and a low-lr arm on the grid is a grid
    point: each config is trained once per draw (memoized by its hash), counted at the runner."""
    from fgrpo_theory.population import config as pc
    from fgrpo_theory.population import runner

    real = runner.final_metrics
    calls = []

    def counting(cfg, **k):
        calls.append(pc.population_config_hash(cfg))
        return real(cfg, **k)

    monkeypatch.setattr(runner, "final_metrics", counting)
    base = PopulationConfig(**{**SMALL, "steps": 20})
    arms = [arm("grpo"), arm("half", lr_factor=0.5), arm("focal", scheme="focal:gamma=1")]
    df = compare_arms(base, arms)
    assert len(calls) == len(set(calls)) == df.attrs["simulations"]
    # the search walks the grid from factor 1 (GRPO itself) and passes 0.5: both arms' configs
    # were asked for twice (as an arm and as a search point) and trained once
    half = base.replace(lr_shared=base.lr_shared * 0.5, lr_prompt=base.lr_prompt * 0.5)
    assert pc.population_config_hash(base) in calls and pc.population_config_hash(half) in calls
    monkeypatch.setattr(runner, "final_metrics", real)
    # an independent run of the reference and of focal equals the memoized rows
    for name, cfg in (("grpo", base), ("focal", base.replace(scheme="focal:gamma=1"))):
        got = df[(df.arm == name) & (df.role == "arm") & (df.split == "test")]
        np.testing.assert_array_equal(got.pass_at_256.to_numpy(),
                                      real(cfg)["test"]["pass_at_256"])  # fmt: skip
