"""The population group-size experiment module runs in fast mode and draws its figure."""

from __future__ import annotations

import numpy as np


def test_population_group_size_fast():
    from experiments import population_group_size as m

    assert m.IN_PAPER is False and m.TITLE and m.COST_SECONDS > 0
    df = m.compute(m.PARAMS, fast=True)
    s = m.summary(df)
    arms = set(s["arm"])
    assert arms == {"grpo", "focal", "control"}
    # held-out prompts cannot move at the tabular end (theta frozen)
    tab = s[(s.sharing == "tabular") & (s.split == "test")]
    assert np.ptp(tab["pass_at_1"]) == 0.0 and (tab["rare_nll_rise"] == 0.0).all()
    snr = df[df.arm == "snr"]
    assert ((snr["snr_theta"] > 0) & (snr["snr_theta"] < 1)).all()
    fig = m.plot(df, m.PARAMS)
    assert len(fig.axes) == 9
