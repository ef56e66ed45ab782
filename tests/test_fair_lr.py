"""The one learning-rate answer (``fgrpo_theory.fair.lr``, ``fgrpo-theory lr``).

Oracles: the population multiplier E[g|A|]/E[|A|] of theory section 13 (a separate sum over X of
the mean absolute advantage, :func:`effective_lr_multiplier`), the single-prompt h of section 6
(:func:`fgrpo_theory.fair.h_value`, a sum of g sqrt(X (N - X))), hand cases (N = 2, where every
active group has g = 2^-gamma; a constant-table scheme, whose H is that constant) and appendix
N's m_gamma as the large-N limit under mu ~ Uniform(0, 1).
"""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest

from fgrpo_theory.advantages import effective_lr_multiplier, lr_multiplier
from fgrpo_theory.diagnose.fit import beta_atoms
from fgrpo_theory.fair import h_profile, h_value, lr_advice, step_ratio


@pytest.mark.parametrize("advantage", ["grpo", "grpo-bessel", "trl", "rloo", "dr-grpo"])
@pytest.mark.parametrize(("N", "gamma"), [(4, 0.5), (8, 1.0), (16, 2.0), (33, 1.0)])
def test_step_ratio_is_the_population_multiplier(advantage, N, gamma):
    mu, w = beta_atoms(2.0, 5.0, 200)
    want = effective_lr_multiplier(mu, N, gamma, advantage=advantage, weights=w)
    got = step_ratio(N, gamma, beta=(2.0, 5.0), advantage=advantage)
    assert got == pytest.approx(want, rel=1e-12)
    rates = [0.05, 0.3, 0.9]
    want = effective_lr_multiplier(rates, N, gamma, advantage=advantage, weights=[1, 2, 1])
    got = step_ratio(N, gamma, mu=rates, weights=[1, 2, 1], advantage=advantage)
    assert got == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("mu", [0.02, 0.3, 0.77])
def test_one_prompt_is_h_gamma_over_h_0(mu):
    want = h_value(8, mu, 1.0) / h_value(8, mu, 0.0)
    assert step_ratio(8, 1.0, mu=[mu]) == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("gamma", [0.5, 1.0, 3.0])
def test_group_of_two_is_a_constant_factor(gamma):
    # every active group of two has X = 1, so g = (1/2)^gamma whatever the difficulty
    for kw in ({}, {"beta": (0.3, 4.0)}, {"mu": [0.1, 0.95]}):
        assert step_ratio(2, gamma, **kw) == pytest.approx(0.5**gamma, rel=1e-13)


@pytest.mark.parametrize("gamma", [0.5, 1.0, 2.0])
def test_uniform_difficulty_tends_to_appendix_n(gamma):
    # the finite-N ratio under Uniform(0, 1) approaches m_gamma (an O(1/N) difference)
    gaps = [abs(step_ratio(N, gamma) - lr_multiplier(gamma)) for N in (16, 128, 1024)]
    assert gaps[2] < gaps[1] < gaps[0] or gaps[2] < 2e-3
    assert gaps[2] < 5e-3


def test_h_profile_of_a_constant_scheme():
    # a_c = lam for every correct rollout, a_w = -1 for every wrong one (W-REINFORCE's shape):
    # H = lam + 1 exactly, so h = mu (1 - mu) (lam + 1)
    lam, N = 0.1, 7
    mu = np.array([0.0, 0.2, 0.5, 0.99])
    got = h_profile(mu, N, np.full(N + 1, lam), np.full(N + 1, -1.0))
    np.testing.assert_allclose(got, mu * (1 - mu) * (lam + 1), rtol=1e-14, atol=1e-300)


def test_a_scheme_plugs_in_through_its_tables():
    from fgrpo_theory.advantages import binary_advantages, focal_weight

    def focal_tables(N):
        X = np.arange(N + 1)
        a, b = binary_advantages(X, N, "grpo")
        g = focal_weight(X / N, 1.0)
        return g * a, g * b

    assert step_ratio(8, tables=focal_tables, beta=(2, 5)) == pytest.approx(
        step_ratio(8, 1.0, beta=(2, 5)), rel=1e-14
    )
    a = lr_advice(1e-3, "sgd", 8, tables=focal_tables)
    assert a.focal_lr == pytest.approx(1e-3 / step_ratio(8, 1.0), rel=1e-12)
    with pytest.raises(ValueError, match=r"^tables must be two tables of length N \+ 1 = 9"):
        step_ratio(8, tables=lambda N: (np.ones(N), np.ones(N)))


def test_sgd_is_step_size_matched():
    a = lr_advice(0.1, "sgd", 8, 1.0, beta=(2.0, 5.0))
    r = step_ratio(8, 1.0, beta=(2.0, 5.0))
    assert a.matching == "step-size" and a.step_ratio == r
    assert a.focal_lr == pytest.approx(0.1 / r) and a.control_lr == pytest.approx(0.1 * r)
    assert a.m_gamma == 0.5
    assert "lr / r" in a.why and "docs/populations.md" in a.why


