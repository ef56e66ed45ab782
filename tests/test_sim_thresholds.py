"""Kernel equal-progress thresholds, subset NLLs and kept-group counters (issue 11 items 2, 3, 5).

Oracles: the log-based :func:`fgrpo_theory.fair.threshold_metrics` on every-step logs of the same
seeds; :func:`fgrpo_theory.fair.progress.mean_nll_from_logits` (SciPy's logsumexp) on the final
logits of a run; Pr(B | A_N) of theory.md section 12 (closed form) against the kept-group
frequency on a frozen policy, with a tolerance from the binomial standard error at fixed seeds.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fgrpo_theory import tail_miss_probability_given_active
from fgrpo_theory.fair import threshold_metrics
from fgrpo_theory.fair.progress import mean_nll_from_logits
from fgrpo_theory.sim import SimConfig, simulate

#: 0.2 is below the start (reached at step 0), 0.9999 is never reached in these runs.
THRESHOLDS = (0.2, 0.5, 0.62, 0.8, 0.9999)

BASE = dict(
    K=50, logits="1.0x5,0.0x45", correct="0..9", subsets={"one": "3", "rare": "2..9"}, N=8,
    steps=90, seeds=3, log_every=1, thresholds=THRESHOLDS,
)  # fmt: skip

CASES = {
    "dense-adam": dict(optimizer="adam", lr=0.05, gamma=1.0, backend="dense"),
    "dense-sorted-linear": dict(
        rule="linear", optimizer="adamw", lr=0.05, advantage="dr-grpo", sampler="sorted"
    ),
    "sumtree": dict(lr=0.3, backend="sumtree", renorm_every=7),
    "sumtree-dynamic": dict(lr=0.3, backend="sumtree", dynamic_sampling=True, max_resamples=2),
    "dense-dynamic-ppo": dict(
        algo="dapo",
        inner_updates=3,
        optimizer="adam",
        lr=0.05,
        dynamic_sampling=True,
        backend="dense",
    ),
}


def _cfg(case: str, **kw) -> SimConfig:
    return SimConfig(**{**BASE, **CASES[case], **kw})


@pytest.mark.parametrize("case", sorted(CASES))
def test_kernel_thresholds_equal_log_based_metrics(case):
    cfg = _cfg(case)
    res = simulate(cfg, tables=True)
    thr = res.thresholds
    assert len(thr) == cfg.n_runs * len(THRESHOLDS)
    oracle = threshold_metrics(res.log, THRESHOLDS, rare={"one": 1, "rare": 8}, keep=("run",))
    m = thr.merge(oracle, on=["run", "threshold"], suffixes=("", "_log"), validate="one_to_one")
    assert len(m) == len(thr)
    assert (m["reached"] == m["reached_log"]).all()
    assert (m["step"] == m["step_log"]).all()
    assert m["reached"].any() and not m["reached"].all()  # both kinds occur
    assert (thr.loc[thr["threshold"] == 0.2, "step"] == 0).all()  # the start counts
    hit = m[m["reached"]]
    for col in ("q_pos", "m_ret", "mass_one", "mass_rare", "nll_rise_one"):
        np.testing.assert_allclose(hit[col], hit[f"{col}_log"], rtol=0, atol=1e-12)
    assert (hit["q_pos"] >= hit["threshold"]).all()
    miss = thr[~thr["reached"]]
    assert (miss["step"] == -1).all()  # not reached: explicit, never imputed
    assert miss[["q_pos", "m_ret", "mass_one", "nll_rare", "nll_rise_rare"]].isna().all().all()
    # the log's rows at the recorded steps carry the same numbers (same metric function)
    log = res.log.set_index(["run", "step"])
    at = log.loc[list(zip(hit["run"], hit["step"], strict=True))]
    for col in ("m_ret", "mass_rare", "nll_rare", "nll_rise_rare", "entropy"):
        np.testing.assert_array_equal(hit[col].to_numpy(), at[col].to_numpy())


@pytest.mark.parametrize("case", ["dense-adam", "sumtree-dynamic"])
def test_thresholds_need_no_logging_and_change_no_logged_number(case):
    cfg = _cfg(case)
    full = simulate(cfg, tables=True)
    sparse = simulate(cfg.replace(log_steps=(cfg.steps,)), tables=True, threads=2, chunk_steps=7)
    pd.testing.assert_frame_equal(
        full.thresholds.drop(columns="config_hash"),
        sparse.thresholds.drop(columns="config_hash"),
        check_exact=True,
    )
    # no thresholds: the same per-step log, bit for bit (the loop then calls the metrics pass
    # through its address; with thresholds it links the pass in)
    plain = simulate(cfg.replace(thresholds=()))
    cols = [c for c in plain.columns if c != "config_hash"]
    pd.testing.assert_frame_equal(full.log[cols], plain[cols], check_exact=True)
    assert simulate(cfg.replace(thresholds=()), tables=True).thresholds.empty


def _final_logits(cfg: SimConfig) -> np.ndarray:
    """Run ``cfg`` through the runner's own pieces and return every run's final logits."""
    from fgrpo_theory.sim import kernels as kn
    from fgrpo_theory.sim.keys import run_keys
    from fgrpo_theory.sim.records import new_state
    from fgrpo_theory.sim.runner import _run_chunk, build_records, prepare

    a = prepare(cfg)
    rec = build_records(cfg, a)
    R = cfg.n_runs
    st = new_state(rec["prob"], rec["log"], rec["opt"], run_keys(cfg.seed, R), False)
    n_met = kn.n_metrics(len(a["subset_names"]))
    out = np.zeros((R, len(a["log_steps"]), n_met))
    thr_out = np.zeros((R, 0, n_met))
    thr_step = np.zeros((R, 0), np.int64)
    _run_chunk(rec, st, 0, cfg.steps, out, thr_out, thr_step)
    return st.z


def test_subset_nll_against_logsumexp_of_final_logits():
    cfg = SimConfig(
        K=12, logits="2.0,1.0x3,0.0x8", correct="0..3", N=4, steps=40, optimizer="adam",
        lr=0.1, seeds=2, log_every=40, backend="dense",
        subsets={"one": "2", "pair": "1,7", "wrong": "4..11", "all": "0..11"},
    )  # fmt: skip
    log = simulate(cfg)
    z = _final_logits(cfg)
    idx = {"one": [2], "pair": [1, 7], "wrong": list(range(4, 12)), "all": list(range(12))}
    z0 = np.array([2.0, 1.0, 1.0, 1.0] + [0.0] * 8)
    last = log[log["step"] == cfg.steps].sort_values("run")
    first = log[log["step"] == 0]
    for name, ix in idx.items():
        for r in range(cfg.n_runs):
            want = mean_nll_from_logits(z[r], ix)
            assert last[f"nll_{name}"].iloc[r] == pytest.approx(want, rel=1e-13, abs=1e-13)
            rise = want - mean_nll_from_logits(z0, ix)
            assert last[f"nll_rise_{name}"].iloc[r] == pytest.approx(rise, abs=1e-12)
        # step 0 by hand: -mean log softmax(z0) over the subset
        lp0 = z0 - np.log(np.exp(z0).sum())
        np.testing.assert_allclose(first[f"nll_{name}"], -lp0[ix].mean(), rtol=1e-14)
        assert (first[f"nll_rise_{name}"] == 0.0).all()
    # a single action: the mean NLL is -log of its logged mass
    np.testing.assert_allclose(log["nll_one"], -np.log(log["mass_one"]), rtol=1e-13)


@pytest.mark.parametrize(
    ("N", "dyn", "backend"), [(2, True, "auto"), (8, True, "auto"), (4, True, "dense"),
                              (2, False, "auto")],
)  # fmt: skip
def test_kept_tail_miss_frequency_is_pr_b_given_active(N, dyn, backend):
    # frozen policy (SGD, lr 1e-12): mu = 60/200 = 0.3, rare subset of 3 correct actions (tau =
    # 0.015, rho = 0.05, Fig. 1a), so every kept active group misses it w.p. Pr(B | A_N)
    steps = 3000
    cfg = SimConfig(
        K=200, correct="0..59", subsets={"r": "0..2"}, N=N, steps=steps, lr=1e-12, seeds=2,
        dynamic_sampling=dyn, log_steps=(0, steps // 2, steps), seed=11, backend=backend,
    )  # fmt: skip
    d = simulate(cfg)
    d = d[d["step"] > 0]
    kept, miss = int(d["kept_active"].sum()), int(d["kept_tail_miss_r"].sum())
    p = float(tail_miss_probability_given_active(N, 0.3, 0.015))
    se = np.sqrt(p * (1 - p) / kept)
    assert abs(miss / kept - p) < 4 * se, (miss / kept, p, se)
    groups = int(d["groups"].sum())
    active = int(np.rint((d["active_frac"] * d["groups"]).sum()))
    if dyn:  # nearly every step keeps an active group (max_resamples = 16 rarely runs out)
        assert groups - 5 <= kept <= groups
        assert kept > active
    else:  # the kept group is the first draw
        assert kept == active
        assert (d["kept_tail_miss_r"] == d["tail_miss_r"]).all()


def test_kept_counters_when_no_group_can_be_active():
    # N = 1: every group is all-equal, the redraws always run out, nothing active is kept
    cfg = SimConfig(K=6, N=1, steps=20, subsets={"a": "0"}, dynamic_sampling=True,
                    max_resamples=3, log_every=5)  # fmt: skip
    d = simulate(cfg)
    assert (d["kept_active"] == 0).all() and (d["kept_tail_miss_a"] == 0).all()
    assert d.loc[d["step"] > 0, "resamples"].eq(15).all()


@pytest.mark.parametrize("bad", [0.0, 1.0, 1.5, -0.1, float("nan")])
def test_bad_thresholds_one_line_error(bad):
    with pytest.raises(ValueError, match=r"^thresholds must be in \(0, 1\); got ") as e:
        SimConfig(thresholds=(0.5, bad))
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="^thresholds must be a list of numbers"):
        SimConfig(thresholds="0.5")


def test_thresholds_are_sorted_unique_and_hash_stable():
    from fgrpo_theory.sim import config_hash

    assert SimConfig(thresholds=[0.9, 0.5, 0.9]).thresholds == (0.5, 0.9)
    assert SimConfig(thresholds=0.7).thresholds == (0.7,)
    assert config_hash(SimConfig(thresholds=())) == config_hash(SimConfig())
    assert config_hash(SimConfig(thresholds=(0.5,))) != config_hash(SimConfig())
