"""The population group-size experiment module runs in fast mode and draws its figure."""

from __future__ import annotations

import numpy as np


def test_population_group_size_fast():
    from experiments import population_group_size as m

    assert m.IN_PAPER is False and m.TITLE and m.COST_SECONDS > 0
    df = m.compute(m.PARAMS, fast=True)
    s = m.summary(df)
    arms = set(s["arm"])
    assert arms == {"grpo", "focal", "control", "control-progress"}
    # held-out prompts cannot move at the tabular end (theta frozen)
    tab = s[(s.sharing == "tabular") & (s.split == "test")]
    assert np.ptp(tab["pass_at_1"]) == 0.0 and (tab["rare_nll_rise"] == 0.0).all()
    snr = df[df.arm == "snr"]
    assert ((snr["snr_theta"] > 0) & (snr["snr_theta"] < 1)).all()
    fig = m.plot(df, m.PARAMS)
    assert len(fig.axes) == 12  # published, shared and tabular Adam, paired differences
    # the paired row: per-draw focal minus control, read back from the table by hand
    pr = m.paired(df, m.PARAMS)
    r = pr[(pr.sharing == "tabular") & (pr.optimizer == "adam") & (pr.gamma == 1.0)
           & (pr.metric == "pass_at_1") & (pr.control == "control")].iloc[0]  # fmt: skip
    d = df[(df.sharing == "tabular") & (df.optimizer == "adam") & (df.split == "train")
           & (df.bucket == "all") & (df.gamma == 1.0)]  # fmt: skip
    assert r.draws == 2 and r.seeds == 2
    for i, s in enumerate(sorted(d.population_seed.unique())):
        e = d[d.population_seed == s]
        f = np.median(100.0 * e[e.arm == "focal"]["pass_at_1"].to_numpy())
        c = np.median(100.0 * e[e.arm == "control"]["pass_at_1"].to_numpy())
        assert r.draw_diffs[i] == f - c
    assert r.lo <= r["median"] <= r.hi
