"""The simulator's trainer rules (issue 13, section 3): dynamic-sampling filters, dual clip, CISPO.

Oracles, none of them the kernel's own algebra:

- the keep tables, written out by hand for each trainer's rule;
- Monte Carlo at fixed seeds against closed forms (4.5 standard errors): the number of redraws
  is a capped geometric variable with the filter's drop probability, and the group trained on is
  the first kept draw, or the last draw when every redraw was dropped;
- exact enumeration of one step with two inner updates on a three-action policy: every possible
  group, with the surrogate written as the trainers write their losses (verl's
  ``compute_policy_loss``: ``max(-A r, -A clip(r))``, then ``min(., -A c)`` for ``A < 0``; TRL's
  ``cispo``: ``-sg(min(r, eps_high)) A log p``), differentiated by complex steps;
- hand-computed weights of the kernel's coefficient routine;
- the CLI against the library.
"""

from __future__ import annotations

import io
import itertools
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import expit
from scipy.stats import binom, multinomial

from fgrpo_theory.advantages import group_advantages
from fgrpo_theory.sim import SimConfig, expand_grid, load_config, simulate
from fgrpo_theory.sim import kcore as kn

Z = 4.5  # standard errors


# --------------------------------------------------------------------------------------------
# configuration


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"dynamic_sampling": "always"},
         "dynamic_sampling must be one of off, dapo, verl, openrlhf; got 'always'"),
        ({"dynamic_sampling": 1}, "dynamic_sampling must be one of off, dapo, verl, openrlhf"),
        ({"dual_clip": 1.0}, "dual_clip must be > 1.0; got 1.0"),
        ({"dual_clip": 0.5}, "dual_clip must be > 1.0; got 0.5"),
        ({"dual_clip": math.inf}, "dual_clip must be a finite number; got inf"),
        ({"dual_clip": [3.0, 4.0]}, "dual_clip must be a single number"),
        ({"dual_clip": 3.0, "algo": "cispo"},
         "dual_clip must be None for algo = cispo (a PPO-clip option); got 3.0"),
        ({"ds_range": [0.2, 0.8]},
         "ds_range must be None unless dynamic_sampling = 'openrlhf'; got [0.2, 0.8]"),
        ({"ds_range": [0.2, 0.8], "dynamic_sampling": "dapo"},
         "ds_range must be None unless dynamic_sampling = 'openrlhf'"),
        ({"ds_range": [0.8, 0.2], "dynamic_sampling": "openrlhf"},
         "ds_range must be a pair [lo, hi] with lo < hi; got [0.8, 0.2]"),
        ({"ds_range": [0.5, 0.5], "dynamic_sampling": "openrlhf"},
         "ds_range must be a pair [lo, hi] with lo < hi; got [0.5, 0.5]"),
        ({"ds_range": [1.0, 2.0], "dynamic_sampling": "openrlhf"},
         "ds_range must be a range that meets the success rates [0, 1]; got [1.0, 2.0]"),
        ({"ds_range": [-1.0, 0.0], "dynamic_sampling": "openrlhf"},
         "ds_range must be a range that meets the success rates [0, 1]; got [-1.0, 0.0]"),
        ({"ds_range": [0.1], "dynamic_sampling": "openrlhf"},
         "ds_range must be a pair [lo, hi] such as [0.0, 1.0]; got [0.1]"),
        ({"ds_range": "0,1", "dynamic_sampling": "openrlhf"},
         "ds_range must be a pair [lo, hi] such as [0.0, 1.0]; got '0,1'"),
        ({"ds_range": [0.0, math.nan], "dynamic_sampling": "openrlhf"}, "ds_range must be"),
        ({"clip_low": -0.1}, "clip_low must be in [0.0, 1.0]; got -0.1"),
        ({"clip_high": -0.1}, "clip_high must be >= 0.0; got -0.1"),
    ],
)  # fmt: skip
def test_bad_trainer_rule_inputs_raise_one_line(kwargs, message):
    with pytest.raises(ValueError) as exc:
        SimConfig(**kwargs)
    assert message in str(exc.value)
    assert "\n" not in str(exc.value)


