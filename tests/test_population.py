"""Population simulator: threads, tidy frame, errors, lazy Adam (identities with the single-prompt
simulator are in test_population_kernel.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fgrpo_theory.population import (
    Population,
    PopulationConfig,
    generate_population,
    simulate_population,
)


def _small(**kw) -> PopulationConfig:
    base = dict(P=24, P_test=12, K=12, B=6, N=4, steps=30, seeds=4, log_every=10)
    base.update(kw)
    return PopulationConfig(**base)


def test_same_result_for_one_and_two_threads():
    cfg = _small(lr_shared=0.02, lr_prompt=0.02)
    a = simulate_population(cfg, threads=1)
    b = simulate_population(cfg, threads=2)
    pd.testing.assert_frame_equal(a, b, check_exact=True)


def test_tidy_frame_has_one_row_per_step_run_split_bucket():
    cfg = _small()
    df = simulate_population(cfg)
    n_log = len(cfg.log_schedule())
    assert not df.duplicated(["run", "step", "split", "bucket"]).any()
    assert set(df["split"]) == {"train", "test"}
    assert (df.groupby(["split", "bucket"]).size() == n_log * cfg.seeds).all()
    allrows = df[df.bucket == "all"]
    assert np.allclose(allrows.loc[allrows.step == 0, "rare_nll_rise"], 0.0)
    # the buckets partition the prompts: their prompt-weighted means give the "all" rows
    b = df[df.bucket != "all"].assign(w=lambda d: d.pass_at_4 * d.n_prompts)
    agg = b.groupby(["run", "step", "split"])[["w", "n_prompts"]].sum()
    ref = allrows.set_index(["run", "step", "split"])
    assert np.allclose(agg["w"] / agg["n_prompts"], ref.loc[agg.index, "pass_at_4"])
    assert (agg["n_prompts"] == ref.loc[agg.index, "n_prompts"]).all()
    tr = allrows[(allrows.split == "train") & (allrows.step > 0)]
    assert (tr["groups"] == cfg.B * cfg.log_every).all()


def test_tidy_rows_match_the_per_prompt_table():
    """Every (split, bucket, run, step) row against the raw per-prompt table, summarized here
    independently: pass@k, entropy, the prompt count and the train counters."""
    cfg = _small(pass_k=(1, 4), buckets=(0.3, 0.7))
    df = simulate_population(cfg)
    pp = simulate_population(cfg, per_prompt=True)
    mu0 = generate_population(cfg).mu0  # the buckets are of the prompts' initial success rates
    pp["bucket"] = np.select([mu0[pp.prompt.to_numpy()] < t for t in (0.3, 0.7)],
                             ["[0,0.3)", "[0.3,0.7)"], "[0.7,1]")  # fmt: skip
    assert set(df["bucket"]) - {"all"} <= set(pp["bucket"])
    keys = ["split", "bucket", "run", "step"]
    for lab, part in (("all", pp.assign(bucket="all")), (None, pp)):
        g = part.assign(p1=part.mu.clip(0, 1), p4=1 - (1 - part.mu.clip(0, 1)) ** 4)
        agg = g.groupby(keys).agg(
            n=("prompt", "size"), p1=("p1", "mean"), p4=("p4", "mean"), ent=("entropy", "mean"),
            groups=("groups", "sum"), active=("active", "sum"), tail=("tail_miss", "sum"),
            resamples=("resamples", "sum"),
        )  # fmt: skip
        got = df[(df.bucket == "all") == (lab == "all")].set_index(keys).loc[agg.index]
        assert (got["n_prompts"].to_numpy() == agg["n"].to_numpy()).all()
        for a, b in (("pass_at_1", "p1"), ("pass_at_4", "p4"), ("entropy", "ent")):
            np.testing.assert_allclose(got[a], agg[b], rtol=0, atol=1e-12)
        tr = got.index.get_level_values("split") == "train"
        assert (got["groups"].to_numpy()[tr] == agg["groups"].to_numpy()[tr]).all()
        assert (got["resamples"].to_numpy()[tr] == agg["resamples"].to_numpy()[tr]).all()
        np.testing.assert_allclose(
            got["active_frac"].to_numpy()[tr & (agg["groups"].to_numpy() > 0)],
            (agg["active"] / agg["groups"]).to_numpy()[tr & (agg["groups"].to_numpy() > 0)],
        )
    assert len(df) == len(pp.groupby(keys).size()) + len(pp.groupby(keys[:1] + keys[2:]).size())


def test_algorithm_fields_follow_the_simulator():
    cfg = PopulationConfig(algo="DAPO", inner_updates=3.0)
    assert (cfg.algo, cfg.inner_updates, cfg.clip_bounds()) == ("dapo", 3, (0.2, 0.28))
    assert PopulationConfig(algo="cispo").clip_bounds() == (1.0, 5.0)
    assert PopulationConfig(clip_low=0.1, clip_high=0.3).clip_bounds() == (0.1, 0.3)
    df = simulate_population(_small(inner_updates=3, dual_clip=2.0, steps=20))
    tr = df[(df.split == "train") & (df.bucket == "all") & (df.step > 0)]
    assert (tr["groups"] == 6 * 10).all()  # B groups per step, not per inner update
    assert set(df.inner_updates) == {3} and set(df.algo) == {"grpo"}


def test_compute_matched_mode_holds_rollouts_fixed():
    assert PopulationConfig(P=64, N=4, compute_budget=64).B == 16
    assert PopulationConfig(P=64, N=16, compute_budget=64).B == 4


@pytest.mark.parametrize(
    "kw,msg",
    [
        (dict(P=0), "P must be >= 1"),
        (dict(mu0=(0.0, 1.0)), "Beta parameters > 0"),
        (dict(breadth=(1.0, -1.0)), "Beta parameters > 0"),
        (dict(P=8, B=9), "B must be <= P = 8"),
        (dict(K=1), "K must be >= 2"),
        (dict(rare_share=1.0), "rare_share must be in (0, 1)"),
        (dict(rare_share=0.0), "rare_share must be in (0, 1)"),
        (dict(optimizer="rmsprop"), "optimizer must be one of"),
        (dict(algo="ppo"), "algo must be one of grpo, dapo, cispo; got 'ppo'"),
        (dict(inner_updates=0), "inner_updates must be >= 1; got 0"),
        (dict(inner_updates=1001), "inner_updates must be <= 1000; got 1001"),
        (dict(clip_low=1.5), "clip_low must be in [0.0, 1.0]; got 1.5"),
        (dict(clip_high=-0.1), "clip_high must be >= 0.0; got -0.1"),
        (dict(dual_clip=1.0), "dual_clip must be > 1.0; got 1.0"),
        (dict(algo="cispo", dual_clip=3.0), "dual_clip must be None for algo = cispo"),
    ],
)
def test_bad_config_one_line_errors(kw, msg):
    with pytest.raises(ValueError) as e:
        PopulationConfig(**kw)
    assert msg in str(e.value) and "\n" not in str(e.value)


def test_unsolvable_prompts_refused_with_count_or_dropped():
    cfg = dict(P=200, P_test=0, K=4, B=4, breadth=(0.2, 3.0), population_seed=3)
    pop = generate_population(PopulationConfig(**cfg, unsolvable="drop"))
    assert pop.dropped > 0 and pop.correct.shape[0] == 200 - pop.dropped
    assert (pop.correct.sum(axis=1) > 0).all()
    with pytest.raises(ValueError, match=rf"{pop.dropped} of 200 prompts have no correct"):
        generate_population(PopulationConfig(**cfg, unsolvable="refuse"))


def test_pass_rate_csv_errors(tmp_path):
    f = tmp_path / "r.csv"
    f.write_text("pass_rate\n0.5\n1.5\n")
    with pytest.raises(
        ValueError, match=r"in \[0, 1\] in every row \(row 2 of the data holds '1.5'\)"
    ):
        generate_population(PopulationConfig(P=2, P_test=0, B=1, pass_rates=str(f)))
    f.write_text("pass_rate\n0.5\nnan\n")  # "nan" is not a rate, and the message is one line
    with pytest.raises(ValueError, match=r"\(row 2 of the data holds 'nan'\)") as e:
        generate_population(PopulationConfig(P=2, P_test=0, B=1, pass_rates=str(f)))
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match=r"^threads must be an integer >= 1; got 2.5$"):
        simulate_population(PopulationConfig(P=4, P_test=0, B=1, K=8, steps=1), threads=2.5)
    with pytest.raises(ValueError, match=r"^advantage must be one of .*; got 'bogus'$") as e:
        PopulationConfig(advantage="bogus")
    assert str(e.value).count("must be") == 1
    with pytest.raises(ValueError, match=r"^log_every must be such that seeds x logged steps"):
        simulate_population(PopulationConfig(steps=10**7, log_every=1))  # refused, never built
    f.write_text("rate\n0.5\n0.5\n")
    with pytest.raises(ValueError, match="column 'pass_rate'"):
        generate_population(PopulationConfig(P=2, P_test=0, B=1, pass_rates=str(f)))
    f.write_text("pass_rate\n0.25\n0.75\n")
    pop = generate_population(PopulationConfig(P=2, P_test=0, K=64, B=1, pass_rates=str(f)))
    mu = (np.exp(pop.phi0) * pop.correct).sum(axis=1)
    assert np.allclose(mu, [0.25, 0.75])


def test_generated_population_is_reproducible_and_consistent():
    cfg = PopulationConfig(P=50, P_test=20, K=32, rare_share=0.2, population_seed=9)
    a, b = generate_population(cfg), generate_population(cfg)
    assert np.array_equal(a.phi0, b.phi0) and np.array_equal(a.correct, b.correct)
    p = np.exp(a.phi0)
    assert np.allclose(p.sum(axis=1), 1.0)
    assert np.allclose((p * a.correct).sum(axis=1), a.mu0)
    has = a.rare.any(axis=1)
    assert np.all(a.rare <= a.correct)
    assert np.allclose((p * a.rare).sum(axis=1)[has], 0.2 * a.mu0[has])


@pytest.mark.parametrize(
    "kw",
    [
        dict(lr_shared=0.02, lr_prompt=0.02),  # global Adam, zero-sum log-prob: sparse state
        dict(lr_shared=0.0, lr_prompt=0.05, gamma=1.0, K=70),  # tabular, K not a multiple of 8
        dict(lr_shared=0.02, lr_prompt=0.02, rule="linear"),  # dense gradients (C != 0)
        dict(lr_shared=0.01, lr_prompt=0.02, optimizer="adamw", advantage="rloo", log_every=7),
        # inner updates: the replay counts optimizer steps (3 per step), ratios make C != 0
        dict(lr_shared=0.02, lr_prompt=0.05, inner_updates=3, algo="cispo", clip_low=0.1),
        dict(lr_shared=0.0, lr_prompt=0.05, inner_updates=2, clip_high=0.05, log_every=7),
    ],
)
def test_lazy_adam_equals_eager_per_step_updates_bit_for_bit(monkeypatch, kw):
    """Idle prompts' Adam steps replayed lazily (only on elements with state) = every step."""
    from fgrpo_theory.population import runner

    cfg = _small(**{**dict(P=40, B=4, steps=45, seeds=2), **kw})
    lazy = simulate_population(cfg, per_prompt=True)
    monkeypatch.setattr(runner, "_SPARSE", False)
    eager = simulate_population(cfg, per_prompt=True)
    pd.testing.assert_frame_equal(lazy, eager, check_exact=True)
    # the runs really move the idle prompts (so the replay is exercised)
    first, lastp = (eager[eager.step == s].mu.to_numpy() for s in (0, cfg.steps))
    assert np.abs(lastp - first).max() > 1e-3


