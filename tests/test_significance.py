"""compare-passk: paired m-out-of-n subsampling (theory.md section 14, issue 13 part 2).

Oracles: Monte Carlo calibration at fixed seeds (coverage of 0 under no difference, within its
binomial standard error), a planted difference, the hypergeometric law of the subsample counts
checked by a direct per-iteration loop, and hand-written bad inputs.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.stats import hypergeom

from fgrpo_theory.cli import main
from fgrpo_theory.passk import pass_at_k
from fgrpo_theory.significance import _hypergeom_cdf, compare_passk


def _pair(seed, P=60, n=64, shift=0.0):
    rng = np.random.default_rng(seed)
    mu = rng.beta(1, 3, P)
    ca = rng.binomial(n, mu)
    cb = rng.binomial(n, np.clip(mu + shift, 0, 1))
    return np.full(P, n), ca, np.full(P, n), cb


def test_no_difference_interval_covers_zero_at_the_nominal_rate():
    reps = 200
    cover = np.zeros(2)
    cover_paper = np.zeros(2)
    for r in range(reps):
        res = compare_passk(*_pair(5000 + r), [1, 4], m=16, iterations=500, seed=r)
        cover += (res["ci_low"] <= 0) & (res["ci_high"] >= 0)
        cover_paper += (res["paper_ci_low"] <= 0) & (res["paper_ci_high"] >= 0)
    se = np.sqrt(0.95 * 0.05 / reps)
    assert np.all(np.abs(cover / reps - 0.95) <= 3 * se), cover / reps
    # the paper's raw percentile interval is conservative (subsamples vary more than the data)
    assert np.all(cover_paper / reps >= 0.95)


def test_known_difference_is_detected():
    res = compare_passk(*_pair(7, P=200, shift=0.1), [1, 4], m=16, iterations=2000, seed=1)
    assert np.all(res["significant"])
    assert np.all(res["p_value"] < 0.01)
    assert np.all(res["difference"] > 0)


def test_point_estimates_and_reproducibility():
    na, ca, nb, cb = _pair(3)
    res = compare_passk(na, ca, nb, cb, [1, 8], m=16, iterations=300, seed=4)
    for i, k in enumerate((1, 8)):
        assert res["pass_a"][i] == pytest.approx(np.mean(pass_at_k(na, ca, k)), rel=1e-14)
        assert res["pass_b"][i] == pytest.approx(np.mean(pass_at_k(nb, cb, k)), rel=1e-14)
    again = compare_passk(na, ca, nb, cb, [1, 8], m=16, iterations=300, seed=4)
    for key in res:
        np.testing.assert_array_equal(res[key], again[key])


def test_subsample_draws_are_hypergeometric():
    cdf = _hypergeom_cdf(20, 7, 5)
    u = np.random.default_rng(0).random(200_000)
    draws = np.searchsorted(cdf, u, side="right")
    freq = np.bincount(draws, minlength=6) / u.size
    pmf = hypergeom.pmf(np.arange(6), 20, 7, 5)
    se = np.sqrt(pmf * (1 - pmf) / u.size)
    assert np.all(np.abs(freq - pmf) <= 4 * se + 1e-12)


def test_subsample_spread_matches_a_direct_loop():
    # reference: per iteration, draw m generations without replacement from explicit 0/1 lists
    na, ca, nb, cb = _pair(9, P=10, n=32)
    res = compare_passk(na, ca, nb, cb, [2], m=8, iterations=1500, seed=2)
    rng = np.random.default_rng(99)
    gens_a = [np.r_[np.ones(c), np.zeros(n - c)] for n, c in zip(na, ca, strict=True)]
    gens_b = [np.r_[np.ones(c), np.zeros(n - c)] for n, c in zip(nb, cb, strict=True)]
    diffs = []
    for _ in range(1500):
        ja = [int(rng.choice(g, 8, replace=False).sum()) for g in gens_a]
        jb = [int(rng.choice(g, 8, replace=False).sum()) for g in gens_b]
        diffs.append(np.mean(pass_at_k(8, jb, 2)) - np.mean(pass_at_k(8, ja, 2)))
    sd = np.std(diffs, ddof=1)
    # the ratio of two independent 1500-draw standard deviations has SE ~ 1/sqrt(1500)
    assert abs(res["subsample_sd"][0] / sd - 1) < 4 / np.sqrt(1500)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(k=[300]), r"^k must be <= m = 16; got 300$"),
        (dict(m=100), r"^m must be <= the smallest number of generations \(64\); got 100$"),
        (dict(m=64), r"^m must be < the mean number of generations"),
        (dict(iterations=10), r"^iterations must be >= 100; got 10$"),
        (dict(alpha=1.5), r"^alpha must be in \(0, 1\); got 1.5$"),
    ],
)
def test_bad_arguments(kwargs, message):
    na, ca, nb, cb = _pair(1)
    args = dict(k=[1], m=16, iterations=200) | kwargs
    with pytest.raises(ValueError, match=message):
        compare_passk(na, ca, nb, cb, **args)
    with pytest.raises(ValueError, match=r"^c_a must be <= n = 64 \(problem 0\); got 65$"):
        compare_passk([64, 64], [65, 1], [64, 64], [1, 1], 1, m=16, iterations=200)
    with pytest.raises(
        ValueError, match=r"^c_b must be of the length of n_a \(2\); got 'length 1'"
    ):
        compare_passk([64, 64], [5, 1], [64, 64], [1], 1, m=16, iterations=200)


def test_cli(tmp_path, capsys):
    na, ca, nb, cb = _pair(7, P=50, shift=0.2)
    (tmp_path / "a.csv").write_text(
        "problem,n,c\n"
        + "".join(f"p{i},{n},{c}\n" for i, (n, c) in enumerate(zip(na, ca, strict=True)))
    )
    (tmp_path / "b.csv").write_text(
        "problem,n,c\n"
        + "".join(f"p{i},{n},{c}\n" for i, (n, c) in enumerate(zip(nb, cb, strict=True)))
    )
    code = main(
        [
            "compare-passk",
            str(tmp_path / "a.csv"),
            str(tmp_path / "b.csv"),
            "--k",
            "1,4",
            "--m",
            "16",
            "--iterations",
            "500",
            "--format",
            "json",
        ]
    )
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert [r["k"] for r in out] == [1, 4] and all(r["significant"] for r in out)
    (tmp_path / "bad.csv").write_text("problem,n,correct\np0,64,3\n")
    assert main(["compare-passk", str(tmp_path / "a.csv"), str(tmp_path / "bad.csv")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("Error: B must be a file with columns problem,n,c (missing; there: ")
    assert err.count("\n") == 1
