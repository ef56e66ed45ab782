"""Matched controls: m and h multipliers, h against exact enumeration, progress matching."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest

from fgrpo_theory.fair import (
    arm_configs,
    h_multiplier,
    h_value,
    m_multiplier,
    match_progress,
)
from fgrpo_theory.sim import SimConfig, simulate

LOGITS = np.array([1.0, 0.2, -0.3, 0.5])
CORRECT = np.array([True, True, False, False])


def _small(**kw):
    base = dict(
        K=4, logits="1.0x1,0.2x1,-0.3x1,0.5x1", correct="0,1", N=5, gamma=1.0,
        advantage="grpo", optimizer="sgd", lr=0.1, steps=1,
    )  # fmt: skip
    base.update(kw)
    return SimConfig(**base)


def test_h_hand_case_n2():
    # N = 2: only X = 1 is active, sqrt(1 * 1) = 1, pmf 2 mu (1 - mu), g = 1/2 at gamma = 1
    mu = 0.37
    assert h_value(2, mu, 0.0) == pytest.approx(mu * (1 - mu), rel=1e-14)
    assert h_value(2, mu, 1.0) == pytest.approx(0.5 * mu * (1 - mu), rel=1e-14)


def test_m_multiplier_gamma1_is_half():
    # B(3/2, 5/2) / B(3/2, 3/2) = 1/2 (appendix N)
    assert m_multiplier(1.0) == pytest.approx(0.5, rel=1e-14)


def _expected_dz(eta: float, gamma: float, N: int) -> np.ndarray:
    """E[dz] of the log-prob update by exact enumeration of all group outcomes (fgrpo_theory.mass).

    With a zero-sum advantage sum_k dz_k = 0, so dz_j = log p'_j - mean_k log p'_k - (z_j - mean z).
    """
    from fgrpo_theory.mass import expected_change

    def centred_logp(j, p):
        lp = np.log(p)
        return lp[j] - lp.mean()

    qs = [partial(centred_logp, j) for j in range(LOGITS.size)]
    res = expected_change(
        LOGITS, CORRECT, N, eta, qs, rule="logprob", advantage="grpo", gamma=gamma,
        method="enumerate",
    )  # fmt: skip
    means = np.array([res.mean[f"quantity_{j}"] for j in range(LOGITS.size)])
    return means - (LOGITS - LOGITS.mean())


@pytest.mark.parametrize("N", [3, 5])
def test_h_ratio_control_matches_focal_expected_first_step(N):
    cfg = _small(N=N)
    c = h_multiplier(cfg)
    focal = _expected_dz(0.1, 1.0, N)
    vanilla_same_lr = _expected_dz(0.1, 0.0, N)
    vanilla_h = _expected_dz(0.1 * c, 0.0, N)
    np.testing.assert_allclose(vanilla_h, focal, rtol=1e-9, atol=1e-15)
    assert not np.allclose(vanilla_same_lr, focal, rtol=1e-3)  # the control is not trivial
    arms = dict((a, (m, c_)) for a, m, c_ in arm_configs(cfg, ["h"]))
    assert arms["vanilla-h"][1].lr == pytest.approx(0.1 * c, rel=1e-15)
    assert arms["vanilla-h"][1].gamma == 0.0


def test_progress_matching_reaches_equal_final_q_pos():
    cfg = SimConfig(
        K=50, logits="2.0x1,1.0x9,0.0x40", correct="0..9", N=16, steps=150, gamma=1.0,
        optimizer="adam", lr=1e-2, advantage="dr-grpo", seeds=4,
    )  # fmt: skip
    pm = match_progress(cfg, q_tol=2e-3)
    assert pm.matched and pm.monotone
    assert abs(pm.achieved - pm.target) <= pm.q_tol
    # independent re-run at the matched lr and of the focal run
    last = lambda d: float(np.median(d[d["step"] == d["step"].max()]["q_pos"]))  # noqa: E731
    assert last(simulate(cfg)) == pytest.approx(pm.target, abs=1e-15)
    assert abs(last(simulate(cfg.replace(gamma=0.0, lr=pm.lr))) - pm.target) <= pm.q_tol
    # and the match is not trivial: vanilla at the focal lr misses the target
    assert abs(last(simulate(cfg.replace(gamma=0.0))) - pm.target) > pm.q_tol


def test_bad_inputs_one_line_errors():
    for bad, match in (
        (lambda: h_multiplier(_small(gamma=0.0)), "gamma"),
        (lambda: h_value(0, 0.3, 1.0), "N"),
        (lambda: arm_configs(_small(), ["q"]), "controls"),
        (lambda: arm_configs(_small(), ["progress"]), "progress"),
        (lambda: match_progress(_small(), q_tol=0.0), "q_tol"),
    ):
        with pytest.raises(ValueError, match=match) as e:
            bad()
        assert "\n" not in str(e.value)
