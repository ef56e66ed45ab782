"""Group advantages, trainer presets, focal weights and the learning-rate multiplier.

Oracles: each trainer's formula evaluated by hand with ``math`` on small groups, the closed forms of
theory.md section 3 (population A+ = sqrt((1-x)/x), mean |A| = 2 sqrt(x(1-x))), mpmath at 50 digits
and scipy quadrature for the multiplier of appendix N.
"""

from __future__ import annotations

import math
import re

import mpmath
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.integrate import quad

from fgrpo_theory.advantages import (
    PRESETS,
    AdvantageConvention,
    binary_advantages,
    effective_lr_multiplier,
    focal_advantages,
    focal_weight,
    get_convention,
    group_advantages,
    lr_multiplier,
    weighted_magnitudes,
)

MEAN_BASELINE_PRESETS = sorted(PRESETS)  # every preset centres on the group (or LOO) mean

# ---------------------------------------------------------------------------------------------
# Hand-computed cases, one per trainer, from that trainer's own formula.


def test_trl_bessel_std_plus_1e4():
    # TRL: (R - mean) / (std(unbiased) + 1e-4). R = [1,0,0,1]: mean 1/2, sample var = 1/3.
    a = 0.5 / (math.sqrt(1 / 3) + 1e-4)
    np.testing.assert_allclose(
        group_advantages([1.0, 0.0, 0.0, 1.0], "trl"), [a, -a, -a, a], rtol=1e-15
    )


def test_trl_group_of_one_and_flat_group_are_zero():
    np.testing.assert_array_equal(group_advantages([[0.7]], "trl"), [[0.0]])
    np.testing.assert_array_equal(group_advantages([1.0, 1.0, 1.0], "trl"), [0.0, 0.0, 0.0])


def test_verl_bessel_std_plus_1e6_and_group_of_one_raw():
    # verl: R = [1,0,0]: mean 1/3, deviations 2/3, -1/3, -1/3, sample var (4+1+1)/9/2 = 1/3.
    s = math.sqrt(1 / 3) + 1e-6
    np.testing.assert_allclose(
        group_advantages([1.0, 0.0, 0.0], "verl"), [2 / 3 / s, -1 / 3 / s, -1 / 3 / s], rtol=1e-15
    )
    # verl sets mean 0, std 1 for a group of one: A = (r - 0) / (1 + 1e-6).
    np.testing.assert_allclose(group_advantages([0.7], "verl"), [0.7 / (1 + 1e-6)], rtol=1e-15)
    np.testing.assert_allclose(
        binary_advantages([0, 1], 1, "verl", r_incorrect=0.0),
        ([0.0, 1 / (1 + 1e-6)], [0.0, 0.0]),
        rtol=1e-15,
    )
    # with the default pair (1, -1) the lone incorrect rollout keeps A = -1 / (1 + 1e-6)
    np.testing.assert_allclose(binary_advantages(0, 1, "verl")[1], -1 / (1 + 1e-6), rtol=1e-15)


def test_openrlhf_group_norm_and_refused_group_of_one():
    # OpenRLHF group_norm: (R - mean) / (std(unbiased) + 1e-9); R = [1, 0]: sample std sqrt(1/2).
    a = 0.5 / (math.sqrt(0.5) + 1e-9)
    np.testing.assert_allclose(group_advantages([1.0, 0.0], "openrlhf"), [a, -a], rtol=1e-15)
    with pytest.raises(ValueError, match=r"^N must be >= 2 for convention 'openrlhf'.*; got 1$"):
        group_advantages([[1.0], [0.0]], "openrlhf")
    with pytest.raises(ValueError, match="^N must be >= 2"):
        binary_advantages(1, 1, "openrlhf")


def test_grpo_population_and_bessel():
    # R = [1,0,0,0]: population std sqrt(3)/4 -> A+ = 0.75 / (sqrt(3)/4) = sqrt(3), A- = -1/sqrt(3).
    r = [1.0, 0.0, 0.0, 0.0]
    np.testing.assert_allclose(
        group_advantages(r), [math.sqrt(3)] + [-1 / math.sqrt(3)] * 3, rtol=1e-15
    )
    # sample std = sqrt(3/16 * 4/3) = 1/2 -> A+ = 1.5, A- = -0.5.
    np.testing.assert_allclose(group_advantages(r, "grpo-bessel"), [1.5, -0.5, -0.5, -0.5])


