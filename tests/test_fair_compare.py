"""Matched comparisons on the kernel's equal-progress metrics (issue 11 items 1, 2, 4).

Oracles: the log-based :func:`fgrpo_theory.fair.threshold_metrics` on every-step logs of the same
arms and seeds; :func:`fgrpo_theory.fair.paired_differences` and NumPy medians for the summary.
"""

from __future__ import annotations

import io
import json

import numpy as np
import pandas as pd
import pytest

from fgrpo_theory.fair import (
    paired_differences,
    run_arms,
    run_comparison,
    summarize_comparison,
    threshold_metrics,
)
from fgrpo_theory.sim import SimConfig

CFG = SimConfig(
    K=20, logits="1.0x2,0.0x18", correct="0..4", subsets={"one": "3", "two": "3,7"}, N=8,
    steps=80, optimizer="adam", lr=0.05, gamma=1.0,
)  # fmt: skip
T = (0.5, 0.85, 0.9, 0.999)


@pytest.fixture(scope="module")
def comparison():
    return run_comparison(CFG, ["m", "h"], seeds=3, thresholds=T)


def test_kernel_comparison_equals_log_based_metrics(comparison):
    log = run_arms(CFG, ["m", "h"], seeds=3, log_every=1)  # every step logged
    oracle = threshold_metrics(log, T, rare={"one": 1})
    m = comparison.merge(
        oracle, on=["arm", "seed_index", "threshold"], suffixes=("", "_log"), validate="1:1"
    )
    assert len(m) == len(comparison) == 4 * 3 * len(T)
    assert (m["reached"] == m["reached_log"]).all() and (m["step"] == m["step_log"]).all()
    assert m["reached"].any() and not m["reached"].all()
    hit = m[m["reached"]]
    for col in ("q_pos", "m_ret", "mass_one", "nll_rise_one"):
        np.testing.assert_allclose(hit[col], hit[f"{col}_log"], rtol=0, atol=1e-12)
    assert comparison.loc[~comparison["reached"], "m_ret"].isna().all()  # never imputed
    last = log[log["step"] == CFG.steps].set_index(["arm", "seed_index"])
    fin = comparison.drop_duplicates(["arm", "seed_index"]).set_index(["arm", "seed_index"])
    np.testing.assert_array_equal(fin["final_q_pos"], last.loc[fin.index, "q_pos"])
    # arms and their step sizes
    lr = comparison.groupby("arm")["lr"].first()
    assert set(lr.index) == {"focal", "vanilla", "vanilla-m", "vanilla-h"}
    assert lr["vanilla-m"] == CFG.lr / 2 and lr["vanilla"] == CFG.lr
    mult = comparison.groupby("arm")["lr_multiplier"].first()
    assert mult["vanilla-h"] == pytest.approx(lr["vanilla-h"] / CFG.lr, rel=1e-15)
    assert (comparison.loc[comparison["arm"] != "focal", "gamma"] == 0).all()


def test_summary_against_numpy_and_paired_differences(comparison):
    s = summarize_comparison(comparison)
    assert set(s["quantity"]) == {"final_q_pos", "final_m_ret"} | {f"m_ret@{t:g}" for t in T}
    json.dumps(s.to_dict(orient="records"), allow_nan=False)  # no NaN anywhere
    d = paired_differences(comparison)
    for _, r in s.iterrows():
        a = comparison[comparison["arm"] == r["arm"]]
        if r["quantity"].startswith("final"):
            x = a.drop_duplicates("seed_index")[r["quantity"]]
        else:
            t = float(r["quantity"].split("@")[1])
            x = a.loc[(a["threshold"] == t) & a["reached"], "m_ret"]
        assert r["seeds"] == len(x)
        if len(x):
            assert r["median"] == pytest.approx(np.median(x), rel=1e-15)
        else:
            assert r["median"] is None
        if r["focal_minus_arm"] is not None:
            e = d[(d["control"] == r["arm"]) & (d["threshold"] == t)].iloc[0]
            assert (r["focal_minus_arm"], r["lo"], r["hi"]) == (e["estimate"], e["lo"], e["hi"])
            assert r["pairs"] == e["pairs"] >= 2


def test_controls_config_field():
    c = SimConfig(gamma=1.0, controls="progress,m,m")
    assert c.controls == ("m", "progress")
    assert SimConfig(gamma=1.0, controls=["h"]).to_dict()["controls"] == ["h"]
    with pytest.raises(ValueError, match=r"^controls must be empty when gamma = 0") as e:
        SimConfig(controls=["m"])
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="^controls must be a list of m, h, progress; got 'x'"):
        SimConfig(gamma=1.0, controls=["x"])
    res = run_comparison(CFG.replace(controls=("m",), steps=20), seeds=2, thresholds=[0.5])
    assert set(res["arm"]) == {"focal", "vanilla", "vanilla-m"}  # the config's controls


SMALL = ["simulate", "--K", "20", "--logits", "1.0x2,0.0x18", "--correct", "0..4", "--subset",
         "one=3", "--N", "8", "--steps", "40", "--optimizer", "adam", "--lr", "0.05",
         "--gamma", "1"]  # fmt: skip


