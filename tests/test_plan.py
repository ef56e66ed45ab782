"""``plan``: closed forms against hand values and exact enumeration; the CLI; its errors."""

from __future__ import annotations

import io
import itertools
import math

import numpy as np
import pandas as pd
import pytest

from fgrpo_theory.plan import PLAN_COLUMNS, parse_difficulty, plan_table


def _csv(r) -> pd.DataFrame:
    assert r.code == 0, r.err
    return pd.read_csv(io.StringIO(r.out))


def test_beta_n2_hand_values():
    # Beta(2, 5): E[mu^2] = 2*3/(7*8), E[(1-mu)^2] = 5*6/(7*8)
    tab = plan_table("beta:2,5", [2], B=3, dynamic_sampling=["off", "dapo"])
    p_mixed = 1 - 6 / 56 - 30 / 56
    off, dapo = tab.iloc[0], tab.iloc[1]
    assert off.p_mixed == pytest.approx(p_mixed, rel=1e-13)
    assert off.zero_adv_fraction == pytest.approx(1 - p_mixed, rel=1e-13)
    assert off.p_keep == 1.0 and off.gens_per_kept_group == 2.0 and off.gens_per_step == 6.0
    assert dapo.p_keep == pytest.approx(p_mixed, rel=1e-13)
    assert dapo.zero_adv_fraction == 0.0
    assert dapo.gens_per_step == pytest.approx(3 * 2 / p_mixed, rel=1e-13)
    # N = 2, tau = rho mu: Pr(B) = 2 (mu - tau)(1 - mu), E = 2 (1 - rho) E[mu (1 - mu)]
    e = 2 * (1 - 0.05) * (2 * 5 / (7 * 8))
    assert off.p_tail_miss == pytest.approx(e, rel=1e-12)
    assert dapo.p_tail_miss_kept == pytest.approx(e / p_mixed, rel=1e-12)
    # focal gamma = 1, N = 2: the only mixed group has X = 1, g = 1/2
    assert off.lr_multiplier == pytest.approx(0.5, rel=1e-12)


def test_rates_file_is_an_exact_mixture(tmp_path):
    rates = [0.0, 0.1, 0.35, 0.8, 1.0]
    f = tmp_path / "pre.csv"
    pd.DataFrame({"prompt": range(5), "pass_rate": rates}).to_csv(f, index=False)
    tab = plan_table(parse_difficulty(str(f)), [3], rho=[0.5], dynamic_sampling=["off", "verl"])
    # exact enumeration over prompts and the 3^3 region patterns of a group
    p_mixed = p_miss = 0.0
    for mu in rates:
        probs = [0.5 * mu, 0.5 * mu, 1 - mu]  # rare, other correct, incorrect
        for pat in itertools.product(range(3), repeat=3):
            p = math.prod(probs[k] for k in pat) / len(rates)
            x = sum(k < 2 for k in pat)
            if 0 < x < 3:
                p_mixed += p
                p_miss += p * (0 not in pat)
    assert tab.iloc[0].p_mixed == pytest.approx(p_mixed, rel=1e-12)
    assert tab.iloc[0].p_tail_miss == pytest.approx(p_miss, rel=1e-12)
    assert tab.iloc[1].p_tail_miss_kept == pytest.approx(p_miss / p_mixed, rel=1e-12)
    counts = tmp_path / "counts.csv"
    pd.DataFrame({"n": [10, 10], "c": [0, 5]}).to_csv(counts, index=False)
    t2 = plan_table(parse_difficulty("rates:" + str(counts)), [2], dynamic_sampling="off")
    assert t2.iloc[0].p_mixed == pytest.approx(0.5 * 0.5, rel=1e-13)


def test_log_fit_difficulty(tmp_path):
    rng = np.random.default_rng(3)
    mu = rng.beta(2, 5, 400)
    rows = [(f"q{p}", s, 8, rng.binomial(8, mu[p])) for p in range(400) for s in range(4)]
    f = tmp_path / "log.csv"
    pd.DataFrame(rows, columns=["prompt", "step", "n", "n_correct"]).to_csv(f, index=False)
    d = parse_difficulty("log:" + str(f))
    assert d.beta is not None and 1.5 < d.beta[0] < 2.7 and 3.8 < d.beta[1] < 6.5


def test_plan_matches_monte_carlo_in_validate():
    from fgrpo_theory.validation._plan import _checks_plan

    rows = _checks_plan(20_000)
    assert len(rows) >= 20 and all(r.passed for r in rows), [r for r in rows if not r.passed]


def test_cli_plan_table_and_budget(cli):
    df = _csv(cli("plan", "--difficulty", "beta:2,5", "--N", "2..64:x2", "--budget", "256",
                  "--format", "csv"))  # fmt: skip
    assert list(df.columns) == list(PLAN_COLUMNS)
    assert sorted(set(df.N)) == [2, 4, 8, 16, 32, 64]
    assert (df.B * df.N == 256).all()
    assert set(df.dynamic_sampling) == {"off", "dapo", "verl", "openrlhf"}
    # more rollouts per group: more mixed groups, a smaller dynamic-sampling overhead
    off = df[df.dynamic_sampling == "off"]
    assert off.p_mixed.is_monotonic_increasing
    r = cli("plan", "--difficulty", "beta:2,5", "--format", "json")
    assert r.code == 0 and r.out.lstrip().startswith("[")


@pytest.mark.parametrize(
    "args, words",
    [
        (["--difficulty", "beta:2"], "--difficulty must be beta:A,B"),
        (["--difficulty", "beta:2,5", "--N", "1"], "--N must be"),
        (["--difficulty", "beta:2,5", "--N", "3", "--budget", "16"], "--N must be a divisor"),
        (["--difficulty", "beta:2,5", "--B", "2", "--budget", "16"], "--B must be given without"),
        (["--difficulty", "beta:2,5", "--rho", "1.5"], "--rho must be in (0, 1)"),
        (["--difficulty", "beta:2,5", "--dynamic-sampling", "x"], "--dynamic-sampling must be"),
        (["--difficulty", "nofile.csv"], "--difficulty must be an existing file"),
    ],
)
def test_cli_plan_errors_one_line(cli, args, words):
    r = cli("plan", *args)
    assert r.code == 2
    line = r.err.strip()
    assert "\n" not in line and words in line, line