def test_mean_centred_and_loo():
    r = [1.0, 0.0, 0.0, 0.0]
    np.testing.assert_allclose(group_advantages(r, "dr-grpo"), [0.75, -0.25, -0.25, -0.25])
    np.testing.assert_allclose(group_advantages([1.0, -1, -1, 1], "dr-grpo"), [1.0, -1, -1, 1])
    assert "paper-sim" not in PRESETS  # removed: it was "dr-grpo" under another name
    # RLOO: R_i minus the mean of the other three.
    np.testing.assert_allclose(group_advantages(r, "rloo"), [1.0, -1 / 3, -1 / 3, -1 / 3])
    with pytest.raises(ValueError, match="^N must be >= 2 for convention 'rloo'"):
        group_advantages([1.0], "rloo")


def test_eps_floor_mode():
    conv = get_convention("grpo", eps=1.0, eps_mode="floor")
    # population std sqrt(3)/4 < 1 -> divide by 1.
    np.testing.assert_allclose(group_advantages([1.0, 0, 0, 0], conv), [0.75, -0.25, -0.25, -0.25])
    conv = get_convention("grpo", eps=0.1, eps_mode="floor")
    np.testing.assert_allclose(
        group_advantages([1.0, 0, 0, 0], conv), [math.sqrt(3)] + [-1 / math.sqrt(3)] * 3
    )


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_zero_variance_groups_get_zero(name):
    r = np.array([[0.3, 0.3, 0.3], [1.0, 1.0, 1.0], [-1.0, -1.0, -1.0]])
    np.testing.assert_array_equal(group_advantages(r, name), np.zeros_like(r))


def test_zero_variance_formula_policy():
    with pytest.raises(
        ValueError,
        match=r"^eps must be > 0 for convention \"grpo\(zero_variance='formula'\)\": .*; got 0.0$",
    ):
        group_advantages([1.0, 1.0], "grpo", zero_variance="formula")
    with pytest.raises(ValueError, match="^eps must be > 0"):
        binary_advantages(0, 4, "grpo", zero_variance="formula")
    # with eps > 0 the formula gives (R - mean)/eps = 0 for exactly representable rewards
    np.testing.assert_array_equal(group_advantages([1.0, 1.0], "trl", zero_variance="formula"), 0)


def test_convention_validation():
    with pytest.raises(ValueError, match="^advantage must be one of 'grpo'.*; got 'ppo'$"):
        get_convention("ppo")
    with pytest.raises(ValueError, match="^override must be a field .*; got 'sd'$"):
        get_convention("grpo", sd="population")
    with pytest.raises(ValueError, match="^std must be one of .*; got 'sample'$"):
        AdvantageConvention(std="sample")
    with pytest.raises(ValueError, match=r"^eps must be >= 0; got -1.0$"):
        get_convention("trl", eps=-1.0)
    assert get_convention("trl", eps=1e-3).name == "trl(eps=0.001)"
    assert get_convention(PRESETS["verl"]) is PRESETS["verl"]


@pytest.mark.parametrize(
    ("rewards", "fragment"),
    [(1.0, "^rewards must be an array"), ([1.0, np.nan], "^rewards must be a finite number")],
)
def test_group_advantages_rejects_bad_rewards(rewards, fragment):
    with pytest.raises(ValueError, match=fragment):
        group_advantages(rewards)


# ---------------------------------------------------------------------------------------------
# Structural properties.

rewards_strategy = st.integers(2, 12).flatmap(
    lambda n: st.lists(
        st.floats(-10, 10, allow_nan=False).map(lambda v: round(v, 3)), min_size=n, max_size=n
    )
)


@given(rewards=rewards_strategy, name=st.sampled_from(MEAN_BASELINE_PRESETS))
def test_advantages_sum_to_zero(rewards, name):
    adv = group_advantages(rewards, name)
    scale = max(1.0, float(np.abs(adv).max()))
    assert abs(adv.sum()) <= 1e-12 * len(rewards) * scale


@given(rewards=rewards_strategy, name=st.sampled_from(sorted(PRESETS)), data=st.data())
def test_permutation_equivariant(rewards, name, data):
    perm = data.draw(st.permutations(range(len(rewards))))
    r = np.array(rewards)
    np.testing.assert_allclose(
        group_advantages(r[perm], name), group_advantages(r, name)[perm], rtol=1e-12, atol=1e-12
    )