def test_dynamic_sampling_names_and_booleans():
    assert SimConfig().dynamic_sampling == "off"
    assert SimConfig(dynamic_sampling=True).dynamic_sampling == "dapo"
    assert SimConfig(dynamic_sampling=False).dynamic_sampling == "off"
    assert SimConfig(dynamic_sampling="VERL").dynamic_sampling == "verl"
    cfg = SimConfig(dynamic_sampling="openrlhf", ds_range=(0, 1))
    assert cfg.ds_range == (0.0, 1.0) and cfg.to_dict()["ds_range"] == [0.0, 1.0]
    assert SimConfig(dual_clip=3).dual_clip == 3.0 and SimConfig().dual_clip is None


@pytest.mark.parametrize(
    ("kw", "N", "table"),
    [
        (dict(dynamic_sampling="off"), 4, [1, 1, 1, 1, 1]),
        (dict(dynamic_sampling="dapo"), 4, [0, 1, 1, 1, 0]),
        (dict(dynamic_sampling="verl"), 4, [0, 1, 1, 1, 0]),
        (dict(dynamic_sampling="openrlhf"), 4, [0, 1, 1, 1, 0]),
        # success rates 0, .25, .5, .75, 1: strictly inside (0.25, 0.75) is only 0.5
        (dict(dynamic_sampling="openrlhf", ds_range=[0.25, 0.75]), 4, [0, 0, 1, 0, 0]),
        (dict(dynamic_sampling="openrlhf", ds_range=[0.2, 1.5]), 4, [0, 1, 1, 1, 1]),
        (dict(dynamic_sampling="openrlhf", ds_range=[-0.5, 0.5]), 4, [1, 1, 0, 0, 0]),
        # a group of one: DAPO's "not all equal" never holds, verl keeps it
        (dict(dynamic_sampling="off"), 1, [1, 1]),
        (dict(dynamic_sampling="dapo"), 1, [0, 0]),
        (dict(dynamic_sampling="verl"), 1, [1, 1]),
        (dict(dynamic_sampling="openrlhf"), 1, [0, 0]),
        (dict(dynamic_sampling="openrlhf", ds_range=[0.5, 2.0]), 1, [0, 1]),
    ],
)
def test_keep_tables_by_hand(kw, N, table):
    keep = SimConfig(N=N, **kw).ds_keep()
    assert keep.dtype == np.uint8 and keep.tolist() == table


def test_ds_range_in_toml_is_a_value_and_a_list_of_pairs_is_a_sweep(tmp_path):
    f = tmp_path / "one.toml"
    f.write_text('dynamic_sampling = "openrlhf"\nds_range = [0.2, 0.8]\n')
    (cfg,) = load_config(f)
    assert cfg.ds_range == (0.2, 0.8)
    f.write_text('dynamic_sampling = "openrlhf"\nds_range = [[0.2, 0.8], [0.1, 0.9]]\n')
    assert [c.ds_range for c in load_config(f)] == [(0.2, 0.8), (0.1, 0.9)]
    grid = expand_grid({"dynamic_sampling": ["dapo", "verl"], "dual_clip": [None, 3.0]})
    assert [(c.dynamic_sampling, c.dual_clip) for c in grid] == [
        ("dapo", None), ("dapo", 3.0), ("verl", None), ("verl", 3.0)
    ]  # fmt: skip


def test_output_columns_name_the_rules():
    df = simulate(SimConfig(steps=2, dynamic_sampling="openrlhf", ds_range=[0.1, 0.9]))
    assert set(df.dynamic_sampling) == {"openrlhf"} and set(df.ds_range) == {"0.1,0.9"}
    assert df.dual_clip.isna().all()
    df = simulate(SimConfig(steps=2, dual_clip=3.0, dynamic_sampling="verl"))
    assert set(df.ds_range) == {""} and set(df.dual_clip) == {3.0}


# --------------------------------------------------------------------------------------------
# dynamic sampling: Monte Carlo against closed forms

# K = 2, logit 0.4 on the correct action: success probability mu = expit(0.4) per draw
MU = float(expit(0.4))
FROZEN = dict(K=2, logits="0.4x1,0.0x1", correct="0", steps=1, log_steps=[1], lr=1e-12)