@pytest.mark.parametrize("opt", ["adam", "AdamW"])
def test_adam_keeps_the_lr_and_matches_progress(opt):
    a = lr_advice(1e-6, opt, 8, 1.0)
    assert a.matching == "progress" and a.focal_lr == 1e-6
    assert a.control_lr == pytest.approx(1e-6 * a.step_ratio)
    assert "normalized away" in a.why and "progress-matched" in a.why
    at_two = lr_advice(1e-6, opt, 2, 1.0)
    assert "At N = 2" in at_two.why


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"lr": 0.0}, "lr must be > 0; got 0.0"),
        ({"optimizer": "rmsprop"}, "optimizer must be one of sgd, adam, adamw; got 'rmsprop'"),
        ({"N": 1}, "N must be >= 2 (a group of one is never active); got 1"),
        ({"gamma": 0.0}, "gamma must be > 0; got 0.0"),
        ({"beta": (1.0,)}, "beta must be two numbers a, b"),
        ({"beta": (1.0, -2.0)}, "beta must be > 0; got -2.0"),
        ({"mu": [0.0, 1.0]}, "mu must be giving some active group"),
        ({"mu": [0.5], "beta": (1, 1)}, "beta must be not given together with mu"),
    ],
)
def test_errors_name_the_argument(kwargs, message):
    args = {"lr": 1e-3, "optimizer": "sgd", "N": 8, "gamma": 1.0} | kwargs
    with pytest.raises(ValueError) as e:
        lr_advice(**args)
    assert str(e.value).startswith(message)


def test_cli_csv_and_table(cli):
    r = cli("lr", "--lr", "0.1", "--optimizer", "sgd", "--N", "2,8", "--gamma", "1",
            "--format", "csv")  # fmt: skip
    assert r.code == 0, r.err
    df = pd.read_csv(io.StringIO(r.out))
    assert list(df.N) == [2, 8] and list(df.matching) == ["step-size"] * 2
    assert df.focal_lr[0] == pytest.approx(0.2)  # N = 2: g = 1/2 on every active group
    assert df.focal_lr[1] == pytest.approx(0.1 / step_ratio(8, 1.0))
    t = cli("lr", "--lr", "1e-6", "--optimizer", "adam", "--format", "table")
    assert t.code == 0 and "Check:" in t.out and "normalized away" in t.out


def test_cli_from_a_log(cli, tmp_path):
    rng = np.random.default_rng(0)
    mu = rng.beta(2.0, 5.0, size=300)
    rows = [(f"q{p}", s, 6, rng.binomial(6, mu[p])) for p in range(300) for s in range(4)]
    log = tmp_path / "run.csv"
    pd.DataFrame(rows, columns=["prompt", "step", "n", "n_correct"]).to_csv(log, index=False)
    r = cli("lr", "--lr", "1e-6", "--optimizer", "adamw", "--log", str(log), "--format", "csv")
    assert r.code == 0, r.err
    df = pd.read_csv(io.StringIO(r.out))
    assert list(df.N) == [6, 6]  # the log's group size
    assert df.difficulty[0].startswith("mu ~ Beta(")
    # the fitted difficulty is close to the truth, so is the ratio
    truth = step_ratio(6, 1.0, beta=(2.0, 5.0))
    assert df.step_ratio[1] == pytest.approx(truth, abs=0.03)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--lr", "-1", "--optimizer", "sgd"], "Error: --lr must be > 0; got -1.0\n"),
        (["--lr", "1", "--optimizer", "x"], "Error: --optimizer must be one of sgd, adam, adamw"),
        (["--lr", "1", "--optimizer", "sgd", "--beta", "1"], "Error: --beta must be two numbers"),
        (["--lr", "1", "--optimizer", "sgd", "--N", "1"], "Error: --N must be >= 2"),
    ],
)
def test_cli_errors_are_one_line(cli, args, message):
    r = cli("lr", *args)
    assert r.code == 2 and r.out == ""
    assert r.err.startswith(message) and r.err.count("\n") == 1


def test_a_registered_scheme_plugs_in():
    # the schemes registry's tables(N) are exactly what step_ratio's tables take
    from fgrpo_theory.schemes import parse_scheme

    focal = parse_scheme("focal:gamma=1")
    got = step_ratio(8, tables=lambda N: focal.tables(N, r_correct=1.0, r_incorrect=0.0))
    assert got == pytest.approx(step_ratio(8, 1.0), rel=1e-12)
    grpo = parse_scheme("grpo")
    same = step_ratio(8, tables=lambda N: grpo.tables(N, r_correct=1.0, r_incorrect=0.0))
    assert same == pytest.approx(1.0, rel=1e-12)