def test_batched_groups_are_independent():
    r = np.array([[[1.0, 0, 0, 0], [1, 1, 0, 0]], [[0, 0, 0, 0], [5, 1, 2, 3]]])
    adv = group_advantages(r, "trl")
    assert adv.shape == r.shape
    for idx in np.ndindex(r.shape[:-1]):
        np.testing.assert_array_equal(adv[idx], group_advantages(r[idx], "trl"))


# ---------------------------------------------------------------------------------------------
# Binary groups: closed form == group_advantages.

GROUP_SCOPED = sorted(k for k, c in PRESETS.items() if c.scale_scope == "group")

conventions = st.one_of(
    st.sampled_from(GROUP_SCOPED),
    st.builds(
        AdvantageConvention,
        std=st.sampled_from(["population", "bessel", "none"]),
        eps=st.sampled_from([0.0, 1e-6, 0.3, 2.0]),
        eps_mode=st.sampled_from(["add", "floor"]),
        baseline=st.sampled_from(["mean", "loo"]),
        zero_variance=st.sampled_from(["zero", "formula"]),
        group_of_one=st.sampled_from(["zero", "raw"]),
    ),
)


@given(
    n=st.integers(1, 64),
    data=st.data(),
    conv=conventions,
    rewards=st.sampled_from([(1.0, 0.0), (1.0, -1.0), (0.7, 0.2), (3.0, -2.5)]),
)
def test_binary_advantages_match_group_advantages(n, data, conv, rewards):
    x = data.draw(st.integers(0, n))
    rc, rw = rewards
    group = np.array([rc] * x + [rw] * (n - x))
    try:
        expected = group_advantages(group, conv)
    except ValueError as e:
        with pytest.raises(ValueError, match=re.escape(str(e))):
            binary_advantages(x, n, conv, r_correct=rc, r_incorrect=rw)
        return
    pos, neg = binary_advantages(x, n, conv, r_correct=rc, r_incorrect=rw)
    assert isinstance(pos, float) and isinstance(neg, float)
    if x > 0:
        np.testing.assert_allclose(expected[0], pos, rtol=1e-12, atol=1e-13)
    else:
        assert pos == 0.0
    if x < n:
        np.testing.assert_allclose(expected[-1], neg, rtol=1e-12, atol=1e-13)
    else:
        assert neg == 0.0


def test_binary_population_closed_form_large_n():
    n = 131_072
    x = np.arange(n + 1)
    pos, neg = binary_advantages(x, n)
    assert pos.shape == neg.shape == (n + 1,)
    xf = x[1:-1] / n
    np.testing.assert_allclose(pos[1:-1], np.sqrt((1 - xf) / xf), rtol=1e-13)
    np.testing.assert_allclose(neg[1:-1], -np.sqrt(xf / (1 - xf)), rtol=1e-13)
    assert pos[0] == neg[0] == pos[-1] == neg[-1] == 0.0
    # Bessel = population * sqrt((N-1)/N)
    bpos, bneg = binary_advantages(x, n, "grpo-bessel")
    np.testing.assert_allclose(bpos, pos * math.sqrt((n - 1) / n), rtol=1e-13)
    np.testing.assert_allclose(bneg, neg * math.sqrt((n - 1) / n), rtol=1e-13)


def test_binary_broadcasts_over_x_and_n():
    pos, _ = binary_advantages([[1], [2]], [4, 8, 16])
    assert pos.shape == (2, 3)
    np.testing.assert_allclose(pos[1, 0], 1.0)  # x = 1/2


@pytest.mark.parametrize("n", [2, 3, 8, 37, 1000])
def test_mean_abs_advantage_population(n):
    # group mean of |A| = 2 sqrt(x(1-x)), x = X/N (theory.md section 3), for every mixed X
    for x in range(1, n):
        group = np.array([1.0] * x + [0.0] * (n - x))
        f = x / n
        assert abs(np.abs(group_advantages(group)).mean() - 2 * math.sqrt(f * (1 - f))) < 1e-12