def _drop_probability(keep: np.ndarray, N: int) -> float:
    pmf = binom.pmf(np.arange(N + 1), N, MU)
    return float(pmf[keep == 0].sum())


@pytest.mark.parametrize(
    ("kw", "N"),
    [
        (dict(dynamic_sampling="verl"), 4),
        (dict(dynamic_sampling="openrlhf", ds_range=[0.3, 0.6]), 4),  # keeps X = 2 only
        (dict(dynamic_sampling="openrlhf", ds_range=[0.6, 1.0]), 5),  # keeps X = 4 only
    ],
)
def test_redraw_count_is_capped_geometric(kw, N):
    """Redraws r of a step: Pr(r = j) = q^j (1 - q) for j < cap, Pr(r = cap) = q^cap, with q the
    binomial probability of the X values the filter drops (hand-built, not the kernel's table)."""
    R, cap = 20_000, 3
    cfg = SimConfig(**FROZEN, **kw, N=N, seeds=R, max_resamples=cap)
    res = simulate(cfg).resamples.to_numpy()
    X = np.arange(N + 1)
    if kw["dynamic_sampling"] == "verl":
        dropped = (X == 0) | (X == N)
    else:
        lo, hi = kw["ds_range"]
        dropped = ~((lo < X / N) & (X / N < hi))
    q = float(binom.pmf(X, N, MU)[dropped].sum())
    assert 0.1 < q < 0.95  # the filter acts, and redraws are not all capped
    j = np.arange(cap + 1)
    pmf = np.append(q ** j[:-1] * (1 - q), q**cap)
    for k in range(cap + 1):
        f = float(np.mean(res == k))
        assert abs(f - pmf[k]) <= Z * math.sqrt(pmf[k] * (1 - pmf[k]) / R), (k, f, pmf[k])


def _trained_class(q_pos: np.ndarray, lr: float, N: int) -> np.ndarray:
    """X (N - X) of the group trained on, read off the one-step change of a two-action policy.

    With dr-grpo advantages and SGD on log p, a group with X correct draws moves the logit gap by
    4 lr X (N - X) / N^2 (A_c = 2 (N - X)/N, A_w = -2 X/N), so q_pos' = expit(0.4 + that)."""
    gap = np.log(q_pos / (1 - q_pos)) - 0.4
    return np.rint(gap * N**2 / (4 * lr)).astype(int)


@pytest.mark.parametrize(
    "kw",
    [
        dict(dynamic_sampling="off"),
        dict(dynamic_sampling="dapo"),
        dict(dynamic_sampling="openrlhf", ds_range=[0.4, 0.9]),  # X = 2, 3 of 4
        dict(dynamic_sampling="openrlhf", ds_range=[0.3, 0.6]),  # X = 2 of 4
    ],
)
def test_group_trained_on_is_first_kept_draw(kw):
    """Pr(trained group has X = x) = keep(x) pmf(x) (1 - q^(cap+1)) / (1 - q)
    + (1 - keep(x)) pmf(x) q^cap: the first kept draw, else the last (dropped) redraw."""
    R, N, cap, lr = 20_000, 4, 2, 1.0
    cfg = SimConfig(
        **{**FROZEN, "lr": lr}, **kw, N=N, seeds=R, max_resamples=cap, advantage="dr-grpo"
    )
    cls = _trained_class(simulate(cfg).q_pos.to_numpy(), lr, N)
    X = np.arange(N + 1)
    assert set(np.unique(cls)) <= set(X * (N - X))  # every run is one of the possible updates
    if kw["dynamic_sampling"] == "off":
        keep = np.ones(N + 1, bool)
    elif kw["dynamic_sampling"] == "dapo":
        keep = (X > 0) & (X < N)
    else:
        lo, hi = kw["ds_range"]
        keep = (lo < X / N) & (X / N < hi)
    pmf = binom.pmf(X, N, MU)
    q = float(pmf[~keep].sum())
    p_final = np.where(keep, pmf * (1 - q ** (cap + 1)) / (1 - q), pmf * q**cap)
    assert p_final.sum() == pytest.approx(1.0, rel=1e-12)
    for c in np.unique(X * (N - X)):
        p = float(p_final[X * (N - X) == c].sum())
        f = float(np.mean(cls == c))
        assert abs(f - p) <= Z * math.sqrt(max(p * (1 - p), 1e-12) / R), (c, f, p)