# ---- ds_fill = "next-prompt": a trainer fills the batch with other prompts' groups ------------


def _fill_case(**kw):
    """Four train prompts over K = 2 strategies: 0 and 1 unsolvable (X = 0 always), 2 and 3
    solved by both strategies (X = N always); N = 1 and OpenRLHF's range (0.5, 1.5) keep a group
    iff its one rollout is correct, so exactly the groups of prompts 0 and 1 are dropped."""
    K = 2
    pop = Population(
        correct=np.array([[0, 0], [0, 0], [1, 1], [1, 1]], np.uint8),
        rare=np.zeros((4, K), np.uint8), phi0=np.zeros((4, K)), theta0=np.zeros(K),
        mu0=np.array([0.0, 0.0, 1.0, 1.0]), breadth=np.full(K, np.nan), n_train=4, dropped=0,
    )  # fmt: skip
    cfg = PopulationConfig(
        P=4, P_test=0, K=K, B=1, N=1, steps=6, log_every=1, seeds=1, seed=7, optimizer="sgd",
        lr_shared=0.0, lr_prompt=1.0, dynamic_sampling="openrlhf", ds_range=(0.5, 1.5),
        ds_fill="next-prompt", **kw,
    )  # fmt: skip
    df = simulate_population(cfg, population=pop, per_prompt=True)
    df = df[df.step > 0]
    tables = [df.pivot(index="step", columns="prompt", values=c).to_numpy().tolist()
              for c in ("groups", "resamples")]  # fmt: skip
    return tables