def test_binary_validation():
    with pytest.raises(ValueError, match="^X must be <= N = 4; got 5$"):
        binary_advantages(5, 4)
    with pytest.raises(ValueError, match=r"^N must be >= 1; got 0(\.0)?$"):
        binary_advantages(0, 0)
    with pytest.raises(ValueError, match="^X must be an integer; got 1.5$"):
        binary_advantages(1.5, 4)
    with pytest.raises(ValueError, match="^r_correct must be > r_incorrect = 1.0; got 0.0$"):
        binary_advantages(1, 4, r_correct=0.0, r_incorrect=1.0)


# ---------------------------------------------------------------------------------------------
# Focal weight (P-12) and focal advantages (P-13).


def test_focal_weight_values():
    assert focal_weight(0.25, 2) == 0.5625
    assert focal_weight(1.0, 0.0) == 1.0  # 0^0 = 1: gamma = 0 is vanilla even for mu_hat = 1
    assert focal_weight(1.0, 0.5) == 0.0
    assert focal_weight(0.0, 7.0) == 1.0
    np.testing.assert_allclose(
        focal_weight([0.5, 0.75], [[1.0], [0.5]]), [[0.5, 0.25], [0.5**0.5, 0.5]]
    )
    with pytest.raises(ValueError, match=r"^gamma must be >= 0; got -0.5$"):
        focal_weight(0.5, -0.5)
    with pytest.raises(ValueError, match=r"^mu_hat must be in \[0, 1\]; got 1.5$"):
        focal_weight(1.5, 1.0)


@given(rewards=rewards_strategy, name=st.sampled_from(sorted(PRESETS)))
def test_focal_gamma_zero_is_vanilla_exactly(rewards, name):
    np.testing.assert_array_equal(
        focal_advantages(rewards, 0.0, name, correct=np.array(rewards) > 0),
        group_advantages(rewards, name),
    )


def test_focal_advantages_hand_cases():
    # [1,0,0,0]: mu_hat = 1/4, g = 3/4 at gamma = 1; population advantages sqrt(3), -1/sqrt(3).
    r = np.array([[1.0, 0, 0, 0], [1, 1, 1, 0]])
    out = focal_advantages(r, 1.0, r_incorrect=0.0)
    np.testing.assert_allclose(out[0], 0.75 * np.array([math.sqrt(3)] + [-1 / math.sqrt(3)] * 3))
    np.testing.assert_allclose(out[1], 0.25 * np.array([1 / math.sqrt(3)] * 3 + [-math.sqrt(3)]))
    # rewards +1/-1 (the default pair): mu_hat = 1/4
    np.testing.assert_allclose(
        focal_advantages([1.0, -1, -1, -1], 2.0, "dr-grpo"),
        0.5625 * np.array([1.5, -0.5, -0.5, -0.5]),
    )
    # explicit mask: partial-credit rewards where only 1.0 is correct -> mu_hat = 1/2, g = 1/2
    rr = [1.0, 0.2, 1.0, 0.2]
    out = focal_advantages(rr, 1.0, "dr-grpo", correct=[True, False, True, False])
    np.testing.assert_allclose(out, [0.2, -0.2, 0.2, -0.2])
    # gamma array over the batch
    out = focal_advantages(r, np.array([[0.0], [1.0]]), r_incorrect=0.0)
    assert out.shape == (2, 2, 4)
    np.testing.assert_array_equal(out[0], group_advantages(r))


def test_focal_advantages_validation():
    with pytest.raises(ValueError, match="^correct must be a boolean array; got int64$"):
        focal_advantages([1.0, 0.0], 1.0, correct=[1, 0])
    with pytest.raises(ValueError, match=r"^correct must be of the shape of rewards \(2,\)"):
        focal_advantages([1.0, 0.0], 1.0, correct=[True])
    with pytest.raises(ValueError, match="^gamma must be >= 0"):
        focal_advantages([1.0, 0.0], -1.0)


def test_weighted_magnitudes_hand_values():
    np.testing.assert_allclose(weighted_magnitudes(0.5, 1.0), (0.5, 0.5))
    np.testing.assert_allclose(weighted_magnitudes(0.2, 0.0), (2.0, 0.5))
    # mu = 0.8, gamma = 1/2: g = sqrt(0.2), |A+| = 1/2, |A-| = 2
    np.testing.assert_allclose(
        weighted_magnitudes(0.8, 0.5), (0.5 * math.sqrt(0.2), 2 * math.sqrt(0.2)), rtol=1e-15
    )
    pos, neg = weighted_magnitudes(np.array([0.25, 0.5]), np.array([[0.0], [1.0]]))
    assert pos.shape == (2, 2)
    with pytest.raises(ValueError, match=r"^mu must be in \(0, 1\); got 1.0$"):
        weighted_magnitudes(1.0, 1.0)