@pytest.mark.parametrize(
    ("backend", "advantage"), [("dense", "verl-dr-grpo"), ("sumtree", "dr-grpo")]
)
def test_group_of_one(backend, advantage):
    """N = 1: verl keeps every group (no redraw); DAPO's and OpenRLHF's default rules keep none,
    so each step makes exactly max_resamples redraws (bounded) and trains on the last one.
    (The sum tree needs a zero-sum advantage, which is 0 for a group of one.)"""
    base = dict(
        K=6, correct="0,1", N=1, steps=40, log_every=10, seeds=4, lr=0.5,
        advantage=advantage, max_resamples=5, backend=backend,
    )  # fmt: skip
    verl = simulate(SimConfig(**base, dynamic_sampling="verl"))
    off = simulate(SimConfig(**base))
    assert (verl.resamples == 0).all()
    pd.testing.assert_frame_equal(  # keeping every group = no filter, to the bit
        verl.drop(columns=["dynamic_sampling", "config_hash"]),
        off.drop(columns=["dynamic_sampling", "config_hash"]),
    )
    for name in ("dapo", "openrlhf"):
        df = simulate(SimConfig(**base, dynamic_sampling=name))
        later = df[df.step > 0]
        assert (later.resamples == 5 * later.groups).all() and (later.groups == 10).all()
        if advantage == "verl-dr-grpo":  # A = r for a group of one: the redraws change the run
            assert np.abs(df.q_pos.to_numpy() - off.q_pos.to_numpy()).max() > 1e-3


# --------------------------------------------------------------------------------------------
# dual clip and CISPO: the kernel's weights by hand


def _weights(r, A, lo_b, hi_b, dual_c, algo=kn.ALGO_PPO):
    """Per-sample weights w = cvec / (n A) of the kernel's coefficient routine (log-prob rule),
    for one sample per action at ratio ``r`` (powers of two: every ratio is exact)."""
    r = np.asarray(r, float)
    A = np.asarray(A, float)
    K = r.size
    pold = np.full(K, 0.125)
    e = r * 0.125  # probabilities (inv_s = 1), so p / pold = r exactly
    correct = (A > 0).astype(np.uint8)
    adv_c = np.array([A[A > 0][0] if (A > 0).any() else 0.0] * 2)
    adv_w = np.array([A[A < 0][0] if (A < 0).any() else 0.0] * 2)
    assert np.all(A == np.where(A > 0, adv_c[0], adv_w[0]))
    cvec = np.zeros(K)
    touched = np.arange(K, dtype=np.int64)
    cnt = np.ones(K, np.int64)
    kn._coefficients(
        touched, K, cnt, correct, 1, adv_c, adv_w, e, 1.0, pold, False, kn.RULE_LOGPROB, algo,
        lo_b, hi_b, False, cvec, dual_c,
    )  # fmt: skip
    return cvec / A


def test_dual_clip_weights_by_hand():
    """PPO weight d(loss)/d(log p) / A: r inside the clip, 0 where clipped; the dual clip
    (c = 3) adds 0 for A < 0 and r > c, and never touches A > 0."""
    r = [3.5, 3.5, 2.0, 0.5, 3.5, 1.0]
    A = [1.0, -0.5, -0.5, -0.5, -0.5, 1.0]
    lo_b, hi_b = 0.8, 10.0
    np.testing.assert_array_equal(_weights(r, A, lo_b, hi_b, 3.0), [3.5, 0.0, 2.0, 0.0, 0.0, 1.0])
    np.testing.assert_array_equal(
        _weights(r, A, lo_b, hi_b, math.inf), [3.5, 3.5, 2.0, 0.0, 3.5, 1.0]
    )
    # verl's bound is at c itself: r = c is not clipped (ties have measure zero anyway)
    np.testing.assert_array_equal(_weights([3.0], [-1.0], lo_b, hi_b, 3.0), [3.0])
    # with the ordinary upper clip below c, A > 0 is clipped there as before
    np.testing.assert_array_equal(_weights([3.5, 1.25], [1.0, 1.0], lo_b, 1.2, 3.0), [0.0, 0.0])


