"""Progress matching: the generic search (match_factor) and the population control built on it.

Oracles: a monotone function with a known root (hand case), and the population simulator itself
rerun at the returned factor (the achieved progress must be the simulator's own number).
"""

from __future__ import annotations

import math

import pytest

from fgrpo_theory.fair import match_factor
from fgrpo_theory.population import PopulationConfig, match_progress_population
from fgrpo_theory.population.matching import final_median
from fgrpo_theory.population.runner import simulate_population


@pytest.mark.parametrize("start", [1.0, 0.01, 40.0])
def test_match_factor_finds_a_known_root(start):
    """progress(x) = 1 - exp(-x) reaches 0.5 at x = ln 2, from either side of the root."""
    m = match_factor(lambda x: 1.0 - math.exp(-x), 0.5, start=start, tol=1e-6)
    assert m.matched and m.monotone and abs(m.lr - math.log(2.0)) < 1e-5
    assert m.multiplier == pytest.approx(m.lr / start)
    assert len(m.evaluations) <= 14 and abs(m.error) <= 1e-6


def test_match_factor_reports_a_non_monotone_progress():
    m = match_factor(lambda x: math.sin(3.0 * x), 0.2, start=1.0, tol=1e-9, max_evals=8)
    assert not m.monotone


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(tol=0.0), r"^q_tol must be > 0"),
        (dict(max_evals=2), r"^max_evals must be an integer in \[3, 100\]; got 2$"),
        (dict(start=-1.0), r"^start must be > 0"),
    ],
)
def test_match_factor_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        match_factor(lambda x: x, 0.5, **kwargs)


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_population_progress_match_achieves_its_target(optimizer):
    lr = 0.5 if optimizer == "sgd" else 0.02
    cfg = PopulationConfig(P=32, P_test=8, K=16, B=8, N=8, gamma=1.0, steps=40, seeds=4,
                           optimizer=optimizer, lr_shared=lr, lr_prompt=lr)  # fmt: skip
    m = match_progress_population(cfg, tol=1e-3)
    assert m.matched and m.monotone and 0 < m.multiplier
    focal = final_median(simulate_population(cfg))
    assert m.target == focal
    vanilla = cfg.replace(gamma=0.0, lr_shared=lr * m.multiplier, lr_prompt=lr * m.multiplier)
    assert final_median(simulate_population(vanilla)) == pytest.approx(m.achieved, abs=1e-15)
    assert abs(m.achieved - focal) <= 1e-3


def test_population_progress_match_refuses_a_vanilla_config():
    with pytest.raises(ValueError, match=r"^gamma must be > 0"):
        match_progress_population(PopulationConfig(gamma=0.0))
    with pytest.raises(ValueError, match=r"^cfg must be a PopulationConfig"):
        match_progress_population("x")


def test_population_progress_match_reads_the_given_runs_instead_of_simulating(monkeypatch):
    """``focal`` and ``vanilla`` (the run at c = 1) are read, not simulated again; the match is
    the same as without them."""
    import fgrpo_theory.population.matching as matching

    cfg = PopulationConfig(P=32, P_test=8, K=16, B=8, N=8, gamma=1.0, steps=40, seeds=4,
                           optimizer="adam", lr_shared=0.02, lr_prompt=0.02)  # fmt: skip
    ran = []
    real = matching.final_metrics
    monkeypatch.setattr(matching, "final_metrics", lambda c, **kw: ran.append(c) or real(c, **kw))
    alone = match_progress_population(cfg, tol=1e-3)
    n_alone = len(ran)
    ran.clear()
    focal = simulate_population(cfg)
    vanilla = simulate_population(cfg.replace(gamma=0.0))
    given = match_progress_population(cfg, tol=1e-3, focal=focal, vanilla=vanilla)
    assert given == alone
    assert len(ran) == n_alone - 2  # neither the focal run nor the first point simulated
    assert all(c.gamma == 0.0 and c.lr_shared != cfg.lr_shared for c in ran)