def test_weighted_magnitudes_match_binary_focal():
    # Fig. 4 at mu = X/N equals the focal weight times the binary-group advantages.
    n = 40
    x = np.arange(1, n)
    for gamma in (0.0, 0.5, 1.0):
        pos, neg = binary_advantages(x, n)
        g = focal_weight(x / n, gamma)
        wp, wn = weighted_magnitudes(x / n, gamma)
        np.testing.assert_allclose(wp, g * pos, rtol=1e-13)
        np.testing.assert_allclose(wn, -g * neg, rtol=1e-13)


# ---------------------------------------------------------------------------------------------
# Learning-rate multiplier (appendix N).


def test_lr_multiplier_exact_values():
    # B(3/2, 3/2) = pi/8; B(3/2, 2) = 4/15; B(3/2, 5/2) = pi/16; B(3/2, 7/2) = 5 pi/128.
    np.testing.assert_allclose(
        lr_multiplier([0.0, 0.5, 1.0, 2.0]), [1.0, 32 / (15 * math.pi), 0.5, 5 / 16], rtol=1e-14
    )
    assert lr_multiplier(0.0) == 1.0


@pytest.mark.parametrize("gamma", [0.25, 0.5, 1.0, 2.0, 3.7, 50.0])
def test_lr_multiplier_mpmath(gamma):
    # mpmath.mp.dps = 50; mpmath.beta(1.5, gamma + 1.5) / mpmath.beta(1.5, 1.5)
    with mpmath.workdps(50):
        ref = mpmath.beta(mpmath.mpf(3) / 2, mpmath.mpf(gamma) + mpmath.mpf(3) / 2) / mpmath.beta(
            mpmath.mpf(3) / 2, mpmath.mpf(3) / 2
        )
    assert abs(lr_multiplier(gamma) - float(ref)) <= 1e-13 * float(ref)


@pytest.mark.parametrize("gamma", [0.5, 1.0, 2.0])
def test_lr_multiplier_is_average_focal_magnitude(gamma):
    # average over mu ~ U(0,1) of g(mu) * (mean |A| = 2 sqrt(mu(1-mu))), relative to gamma = 0
    num = quad(lambda m: (1 - m) ** gamma * 2 * math.sqrt(m * (1 - m)), 0, 1, epsabs=1e-14)[0]
    den = quad(lambda m: 2 * math.sqrt(m * (1 - m)), 0, 1, epsabs=1e-14)[0]
    assert abs(lr_multiplier(gamma) - num / den) < 1e-9


def test_lr_multiplier_validation():
    with pytest.raises(ValueError, match=r"^gamma must be >= 0; got -1.0$"):
        lr_multiplier(-1.0)
    assert isinstance(lr_multiplier(1.0), float)
    assert lr_multiplier(np.array([1.0])).shape == (1,)


@pytest.mark.filterwarnings("error")
def test_overflowing_rewards_are_refused_not_nan():
    # the std of [1e200, -1e200] overflows to inf, which would silently give advantages 0; the
    # refusal comes alone, without NumPy's overflow RuntimeWarnings on the way (errors here)
    with pytest.raises(ValueError, match="^rewards must be small enough"):
        group_advantages([1e200, -1e200], "grpo")
    with pytest.raises(ValueError, match="^rewards must be small enough"):
        group_advantages([1.7e308, 1.7e308, -1e308], "dr-grpo")  # the sum overflows
    with pytest.raises(ValueError, match="^rewards must be small enough"):
        group_advantages([1.7e308, 1.7e308, -1.7e308, -1.7e308], "grpo")  # inf - inf in the sum
    with pytest.raises(ValueError, match="^rewards must be small enough"):
        group_advantages([[0.0, 1.0], [1e200, -1e200]], "trl-batch")
    with pytest.raises(ValueError, match="^rewards must be small enough"):
        focal_advantages([1e200, -1e200], 1.0, "grpo")
    with pytest.raises(ValueError, match="^r_correct must be such that"):
        binary_advantages(1, 2, r_correct=1e308, r_incorrect=-1e308)


