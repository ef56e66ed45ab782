"""Population simulator: identity with the single-prompt simulator, streams, threads, errors."""

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
from fgrpo_theory.sim import SimConfig, simulate
from fgrpo_theory.sim.keys import run_keys, stream_words


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
    sc = SimConfig(
        K=K, logits=logits, correct=correct, N=N, steps=120, rule=rule, advantage=adv,
        gamma=gamma, optimizer=opt, lr=lr, weight_decay=wd, seeds=3, seed=5, log_every=40,
        backend="dense", sampler="iid",
    )  # fmt: skip
    ref = simulate(sc)
    from fgrpo_theory.sim.config import parse_index_set, parse_logits

    z0 = parse_logits(logits, K)
    cm = np.zeros(K, np.uint8)
    cm[parse_index_set(correct, K, "correct")] = 1
    pc = PopulationConfig(
        P=1, P_test=0, K=K, B=1, N=N, steps=120, rule=rule, advantage=adv, gamma=gamma,
        optimizer=opt, lr_shared=0.0, lr_prompt=lr, weight_decay=wd, seeds=3, seed=5,
        log_every=40,
    )  # fmt: skip
    got = simulate_population(pc, population=_single(z0, cm), per_prompt=True)
    assert np.array_equal(got["step"].to_numpy(), ref["step"].to_numpy())
    assert np.array_equal(got["mu"].to_numpy(), ref["q_pos"].to_numpy())  # bit for bit
    assert np.array_equal(got["entropy"].to_numpy(), ref["entropy"].to_numpy())
    assert np.array_equal(got["groups"].to_numpy(), ref["groups"].to_numpy())
    pos = ref["step"].to_numpy() > 0
    act = ref["active_frac"].to_numpy()[pos] * ref["groups"].to_numpy()[pos]
    assert np.array_equal(got["active"].to_numpy()[pos], np.round(act).astype(np.int64))


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
    K, logits, correct = 20, "3.0x2,0.0x18", "0..1"
    lr = 0.5 if opt == "sgd" else 0.05
    sc = SimConfig(
        K=K, logits=logits, correct=correct, N=4, steps=90, optimizer=opt, lr=lr, seeds=3,
        seed=2, log_every=30, backend="dense", sampler="iid", advantage="grpo",
        dynamic_sampling=ds, max_resamples=max_res, ds_range=ds_range,
    )  # fmt: skip
    ref = simulate(sc)
    from fgrpo_theory.sim.config import parse_index_set, parse_logits

    z0 = parse_logits(logits, K)
    cm = np.zeros(K, np.uint8)
    cm[parse_index_set(correct, K, "correct")] = 1
    pc = PopulationConfig(
        P=1, P_test=0, K=K, B=1, N=4, steps=90, optimizer=opt, lr_shared=0.0, lr_prompt=lr,
        seeds=3, seed=2, log_every=30, dynamic_sampling=ds, max_resamples=max_res,
        ds_range=ds_range,
    )  # fmt: skip
    got = simulate_population(pc, population=_single(z0, cm), per_prompt=True)
    assert np.array_equal(got["mu"].to_numpy(), ref["q_pos"].to_numpy())
    assert np.array_equal(got["entropy"].to_numpy(), ref["entropy"].to_numpy())
    assert np.array_equal(got["resamples"].to_numpy(), ref["resamples"].to_numpy())
    assert got["resamples"].sum() > 0
    off = simulate_population(
        pc.replace(dynamic_sampling=False, ds_range=None), population=_single(z0, cm)
    )
    assert (off["resamples"] == 0).all()
    with pytest.raises(ValueError, match="max_resamples must be >= 1"):
        pc.replace(max_resamples=0)