def test_population_progress_match_through_a_simulate_fn_is_the_same_match():
    """Points read from the tables ``simulate_fn`` returns (any logging) give the match that
    final_metrics gives, evaluation for evaluation."""
    cfg = PopulationConfig(P=32, P_test=8, K=16, B=8, N=8, gamma=1.0, steps=40, seeds=4,
                           optimizer="adam", lr_shared=0.02, lr_prompt=0.02)  # fmt: skip
    seen = []

    def sim(c):
        seen.append(c)
        return simulate_population(c.replace(log_every=10))

    alone = match_progress_population(cfg, tol=1e-3)
    given = match_progress_population(cfg, tol=1e-3, simulate_fn=sim)
    assert given == alone
    assert len(seen) == len(alone.evaluations) + 1  # the focal run and every point


def test_group_size_sweep_rows_are_the_runs_at_their_own_logging_and_none_is_run_twice(
    monkeypatch,
):
    """Each arm's last-step rows equal a direct run of its config with the base's logging (every
    10th step: the counters cover the same last interval), bit for bit; no config is trained
    twice (the progress search's matched point is the control's run)."""
    import numpy as np

    import fgrpo_theory.population.analysis as analysis
    from fgrpo_theory.population.config import population_config_hash

    base = PopulationConfig(P=32, P_test=8, K=16, B=8, N=8, steps=40, seeds=3, log_every=10,
                            optimizer="adam", lr_shared=0.02, lr_prompt=0.02)  # fmt: skip
    assert analysis._last_row_config(base).log_schedule().tolist() == [0, 30, 40]
    odd = base.replace(steps=47)  # 0, 10, ..., 40, 47: the last interval is 7 steps
    assert analysis._last_row_config(odd).log_schedule().tolist() == [0, 40, 47]
    short = base.replace(steps=20)
    assert analysis._last_row_config(short) == short
    import fgrpo_theory.population.matching as matching

    ran = []
    real = analysis.simulate_population
    monkeypatch.setattr(
        analysis, "simulate_population", lambda c, **kw: ran.append(c) or real(c, **kw)
    )
    searched = []
    real_match = matching.match_progress_population

    def match(*a, **kw):
        m = real_match(*a, **kw)
        searched.append(m)
        return m

    monkeypatch.setattr(matching, "match_progress_population", match)
    monkeypatch.setattr(matching, "final_metrics", None)  # every point through the sweep's runs
    df = analysis.group_size_sweep(base, Ns=(2, 8), focal_N=8, gammas=(1.0,))
    hashes = [population_config_hash(c) for c in ran]
    assert len(set(hashes)) == len(hashes)
    # the runs: 2 grpo, focal, control, and the search's points but its first (the grpo arm at
    # N = 8); the control-progress arm is one of those points, not a run of its own
    (m,) = searched
    assert len(ran) == 4 + len(m.evaluations) - 1
    assert (df["arm"] == "control-progress").any()
    assert all(c.log_schedule().tolist() == [0, 30, 40] for c in ran)
    assert set(df["arm"]) == {"grpo", "focal", "control", "control-progress"}
    metrics = ["pass_at_1", "pass_at_256", "coverage_at_256", "rare_nll", "rare_nll_rise",
               "entropy", "groups", "resamples", "active_frac", "tail_miss_rate"]  # fmt: skip
    for (arm, n, g, c), rows in df.groupby(["arm", "N", "gamma_arm", "lr_factor"]):
        cfg = base.replace(N=int(n), gamma=g if arm == "focal" else 0.0,
                           lr_shared=base.lr_shared * c, lr_prompt=base.lr_prompt * c)  # fmt: skip
        want = real(cfg)
        want = want[want["step"] == base.steps]
        np.testing.assert_array_equal(rows[metrics].to_numpy(), want[metrics].to_numpy())