# ---------------------------------------------------------------------------------------------
# Issue 13: trainer conventions found in TRL's and verl's source, hand-computed.


def test_trl_batch_uses_group_mean_and_batch_std():
    r = np.array([[1.0, 0, 0, 1], [1, 1, 1, 0]])
    # batch: 5 ones of 8, mean 5/8, Bessel var = (5 (3/8)^2 + 3 (5/8)^2) / 7 = 15/56
    s = math.sqrt(15 / 56) + 1e-4
    expected = np.array([[0.5, -0.5, -0.5, 0.5], [0.25, 0.25, 0.25, -0.75]]) / s
    np.testing.assert_allclose(group_advantages(r, "trl-batch"), expected, rtol=1e-15)
    with pytest.raises(ValueError, match="^advantage must be group-scoped"):
        binary_advantages(1, 4, "trl-batch")


def test_verl_vectorized_floors_the_variance():
    # Bessel var of [1, 0] is 1/2 > 1e-6: divisor sqrt(1/2) + 1e-6
    a = 0.5 / (math.sqrt(0.5) + 1e-6)
    np.testing.assert_allclose(group_advantages([1.0, 0.0], "verl-vectorized"), [a, -a], rtol=1e-15)
    # rewards 1e-4 apart: Bessel var 5e-9 < 1e-6, so the divisor is sqrt(1e-6) + 1e-6 = 1.001e-3
    adv = group_advantages([1e-4, 0.0], "verl-vectorized")
    np.testing.assert_allclose(adv, [0.5e-4 / 1.001e-3, -0.5e-4 / 1.001e-3], rtol=1e-12)
    np.testing.assert_allclose(group_advantages([0.7], "verl-vectorized"), [0.7 / (1 + 1e-6)])
    pos, neg = binary_advantages(1, 2, "verl-vectorized", r_correct=1e-4, r_incorrect=0.0)
    np.testing.assert_allclose((pos, neg), adv, rtol=1e-12)


def test_singleton_group_presets():
    np.testing.assert_array_equal(group_advantages([[0.7], [-1.0]], "verl-dr-grpo"), [[0.7], [-1]])
    np.testing.assert_array_equal(group_advantages([[0.7], [-1.0]], "verl-rloo"), [[0.7], [-1]])
    np.testing.assert_array_equal(group_advantages([[0.7], [-1.0]], "trl-rloo"), [[0.0], [0.0]])
    assert binary_advantages(1, 1, "verl-rloo") == (1.0, 0.0)
    assert binary_advantages(0, 1, "verl-dr-grpo") == (0.0, -1.0)
    # groups of two or more: verl-rloo / trl-rloo are RLOO, verl-dr-grpo is Dr.GRPO
    r = [1.0, 0.0, 0.0, 0.0]
    for name in ("verl-rloo", "trl-rloo"):
        np.testing.assert_allclose(group_advantages(r, name), [1.0, -1 / 3, -1 / 3, -1 / 3])
    np.testing.assert_allclose(group_advantages(r, "verl-dr-grpo"), [0.75, -0.25, -0.25, -0.25])


def test_preset_names_are_lower_case_hyphenated():
    for name in PRESETS:
        assert re.fullmatch(r"[a-z]+(-[a-z]+)*", name), name


# ---------------------------------------------------------------------------------------------
# Issue 11 item 6: mu_hat from the declared reward pair (P-11), hand-computed.


@pytest.mark.parametrize(
    ("rc", "rw"), [(0.0, -1.0), (2.0, 1.0), (1.0, 0.0)], ids=["0/-1", "2/1", "1/0"]
)
def test_focal_success_rate_follows_the_reward_pair(rc, rw):
    # 1 correct of 4: mu_hat = 1/4, g = (3/4)^2 = 0.5625 at gamma = 2; Dr.GRPO A = R - mean R,
    # i.e. (rc - rw) * [3/4, -1/4, -1/4, -1/4].
    r = [rc, rw, rw, rw]
    out = focal_advantages(r, 2.0, "dr-grpo", r_correct=rc, r_incorrect=rw)
    np.testing.assert_allclose(out, 0.5625 * (rc - rw) * np.array([0.75, -0.25, -0.25, -0.25]))
    # 3 correct of 4: g = 1/4 at gamma = 1
    r = [rc, rc, rw, rc]
    out = focal_advantages(r, 1.0, "dr-grpo", r_correct=rc, r_incorrect=rw)
    np.testing.assert_allclose(out, 0.25 * (rc - rw) * np.array([0.25, 0.25, -0.75, 0.25]))