@given(E=st.floats(min_value=1.0, max_value=1e6, allow_nan=False))
@settings(max_examples=300, deadline=None)
def test_trl_cispo_cap_is_exact_in_the_clip_form(E):
    """TRL's cispo weight min(r, eps_high) with eps_high = E is clip(r, 1 - 1, 1 + (E - 1)):
    E - 1 is exact for 1 <= E < 2**53 (Sterbenz), so the cap 1 + (E - 1) is E to the bit."""
    assert 1.0 + (E - 1.0) == E


def test_trl_cispo_weights_by_hand():
    """clip_low = 1 gives the lower bound 0, which no ratio (> 0) reaches: no lower bound."""
    E = 5.0
    r = [2.0**-1000, 2.0**-20, 0.5, 4.5, 5.0, 6.0, 64.0]
    A = [1.0, -1.0, 1.0, -1.0, 1.0, -1.0, 1.0]
    lo_b, hi_b = 1.0 - 1.0, 1.0 + (E - 1.0)
    w = _weights(r, A, lo_b, hi_b, math.inf, algo=kn.ALGO_CISPO)
    np.testing.assert_array_equal(w, np.minimum(r, E))
    cfg = SimConfig(algo="cispo", clip_low=1.0, clip_high=E - 1.0)
    assert cfg.clip_bounds() == (1.0, 4.0)


# --------------------------------------------------------------------------------------------
# exact enumeration of one step with two inner updates

Z3 = np.array([0.0, 3.0, 0.0])  # action 0 correct; action 1 a dominant wrong answer
LOGITS3 = "0.0x1,3.0x1,0.0x1"
N3 = 4


def _softmax(z):
    e = np.exp(z - z.max().real)
    return e / e.sum()


def _grad(J, z):
    h = 1e-30
    return np.array([J(z + 1j * h * np.eye(z.size)[k]).imag / h for k in range(z.size)])


def _verl_term(A, r, r_real, lo, hi, c):
    """-loss of one sample in verl's compute_policy_loss (complex r for the derivative)."""
    clipped = r if (1 - lo) <= r_real <= (1 + hi) else complex(min(max(r_real, 1 - lo), 1 + hi))
    l1, l2 = -A * r, -A * clipped
    loss = l1 if l1.real >= l2.real else l2  # max(-A r, -A clip(r))
    if c is not None and A < 0:
        l3 = -A * c
        loss = l3 if l3 < loss.real else loss  # min(-A c, .) for negative advantages
    return -loss


def _one_step(counts, lr, inner, rule, algo, lo, hi, c, E=None):
    """Logits after one group (``counts`` draws per action) and ``inner`` SGD updates."""
    a = np.repeat(np.arange(3), counts)
    rewards = np.where(a == 0, 1.0, -1.0)
    A = group_advantages(rewards, "dr-grpo")
    p_old = _softmax(Z3)[a]
    z = Z3.copy()
    for _ in range(inner):
        r_real = _softmax(z)[a] / p_old

        def J(zc, r_real=r_real):
            pc = _softmax(zc)[a]
            tot = 0.0
            for j in range(a.size):
                if algo == "trl-cispo":  # TRL: -sg(min(r, eps_high)) A log p
                    tot = tot + min(r_real[j], E) * A[j] * np.log(pc[j])
                else:
                    t = _verl_term(A[j], pc[j] / p_old[j], r_real[j], lo, hi, c)
                    tot = tot + (t if rule == "logprob" else t * p_old[j])
            return tot / a.size

        z = z + lr * _grad(J, z)
    return z