def test_next_prompt_fill_hand_checked():
    """Seed 7's epoch orders (Fisher-Yates of the order stream, each epoch reshuffling the
    previous order) are [2,3,0,1], [3,0,1,2], [1,0,3,2]. B = 1, so a step walks the order until
    a solvable prompt (2 or 3), dropping 0 and 1 on the way, at most min(max_resamples, P - B)
    = 3 of them; a prompt drawn in the step is skipped after a reshuffle.
    step 1: 2. step 2: 3. step 3: 0, 1 dropped, order used up, new epoch [3,0,1,2]: 3.
    step 4: 0, 1 dropped, 2. step 5: order used up at the step's start, new epoch [1,0,3,2]:
    1, 0 dropped, 3. step 6: 2.
    With max_resamples = 1 a step drops one group and keeps the next whatever the filter says:
    step 3: 0 dropped, 1 kept; step 4: new epoch [3,0,1,2]: 3; step 5: 0 dropped, 1 kept;
    step 6: 2."""
    from fgrpo_theory.population.kernel import ORDER_SALT
    from fgrpo_theory.sim.keys import GOLDEN_INT, mix64_py, run_keys

    okey, perm, orders = mix64_py(int(run_keys(7, 1)[0]) ^ int(ORDER_SALT)), [0, 1, 2, 3], []
    words = iter(mix64_py(okey + i * GOLDEN_INT) for i in range(1, 10))
    for _ in range(3):
        for i in range(3, 0, -1):
            j = int((next(words) >> 11) * 2.0**-53 * (i + 1))
            perm[i], perm[j] = perm[j], perm[i]
        orders.append(list(perm))
    assert orders == [[2, 3, 0, 1], [3, 0, 1, 2], [1, 0, 3, 2]]
    groups, resamples = _fill_case()
    assert groups == [[0, 0, 1, 0], [0, 0, 0, 1], [1, 1, 0, 1], [1, 1, 1, 0], [1, 1, 0, 1],
                      [0, 0, 1, 0]]  # fmt: skip
    assert resamples == [[0, 0, 0, 0], [0, 0, 0, 0], [1, 1, 0, 0], [1, 1, 0, 0], [1, 1, 0, 0],
                         [0, 0, 0, 0]]  # fmt: skip
    groups, resamples = _fill_case(max_resamples=1)
    assert groups == [[0, 0, 1, 0], [0, 0, 0, 1], [1, 1, 0, 0], [0, 0, 0, 1], [1, 1, 0, 0],
                      [0, 0, 1, 0]]  # fmt: skip
    assert resamples == [[0, 0, 0, 0], [0, 0, 0, 0], [1, 0, 0, 0], [0, 0, 0, 0], [1, 0, 0, 0],
                         [0, 0, 0, 0]]  # fmt: skip


