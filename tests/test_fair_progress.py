"""Equal-progress metrics against hand-built logs; the rare NLL; bad inputs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fgrpo_theory.fair import run_comparison, threshold_metrics
from fgrpo_theory.fair.progress import check_thresholds, mean_nll_from_logits, rare_nll_rise
from fgrpo_theory.sim import SimConfig


def _log():
    # run 0 reaches 0.7 at step 2 and 0.9 at step 4 (dips in between); run 1 never reaches 0.9
    q0 = [0.6, 0.65, 0.72, 0.69, 0.91, 0.95]
    q1 = [0.6, 0.62, 0.70, 0.80, 0.85, 0.88]
    rows = []
    for run, q in enumerate((q0, q1)):
        for step, v in enumerate(q):
            rows.append(
                dict(
                    run=run,
                    seed_index=run,
                    arm="focal",
                    step=step,
                    q_pos=v,
                    m_ret=1.0 - 0.1 * step - 0.01 * run,
                    mass_one=0.01 / (1 + step),
                    mass_rare=0.2 / (1 + step),
                )  # fmt: skip
            )
    return pd.DataFrame(rows)


def test_threshold_metrics_hand_log():
    out = threshold_metrics(_log(), [0.7, 0.9], rare={"one": 1, "rare": 5})
    out = out.set_index(["seed_index", "threshold"])
    r = out.loc[(0, 0.7)]
    assert r["reached"] and r["step"] == 2 and r["q_pos"] == 0.72
    assert r["m_ret"] == pytest.approx(0.8)
    assert r["nll_rise_one"] == pytest.approx(np.log(3.0))  # -log((0.01/3)/0.01)
    assert r["nll_of_mean_rise_rare"] == pytest.approx(np.log(3.0))
    assert "nll_rise_rare" not in out.columns  # a 5-action subset has no exact NLL from masses
    assert out.loc[(0, 0.9)]["step"] == 4
    assert out.loc[(1, 0.7)]["step"] == 2
    miss = out.loc[(1, 0.9)]
    assert not miss["reached"] and miss["step"] == -1
    assert miss["q_pos"] == 0.88  # last logged values, never NaN
    assert not out.isna().any().any()


def test_rare_nll_single_action_exact_against_logits():
    z0 = np.array([2.0, 0.5, -1.0, 0.0])
    z1 = np.array([2.5, 0.1, -1.2, 0.3])
    p = lambda z: np.exp(z) / np.exp(z).sum()  # noqa: E731
    exact = mean_nll_from_logits(z1, [1]) - mean_nll_from_logits(z0, [1])
    assert float(rare_nll_rise(p(z1)[1], p(z0)[1], 1)) == pytest.approx(exact, rel=1e-12)


def test_threshold_metrics_on_a_simulated_every_step_log():
    from fgrpo_theory.fair import run_arms

    cfg = SimConfig(
        K=20, logits="1.0x2,0.0x18", correct="0..4", subsets={"one": "3"}, N=8, steps=60,
        optimizer="adam", lr=0.05, gamma=1.0,
    )  # fmt: skip
    log = run_arms(cfg, controls=["m"], seeds=2)
    assert set(log["arm"]) == {"focal", "vanilla", "vanilla-m"}
    assert (log["step"].groupby([log["arm"], log["run"]]).nunique() == 61).all()  # every step
    vm = log[log["arm"] == "vanilla-m"]
    assert (vm["lr"] == 0.025).all() and (vm["lr_multiplier"] == 0.5).all()
    res = threshold_metrics(log, [0.5, 0.9], rare={"one": 1})
    assert len(res) == 3 * 2 * 2
    for _, r in res.iterrows():  # brute force: filter the log directly
        run = log[(log["arm"] == r["arm"]) & (log["seed_index"] == r["seed_index"])]
        hit = run[run["q_pos"] >= r["threshold"]]
        assert r["reached"] == (len(hit) > 0)
        if len(hit):
            first = hit.loc[hit["step"].idxmin()]
            assert r["step"] == first["step"] and r["m_ret"] == first["m_ret"]
            m0 = run.loc[run["step"] == 0, "mass_one"].iloc[0]
            assert r["nll_rise_one"] == pytest.approx(-np.log(first["mass_one"] / m0))


def test_bad_thresholds_and_subsets():
    for bad in ([0.0, 0.5], [1.0], [], [float("nan")], [-0.2]):
        with pytest.raises(ValueError, match="thresholds") as e:
            check_thresholds(bad)
        assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="rare"):
        threshold_metrics(_log(), [0.7], rare={})
    with pytest.raises(ValueError, match="rare"):
        threshold_metrics(_log(), [0.7], rare={"one": 0})
    with pytest.raises(ValueError, match="rare"):
        threshold_metrics(_log(), [0.7], rare={"nosuch": 1})
    with pytest.raises(ValueError, match="subset"):
        rare_nll_rise(0.1, 0.2, 0)
    with pytest.raises(ValueError, match="subset"):
        mean_nll_from_logits([0.0, 1.0], [])


def test_run_comparison_refuses_one_seed_before_simulating():
    cfg = SimConfig(K=6, N=4, gamma=1.0, steps=5)
    with pytest.raises(ValueError, match="seeds") as e:
        run_comparison(cfg, seeds=1)
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="gamma"):
        run_comparison(cfg.replace(gamma=0.0), seeds=2)