def test_focal_refuses_rewards_outside_the_pair():
    # {0, -1} under the default pair (1, -1): 0 is neither, refused rather than silently g = 1
    with pytest.raises(ValueError, match=r"^rewards must be r_correct = 1.0 or r_incorrect = -1.0"):
        focal_advantages([0.0, -1.0], 1.0)
    with pytest.raises(ValueError, match=r"; got 2.0$"):
        focal_advantages([2.0, 1.0], 1.0, r_correct=1.0, r_incorrect=0.0)
    with pytest.raises(ValueError, match=r"^r_correct must be > r_incorrect"):
        focal_advantages([2.0, 1.0], 1.0, r_correct=1.0, r_incorrect=2.0)
    # an explicit mask accepts any rewards
    out = focal_advantages([2.0, 1.0], 1.0, "dr-grpo", correct=[True, False])
    np.testing.assert_allclose(out, [0.25, -0.25])


# ---------------------------------------------------------------------------------------------
# Issue 10 items 11 and 13: shapes, ragged and complex input; lr_multiplier at large gamma.


def test_wrongly_shaped_gamma_names_the_argument():
    with pytest.raises(ValueError, match=r"^gamma must be broadcastable against mu_hat .*shape"):
        focal_weight([0.1, 0.2, 0.3], [1.0, 2.0])
    with pytest.raises(ValueError, match=r"^gamma must be broadcastable against mu of shape"):
        weighted_magnitudes([0.1, 0.2, 0.3], [1.0, 2.0])
    with pytest.raises(ValueError, match=r"^gamma must be broadcastable against the batch shape"):
        focal_advantages([[1.0, -1.0]] * 3, [1.0, 2.0])


def test_a_huge_gamma_broadcast_is_refused_before_allocating():
    # 1e5 groups of 4 against 1e5 gammas: (1e5, 1e5, 4) = 4e10 values, past the 2**27 bound.
    with pytest.raises(ValueError, match=r"^gamma must be inputs that broadcast to at most "):
        focal_advantages(np.zeros((10**5, 1, 4)), np.zeros(10**5))
    with pytest.raises(ValueError, match=r"^gamma must be inputs that broadcast to at most "):
        weighted_magnitudes(np.full((10**5, 1), 0.5), np.zeros(10**5))
    with pytest.raises(ValueError, match=r"^X must be broadcastable against N of shape \(3,\)"):
        binary_advantages([1, 2], [3, 4, 5])
    # gamma values x (N + 1) counts: effective_lr_multiplier's weight table is bounded too
    with pytest.raises(ValueError, match=r"^gamma must be inputs that broadcast to at most "):
        effective_lr_multiplier(0.5, 10**4, np.zeros(10**5))


@pytest.mark.parametrize(
    "call",
    [
        lambda v: group_advantages(v),
        lambda v: focal_weight(v, 1.0),
        lambda v: focal_weight(0.5, v),
        lambda v: weighted_magnitudes(v, 1.0),
        lambda v: lr_multiplier(v),
    ],
)
def test_ragged_and_complex_inputs_are_refused(call):
    with pytest.raises(ValueError, match=r"must be a number or a rectangular \(not ragged\)"):
        call([[0.5, 0.5], [0.5]])
    with pytest.raises(ValueError, match=r"must be real \(not complex\)"):
        call(np.array([0.5 + 0.1j, 0.5]))
    with pytest.raises(ValueError, match=r"must be real \(not complex\)"):
        call([0.5 + 0.1j, 0.5])


@pytest.mark.parametrize("gamma", [1e3, 12345.678, 1e5, 1e6, 19.0, 18.4, 18.6, 1e12])
def test_lr_multiplier_large_gamma_mpmath(gamma):
    # mpmath at 60 digits: m = B(3/2, g + 3/2) / B(3/2, 3/2)
    with mpmath.workdps(60):
        g = mpmath.mpf(gamma)
        ref = mpmath.beta(mpmath.mpf(1.5), g + 1.5) / mpmath.beta(mpmath.mpf(1.5), mpmath.mpf(1.5))
    assert abs(lr_multiplier(gamma) - float(ref)) <= 1e-13 * float(ref)