def _enumerated(lr, inner, rule, algo, lo, hi, c, E=None):
    """(probability, q_pos, p_2) of every group of N3 draws from softmax(Z3)."""
    p = _softmax(Z3)
    out = []
    for n0, n1 in itertools.product(range(N3 + 1), repeat=2):
        if n0 + n1 > N3:
            continue
        counts = (n0, n1, N3 - n0 - n1)
        q = _softmax(_one_step(counts, lr, inner, rule, algo, lo, hi, c, E))
        out.append((float(multinomial.pmf(counts, N3, p)), q[0], q[2]))
    return out


def _check_against_enumeration(cfg, table, R):
    """Every run's (q_pos, p_2) is one enumerated group's; outcome frequencies match."""
    df = simulate(cfg)
    got = df[["q_pos", "mass_two"]].to_numpy()
    vals = np.array([(q0, q2) for _, q0, q2 in table])
    probs = np.array([pr for pr, _, _ in table])
    d = np.abs(got[:, None, :] - vals[None, :, :]).max(axis=2)
    match = d.min(axis=1)
    assert match.max() < 1e-9, match.max()
    # outcomes equal to rounding are one class (e.g. every group without a correct draw)
    key = np.round(vals, 9)
    _, cls = np.unique(key, axis=0, return_inverse=True)
    run_cls = cls[d.argmin(axis=1)]
    for k in np.unique(cls):
        p = float(probs[cls == k].sum())
        f = float(np.mean(run_cls == k))
        assert abs(f - p) <= Z * math.sqrt(max(p * (1 - p), 1e-12) / R) + 1e-12, (k, f, p)


ENUM = dict(
    K=3, logits=LOGITS3, correct="0", subsets={"two": "2"}, N=N3, steps=1, log_steps=[1],
    inner_updates=2, advantage="dr-grpo", optimizer="sgd", sampler="iid",
)  # fmt: skip


def test_dual_clip_one_step_exact_enumeration():
    """Linear rule, two inner updates: in the group (0, 1, 1, 2) the sampled wrong action 2 rises
    while the dominant wrong action 1 is pushed down, so its ratio passes c = 1.5 and verl's dual
    clip removes its gradient at the second update."""
    R, lr, lo, hi, c = 4_000, 20.0, 0.9, 3.0, 1.5
    with_c = _enumerated(lr, 2, "linear", "ppo", lo, hi, c)
    without = _enumerated(lr, 2, "linear", "ppo", lo, hi, None)
    diff = [abs(a[1] - b[1]) for a, b in zip(with_c, without, strict=True)]
    assert max(diff) > 1e-3  # the dual clip binds in some group (oracle self-check)
    cfg = SimConfig(**ENUM, seeds=R, rule="linear", lr=lr, clip_low=lo, clip_high=hi, dual_clip=c)
    _check_against_enumeration(cfg, with_c, R)
    # with one inner update the ratio is 1 and the dual clip changes nothing, to the bit
    one = SimConfig(**{**ENUM, "inner_updates": 1}, seeds=50, rule="linear", lr=lr)
    a, b = simulate(one.replace(dual_clip=c)), simulate(one)
    np.testing.assert_array_equal(a.q_pos.to_numpy(), b.q_pos.to_numpy())


def test_trl_cispo_one_step_exact_enumeration():
    """TRL's cispo (weight min(r, eps_high), no lower bound) is algo = cispo with clip_low = 1,
    clip_high = eps_high - 1; a lower bound (clip_low = 0.1) would change the result."""
    R, lr, E = 4_000, 3.0, 2.5
    trl = _enumerated(lr, 2, "logprob", "trl-cispo", None, None, None, E)
    cfg = SimConfig(
        **ENUM, seeds=R, rule="logprob", algo="cispo", lr=lr, clip_low=1.0, clip_high=E - 1.0
    )
    _check_against_enumeration(cfg, trl, R)
    # the cap binds (some group's correct action more than 2.5x as likely after one update) ...
    capped = _enumerated(lr, 2, "logprob", "trl-cispo", None, None, None, 1e9)
    assert max(abs(a[1] - b[1]) for a, b in zip(trl, capped, strict=True)) > 1e-3
    # ... and a lower bound would bind (ratios below 0.9 occur), so "no lower bound" is tested
    low = simulate(cfg.replace(clip_low=0.1, seeds=200)).q_pos.to_numpy()
    none = simulate(cfg.replace(seeds=200)).q_pos.to_numpy()
    assert np.abs(low - none).max() > 1e-3


