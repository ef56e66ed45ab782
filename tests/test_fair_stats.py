"""Paired bootstrap: hand cases, coverage at a fixed seed, bad inputs."""

from __future__ import annotations

import numpy as np
import pytest

from fgrpo_theory.fair import paired_bootstrap_interval, summarize_seeds


def test_constant_shift_gives_a_point_interval():
    a = np.array([0.3, 0.9, 0.1, 0.5, 0.7])
    est, lo, hi = paired_bootstrap_interval(a, a - 0.25)
    assert est == pytest.approx(0.25) and lo == pytest.approx(0.25) and hi == pytest.approx(0.25)


def test_two_seed_hand_case():
    # resamples of (1, 0) - (0, 0): means 1, 1/2, 1/2, 0 with probabilities 1/4, 1/2, 1/4
    est, lo, hi = paired_bootstrap_interval(
        [1.0, 0.0], [0.0, 0.0], statistic="mean", level=0.4, n_boot=20_000
    )
    assert est == 0.5 and lo == 0.5 and hi == 0.5  # central 40% lies inside the atom at 1/2
    est, lo, hi = paired_bootstrap_interval([1.0, 0.0], [0.0, 0.0], statistic="mean", level=0.9)
    assert (lo, hi) == (0.0, 1.0)


def test_pairing_matters():
    rng = np.random.default_rng(1)
    common = rng.normal(size=16) * 10  # shared seed effect, cancelled only by pairing
    a = common + 1.0 + 0.1 * rng.normal(size=16)
    b = common + 0.1 * rng.normal(size=16)
    est, lo, hi = paired_bootstrap_interval(a, b, statistic="mean")
    assert 0.5 < lo < est < hi < 1.5


def test_coverage_of_the_mean_difference_at_a_fixed_seed():
    # 400 data sets of 40 pairs, true mean difference 0.2: the 90% interval should cover it in
    # about 90% of them (percentile bootstrap runs slightly short at n = 40); 3 s.e. = 0.045
    rng = np.random.default_rng(12345)
    hits = 0
    trials = 400
    for i in range(trials):
        b = rng.normal(size=40)
        a = b + 0.2 + rng.normal(size=40)
        _, lo, hi = paired_bootstrap_interval(
            a, b, statistic="mean", level=0.9, n_boot=1000, seed=i
        )
        hits += lo <= 0.2 <= hi
    assert abs(hits / trials - 0.9) <= 0.045


def test_summary_reports_every_seed():
    s = summarize_seeds([1.0, 2.0, 3.0, 10.0])
    assert s["median"] == 2.5 and s["q25"] == 1.75 and s["q75"] == 4.75 and s["iqr"] == 3.0
    assert s["values"] == [1.0, 2.0, 3.0, 10.0] and s["n"] == 4


def test_bad_inputs():
    for kw, match in (
        (dict(a=[1.0], b=[0.0]), "at least 2 seeds"),
        (dict(a=[1.0, 2.0], b=[0.0, 1.0, 2.0]), "paired"),
        (dict(a=[1.0, np.nan], b=[0.0, 1.0]), "finite"),
        (dict(a=[1.0, 2.0], b=[0.0, 1.0], statistic="mode"), "statistic"),
        (dict(a=[1.0, 2.0], b=[0.0, 1.0], level=1.0), "level"),
        (dict(a=[1.0, 2.0], b=[0.0, 1.0], n_boot=10), "n_boot"),
    ):
        a, b = kw.pop("a"), kw.pop("b")
        with pytest.raises(ValueError, match=match) as e:
            paired_bootstrap_interval(a, b, **kw)
        assert "\n" not in str(e.value)


def test_paired_differences_pairs_only_seeds_where_both_reached():
    import pandas as pd

    from fgrpo_theory.fair import paired_differences

    rows = []
    for s, (mf, mc, rf, rc) in enumerate(
        [
            (0.5, 0.7, True, True),
            (0.4, 0.6, True, True),
            (0.9, 0.1, False, True),
            (0.3, 0.5, True, True),
        ]
    ):
        rows.append(dict(arm="focal", N=8, seed_index=s, threshold=0.9, reached=rf, m_ret=mf))
        rows.append(dict(arm="vanilla", N=8, seed_index=s, threshold=0.9, reached=rc, m_ret=mc))
    d = paired_differences(pd.DataFrame(rows), n_boot=1000)
    assert len(d) == 1 and d["pairs"].iloc[0] == 3  # seed 2 left out (focal did not reach)
    r = d.iloc[0]
    assert r["estimate"] == pytest.approx(-0.2) and r["lo"] == pytest.approx(-0.2)
    assert r["hi"] == pytest.approx(-0.2)
