"""The Fig. 2 presets name one non-anchor correct action (subset ``one``), so the simulator counts
Fig. 5's single-action event B; at the first step its frequency must be Lemma 3.1's Pr(B) at the
start state (issue 11 item 3). Oracle: tail_miss_probability (checked against mpmath elsewhere),
Monte Carlo tolerance from the binomial standard error at a fixed seed."""

from __future__ import annotations

import numpy as np
import pytest

from fgrpo_theory.sim import expand_grid, simulate
from fgrpo_theory.sim.presets import load_preset
from fgrpo_theory.tail_miss import tail_miss_probability


@pytest.mark.slow
@pytest.mark.parametrize("name", ["fig2-logprob-adam", "fig2-linear-adamw"])
def test_first_step_single_action_tail_miss_is_lemma_3_1(name):
    sweep = load_preset(name)
    assert sweep["subsets"]["one"] == "1"
    sweep.update(N=8, gamma=0.0, steps=1, seeds=1000, log_steps=[0, 1])
    (cfg,) = expand_grid(sweep)
    df = simulate(cfg)
    first = df[df.step == 1]
    groups = int(first["groups"].sum())
    freq = first["tail_miss_one"].sum() / groups
    start = df[df.step == 0].iloc[0]
    p = float(tail_miss_probability(8, start["q_pos"], start["mass_one"]))
    se = np.sqrt(p * (1 - p) / groups)
    assert groups == 1000 and abs(freq - p) < 4 * se, (freq, p, se)