# --------------------------------------------------------------------------------------------
# command line

SMALL = ["simulate", "--K", "6", "--logits", "0.5x1,0.0x5", "--correct", "0", "--steps", "20",
         "--seeds", "3", "--log-every", "10", "--N", "4", "--format", "csv"]  # fmt: skip


def test_cli_options_reach_the_library(cli):
    r = cli(*SMALL, "--inner-updates", "3", "--lr", "2", "--clip-low", "0.1", "--clip-high",
            "0.3", "--dual-clip", "1.5", "--dynamic-sampling", "openrlhf", "--ds-range",
            "0.2,0.9", "--max-resamples", "4")  # fmt: skip
    assert r.code == 0, r.err
    got = pd.read_csv(io.StringIO(r.out))
    cfg = SimConfig(
        K=6, logits="0.5x1,0.0x5", correct="0", steps=20, seeds=3, log_every=10, N=4,
        inner_updates=3, lr=2.0, clip_low=0.1, clip_high=0.3, dual_clip=1.5,
        dynamic_sampling="openrlhf", ds_range=[0.2, 0.9], max_resamples=4,
    )  # fmt: skip
    df = simulate(cfg)
    assert got.q_pos[0] == pytest.approx(df[df.step == 20].q_pos.mean(), rel=1e-14)
    r2 = cli(*SMALL, "--inner-updates", "3", "--lr", "2")
    assert pd.read_csv(io.StringIO(r2.out)).q_pos[0] != got.q_pos[0]


def test_cli_dual_clip_off_overrides_a_file(cli, tmp_path):
    f = tmp_path / "c.toml"
    f.write_text("dual_clip = 1.5\ninner_updates = 3\nlr = 2.0\nN = 4\nsteps = 20\n")
    on = cli("simulate", "--config", str(f), "--format", "csv")
    off = cli("simulate", "--config", str(f), "--dual-clip", "off", "--format", "csv")
    plain = cli("simulate", "--inner-updates", "3", "--lr", "2", "--N", "4", "--steps", "20",
                "--format", "csv")  # fmt: skip
    assert on.code == off.code == plain.code == 0
    assert off.out == plain.out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--dual-clip", "1"], "--dual-clip must be > 1.0; got 1.0"),
        (["--dual-clip", "x"], "--dual-clip"),
        (["--dual-clip", "2,3"], "--dual-clip must be one number c > 1 (e.g. 3) or off"),
        (["--dynamic-sampling", "yes"], "--dynamic-sampling must be one of off, dapo, verl"),
        (["--ds-range", "0.2,0.8"], "--ds-range must be None unless --dynamic-sampling"),
        (["--dynamic-sampling", "openrlhf", "--ds-range", "0.2"],
         "--ds-range must be two values LO,HI such as 0,1"),
        (["--clip-low", "2"], "--clip-low must be in [0.0, 1.0]; got 2.0"),
        (["--max-resamples", "0"], "--max-resamples must be >= 1; got 0"),
        (["--algo", "cispo", "--dual-clip", "3"], "--dual-clip must be None for algo = cispo"),
    ],
)  # fmt: skip
def test_cli_bad_values_one_line_exit_2(cli, args, message):
    r = cli(*SMALL, *args)
    assert r.code == 2
    assert message in r.err and "Traceback" not in r.err
    assert len(r.err.strip().splitlines()) == 1


def test_cli_help_shows_every_default(cli):
    r = cli("simulate", "--help")
    text = " ".join(r.out.replace("│", " ").split())
    for option in ("--clip-low", "--clip-high", "--dual-clip", "--dynamic-sampling",
                   "--ds-range", "--max-resamples"):  # fmt: skip
        assert option in text
    assert "grpo 0.2, dapo 0.2, cispo 1" in text and "grpo 0.2, dapo 0.28, cispo 5" in text
    assert "[default: (16)]" in text and "[default: (off)]" in text