def test_cli_controls_summary_matches_library(cli, tmp_path):
    out = tmp_path / "cmp.parquet"
    r = cli(*SMALL, "--controls", "m", "--seeds", "3", "--thresholds", "0.5,0.8", "--format",
            "csv", "--out", out)  # fmt: skip
    assert r.code == 0, r.err
    got = pd.read_csv(io.StringIO(r.out))
    cfg = SimConfig(K=20, logits="1.0x2,0.0x18", correct="0..4", subsets={"one": "3"}, N=8,
                    steps=40, optimizer="adam", lr=0.05, gamma=1.0)  # fmt: skip
    lib = run_comparison(cfg, ["m"], seeds=3, thresholds=[0.5, 0.8])
    want = summarize_comparison(lib)
    assert list(got["arm"]) == list(want["arm"]) and list(got["quantity"]) == list(want["quantity"])
    np.testing.assert_allclose(got["median"], want["median"].astype(float), rtol=1e-15)
    rows = pd.read_parquet(out)
    assert len(rows) == len(lib) and {"arm", "lr_multiplier", "reached"} <= set(rows.columns)


def test_cli_controls_from_toml_defaults_to_16_seeds(cli, tmp_path):
    p = tmp_path / "c.toml"
    p.write_text(
        'K = 6\nlogits = "0.5x1,0.0x5"\ncorrect = "0"\nN = 4\nsteps = 5\ngamma = 1.0\n'
        'controls = ["m"]\nthresholds = [0.3]\n'
    )
    r = cli("simulate", "--config", p, "--format", "json")
    assert r.code == 0, r.err
    rows = json.loads(r.out)
    assert {x["arm"] for x in rows} == {"focal", "vanilla", "vanilla-m"}
    assert all(x["seeds"] == 16 for x in rows if x["quantity"] == "final_q_pos")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--controls", "m", "--seeds", "1"], "--seeds must be >= 2 with --controls"),
        (["--controls", "m", "--gamma", "0"], "controls must be empty when gamma = 0"),
        (["--controls", "m", "--gamma", "0,1"], "--controls must be empty when gamma = 0"),
        (["--controls", "m", "--scheduler", "local-cluster:1"], "--controls must be run locally"),
        (["--controls", "mm"], "controls must be a list of m, h, progress; got 'mm'"),
    ],
)
def test_cli_controls_errors_one_line_exit_2(cli, args, message):
    r = cli(*SMALL, *args)
    assert r.code == 2 and r.out == ""
    assert r.err.startswith("Error: ") and message in r.err
    assert r.err.count("\n") == 1


def test_cli_controls_over_a_sweep(cli, tmp_path):
    """A sweep of focal configs: one comparison per config, the summary keyed by the field that
    varies, every row in --out. At N = 2 every mixed group has g = 1/2 = m_1, so under SGD focal
    and vanilla at lr x m_1 take the same steps (a hand case)."""
    out = tmp_path / "cmp.parquet"
    r = cli("simulate", "--K", "6", "--logits", "1.0x1,0.0x5", "--correct", "0,1", "--N", "2,8",
            "--gamma", "1", "--controls", "m", "--steps", "30", "--seeds", "4", "--lr", "0.1",
            "--thresholds", "0.6", "--out", out, "--format", "json")  # fmt: skip
    assert r.code == 0, r.err
    rows = json.loads(r.out)
    assert {x["N"] for x in rows} == {2, 8}
    n2 = {(x["arm"], x["quantity"]): x["median"] for x in rows if x["N"] == 2}
    assert n2[("focal", "final_q_pos")] == pytest.approx(n2[("vanilla-m", "final_q_pos")], 1e-12)
    full = pd.read_parquet(out)
    assert set(full["comparison"]) == {0, 1} and set(full["N"]) == {2, 8}


def test_progress_search_never_repeats_a_simulation(monkeypatch):
    """issue 27 item 5: the search's points run with the arms' logging, memoized by config hash;
    the vanilla arm is the search's first point and the progress control its best one. Every
    call to the simulator is counted, and each arm's numbers equal an independent, direct run."""
    import fgrpo_theory.sim as sim_pkg
    from fgrpo_theory.sim import config_hash

    real = sim_pkg.simulate
    calls = []

    def counting(cfg, *a, **k):
        calls.append(config_hash(cfg))
        return real(cfg, *a, **k)

    monkeypatch.setattr(sim_pkg, "simulate", counting)
    res = run_arms(CFG, ["m", "progress"], seeds=3, log_steps=(0,), thresholds=T, tables=True)
    pm = res.log.attrs["progress_match"]
    assert len(calls) == len(set(calls)) == res.log.attrs["simulations"]
    # focal + every search point + vanilla-m (off the search's grid); vanilla and the progress
    # control are search points (the search starts exactly at the focal lr)
    assert len(calls) == 1 + len(pm["evaluations"]) + 1
    assert pm["evaluations"][0][0] == CFG.lr
    monkeypatch.setattr(sim_pkg, "simulate", real)
    for arm, lr in (("vanilla", CFG.lr), ("vanilla-progress", pm["lr"])):
        c = CFG.replace(gamma=0.0, lr=lr, seeds=3, log_steps=(0, CFG.steps), thresholds=T)
        want = real(c, tables=True).thresholds
        got = res.thresholds[res.thresholds.arm == arm]
        np.testing.assert_array_equal(got["m_ret"].to_numpy(), want["m_ret"].to_numpy())
        np.testing.assert_array_equal(got["step"].to_numpy(), want["step"].to_numpy())