def test_lr_multiplier_positive_far_out_and_refused_beyond():
    for g in (1e100, 1e200):
        v = lr_multiplier(g)
        # leading term (4 / sqrt(pi)) g^-1.5 (relative corrections ~1/g vanish here)
        assert v > 0 and abs(v / (4 / math.sqrt(math.pi) * g**-1.5) - 1) < 1e-12
    with pytest.raises(ValueError, match=r"^gamma must be <= 1e200 .*; got 1e\+201$"):
        lr_multiplier(1e201)


# ---------------------------------------------------------------------------------------------
# Population learning-rate multiplier (theory.md section 13).


def _h_enumerated(mu, n, gamma):
    # h = E[g(X/N) sqrt(X (N - X))] / N by direct summation with math.comb (section 6)
    total = 0.0
    for x in range(n + 1):
        p = math.comb(n, x) * mu**x * (1 - mu) ** (n - x)
        total += p * (1 - x / n) ** gamma * math.sqrt(x * (n - x))
    return total / n


@pytest.mark.parametrize(("mu", "n"), [(0.3, 8), (0.05, 64), (0.9, 3), (0.5, 2)])
def test_effective_lr_multiplier_single_mu_is_h_ratio(mu, n):
    from fgrpo_theory.advantages import effective_lr_multiplier

    for gamma in (0.5, 1.0, 2.0):
        ref = _h_enumerated(mu, n, gamma) / _h_enumerated(mu, n, 0.0)
        assert abs(effective_lr_multiplier(mu, n, gamma) - ref) < 1e-13


def test_effective_lr_multiplier_uniform_limit_is_m_gamma():
    from fgrpo_theory.advantages import effective_lr_multiplier

    mu = (np.arange(2000) + 0.5) / 2000  # midpoint grid of Uniform(0, 1)
    out = effective_lr_multiplier(mu, 2000, [0.5, 1.0, 2.0])
    np.testing.assert_allclose(out, lr_multiplier([0.5, 1.0, 2.0]), rtol=2e-5)


def test_effective_lr_multiplier_weights_and_errors():
    from fgrpo_theory.advantages import effective_lr_multiplier

    # a two-atom mixture equals the weighted sums of the atoms' numerators and denominators
    n, gamma = 8, 1.0
    num = sum(w * _h_enumerated(m, n, gamma) for m, w in [(0.2, 0.25), (0.7, 0.75)])
    den = sum(w * _h_enumerated(m, n, 0.0) for m, w in [(0.2, 0.25), (0.7, 0.75)])
    got = effective_lr_multiplier([0.2, 0.7], n, gamma, weights=[1.0, 3.0])
    assert abs(got - num / den) < 1e-13
    assert effective_lr_multiplier([0.2, 0.7], n, 0.0) == pytest.approx(1.0, abs=1e-15)
    with pytest.raises(ValueError, match=r"^mu must be giving some active group"):
        effective_lr_multiplier([0.0, 1.0], 8, 1.0)
    with pytest.raises(ValueError, match=r"^N must be such that len\(mu\) \* \(N \+ 1\) <= "):
        effective_lr_multiplier(np.full(100, 0.5), 10**6, 1.0)
    with pytest.raises(ValueError, match=r"^weights must be of the length of mu"):
        effective_lr_multiplier([0.2, 0.7], 8, 1.0, weights=[1.0])
    with pytest.raises(ValueError, match=r"^advantage must be group-scoped"):
        effective_lr_multiplier(0.3, 8, 1.0, advantage="trl-batch")


def test_binary_and_population_refuse_complex_and_ragged():
    from fgrpo_theory.advantages import effective_lr_multiplier

    with pytest.raises(ValueError, match=r"^X must be real \(not complex\); got \(1\+2j\)$"):
        binary_advantages(np.array([1 + 2j]), 4)
    with pytest.raises(ValueError, match=r"^N must be a number or a rectangular"):
        binary_advantages(1, [[4, 4], [4]])
    with pytest.raises(ValueError, match=r"^mu must be real \(not complex\)"):
        effective_lr_multiplier(np.array([0.3 + 0j]), 8, 1.0)