def test_next_prompt_fill_without_drops_is_the_plain_batch_and_lazy_adam_stays_exact(monkeypatch):
    """A filter that keeps every group (OpenRLHF's range around [0, 1]): next-prompt fill and
    redraw are the run without dynamic sampling, bit for bit. With DAPO's filter and inner
    updates, groups per step = B + dropped groups, and the lazy replay (dropped prompts are idle)
    equals the eager updates."""
    from fgrpo_theory.population import runner

    cfg = _small(lr_shared=0.02, lr_prompt=0.02, P=30, B=5, steps=24, seeds=2, log_every=6)
    off = simulate_population(cfg, per_prompt=True)
    keep_all = dict(dynamic_sampling="openrlhf", ds_range=(-0.5, 1.5))
    for fill in ("redraw", "next-prompt"):
        got = simulate_population(cfg.replace(**keep_all, ds_fill=fill), per_prompt=True)
        pd.testing.assert_frame_equal(got, off, check_exact=True)
    dapo = cfg.replace(dynamic_sampling="dapo", ds_fill="next-prompt", inner_updates=2,
                       max_resamples=3)  # fmt: skip
    lazy = simulate_population(dapo, per_prompt=True)
    monkeypatch.setattr(runner, "_SPARSE", False)
    eager = simulate_population(dapo, per_prompt=True)
    pd.testing.assert_frame_equal(lazy, eager, check_exact=True)
    per_log = lazy[lazy.step > 0].groupby(["run", "step"])[["groups", "resamples"]].sum()
    assert (per_log["groups"] == 5 * 6 + per_log["resamples"]).all()
    assert per_log["resamples"].sum() > 0 and (per_log["resamples"] <= 3 * 6).all()


def test_ds_fill_errors():
    with pytest.raises(ValueError, match=r"^ds_fill must be one of redraw, next-prompt; got 'x'$"):
        PopulationConfig(dynamic_sampling="dapo", ds_fill="x")
    with pytest.raises(ValueError, match=r"^ds_fill must be 'redraw' unless dynamic_sampling"):
        PopulationConfig(ds_fill="next-prompt")
    cfg = PopulationConfig(P=4, P_test=0, K=8, B=4, steps=2, dynamic_sampling="dapo",
                           ds_fill="next-prompt")  # fmt: skip
    with pytest.raises(ValueError, match=r"^ds_fill must be 'redraw' when B = the 4 train"):
        simulate_population(cfg)
