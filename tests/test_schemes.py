"""The schemes registry: spec grammar, per-X tables against hand cases and against exact
enumeration of the expected update, the array-API function, and the simulators' scheme field."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from fgrpo_theory.advantages import focal_advantages
from fgrpo_theory.schemes import SCHEMES, parse_scheme

# -- grammar ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "spec, canonical",
    [
        ("grpo", "grpo"),
        ("focal:gamma=1", "grpo+focal:gamma=1"),
        ("focal", "grpo+focal:gamma=1"),
        ("  TRL + focal:gamma=0.5 ", "trl+focal:gamma=0.5"),
        ("maxrl", "maxrl"),
        ("w-reinforce", "w-reinforce"),
        ("w-reinforce:lambda=0.1", "w-reinforce"),
        ("w-reinforce:lambda=0.25", "w-reinforce:lambda=0.25"),
        ("pkpo:k=2", "pkpo:k=2"),
        ("kl:estimator=k3,coef=0.01+maxrl", "maxrl+kl:coef=0.01,estimator=k3"),
        ("entropy:coef=1e-3", "grpo+entropy"),
        ("kl+entropy", "grpo+entropy+kl"),
    ],
)
def test_canonical_specs(spec, canonical):
    s = parse_scheme(spec)
    assert s.spec == canonical
    assert parse_scheme(s.spec) == s  # canonical text parses back to the same scheme


@pytest.mark.parametrize(
    "spec, message",
    [
        ("nope", "scheme must be one of grpo"),
        ("maxrl:k=2", "scheme maxrl must be a parameter of maxrl (none); got 'k'"),
        ("pkpo:k=0", "scheme pkpo:k must be an integer >= 1; got '0'"),
        ("pkpo:k=1.5", "scheme pkpo:k must be an integer >= 1; got '1.5'"),
        ("focal:gamma=-1", "scheme focal:gamma must be a number >= 0; got '-1'"),
        ("focal:gamma=nan", "scheme focal:gamma must be a number >= 0; got 'nan'"),
        ("kl:estimator=k2", "scheme kl:estimator must be one of exact, k3; got 'k2'"),
        ("maxrl+grpo", "one advantage term (two schemes where one is allowed)"),
        ("focal+focal", "at most one focal term"),
        ("kl+kl", "at most one kl term"),
        ("grpo+", "terms joined by '+'"),
        ("pkpo:k", "parameters written as pkpo:key=value"),
        ("pkpo:k=2,k=3", "scheme pkpo must be given once; got 'k'"),
        ("", "scheme must be a scheme spec"),
    ],
)
def test_bad_specs_are_one_line_errors(spec, message):
    with pytest.raises(ValueError) as e:
        parse_scheme(spec)
    assert message in str(e.value)
    assert "\n" not in str(e.value)


def test_every_entry_names_its_paper_and_role():
    for name, d in SCHEMES.items():
        assert d.name == name
        assert d.role in ("advantage", "modifier", "regularizer")
        assert d.paper and d.summary
        for p in d.params:  # defaults are valid values
            assert p.coerce(p.default, name) == p.default


# -- tables: hand cases ----------------------------------------------------------------------


def test_tables_by_hand():
    # MaxRL, N = 4: A = (r - mean)/mean with r in {0, 1}; X = 1: mean 1/4 -> +3 and -1
    a_c, a_w = parse_scheme("maxrl").tables(4)
    np.testing.assert_allclose(a_c, [0, 3, 1, 1 / 3, 0])
    np.testing.assert_allclose(a_w, [0, -1, -1, -1, 0])
    a_c, a_w = parse_scheme("w-reinforce:lambda=0.1").tables(3)
    np.testing.assert_allclose(a_c, [0, 0.1, 0.1, 0.1])
    np.testing.assert_allclose(a_w, [-1, -1, -1, 0])
    a_c, a_w = parse_scheme("psr").tables(2)
    np.testing.assert_allclose(a_c, [0, 1, 1])
    np.testing.assert_allclose(a_w, [0, 0, 0])
    a_c, a_w = parse_scheme("nsr").tables(2)
    np.testing.assert_allclose(a_c, [0, 0, 0])
    np.testing.assert_allclose(a_w, [-1, -1, 0])
    # PKPO N = 4, k = 2: correct k/N = 1/2; incorrect (k/N)(1 - C(3-X, 1)/C(3, 1))
    a_c, a_w = parse_scheme("pkpo:k=2,estimator=plain").tables(4)
    np.testing.assert_allclose(a_c, [0, 0.5, 0.5, 0.5, 0.5])
    np.testing.assert_allclose(a_w, [0, 0.5 / 3, 1 / 3, 0.5, 0])
    # s^(loo-1): n = 8, k = 4, X = 2 -> correct (4/8) C(6, 3) / C(7, 3) = 2/7, incorrect 0
    a_c, a_w = parse_scheme("pkpo").tables(8)
    assert a_c[2] == pytest.approx(2 / 7, rel=1e-15)
    assert not a_w.any()
    # focal on a convention: the simulator's old tables (binary_advantages x focal weight)
    a_c, a_w = parse_scheme("grpo+focal:gamma=1").tables(4, 1.0, -1.0)
    x = np.arange(5) / 4
    with np.errstate(divide="ignore", invalid="ignore"):
        pos = np.where((x > 0) & (x < 1), np.sqrt((1 - x) / np.where(x > 0, x, 1)), 0)
        neg = np.where((x > 0) & (x < 1), -np.sqrt(x / np.where(x < 1, 1 - x, 1)), 0)
    np.testing.assert_allclose(a_c, pos * (1 - x), atol=1e-15)
    np.testing.assert_allclose(a_w, neg * (1 - x), atol=1e-15)


def test_tables_refuse_what_they_cannot_express():
    with pytest.raises(ValueError, match="scheme pkpo:k must be <= N = 4; got 5"):
        parse_scheme("pkpo:k=5").tables(4)
    with pytest.raises(ValueError, match="per-X tables"):
        parse_scheme("trl-batch").tables(4)


# -- tables: expected update against exact enumeration ---------------------------------------


def _expected_gradient(scheme, N, p, correct):
    """E[(1/N) sum_i A_i grad log p(a_i)] w.r.t. the logits of a tabular softmax, by summing
    over every ordered group of N actions (independent of section 15's formula)."""
    K = len(p)
    g = np.zeros(K)
    a_c, a_w = scheme.tables(N, 1.0, 0.0)
    for group in itertools.product(range(K), repeat=N):
        prob = math.prod(p[a] for a in group)
        X = sum(correct[a] for a in group)
        for a in group:
            A = a_c[X] if correct[a] else a_w[X]
            dlog = -p.copy()
            dlog[a] += 1.0
            g += prob * A * dlog / N
    return g


def _grad_mu(p, correct):
    mu = float(p[correct].sum())
    return p * (correct.astype(float) - mu), mu


@pytest.mark.parametrize("N", [2, 3, 4])
def test_pkpo_expected_update_is_grad_pass_at_k(N):
    p = np.array([0.2, 0.1, 0.3, 0.4])
    correct = np.array([True, True, False, False])
    dmu, mu = _grad_mu(p, correct)
    for k, est in itertools.product(range(1, N + 1), ("plain", "loo-1")):
        g = _expected_gradient(parse_scheme(f"pkpo:k={k},estimator={est}"), N, p, correct)
        # d pass@k / d z = k (1 - mu)^(k - 1) d mu / d z; with the (1/N) surrogate, pass@k / N
        np.testing.assert_allclose(g * N, k * (1 - mu) ** (k - 1) * dmu, atol=1e-14)


@pytest.mark.parametrize("N", [2, 3, 5])
def test_maxrl_expected_update_is_sum_pass_at_k_over_k(N):
    p = np.array([0.15, 0.05, 0.5, 0.3])
    correct = np.array([True, True, False, False])
    dmu, mu = _grad_mu(p, correct)
    g = _expected_gradient(parse_scheme("maxrl"), N, p, correct)
    # sum_{k<N} (1/k) d pass@k = sum_{k<N} (1 - mu)^(k-1) d mu (theory.md section 15)
    H = sum((1 - mu) ** (k - 1) for k in range(1, N))
    np.testing.assert_allclose(g, H * dmu, atol=1e-14)


# -- the array-API function ------------------------------------------------------------------


def test_array_advantages_gather_the_tables():
    r = np.array([[1.0, 0, 0, 0], [1, 1, 0, 1], [0, 0, 0, 0], [1, 1, 1, 1]])
    A = parse_scheme("maxrl").advantages(r)
    np.testing.assert_allclose(A[0], [3, -1, -1, -1])
    np.testing.assert_allclose(A[1], [1 / 3, 1 / 3, -1, 1 / 3])
    np.testing.assert_allclose(A[2:], 0)
    A = parse_scheme("w-reinforce").advantages(r)
    np.testing.assert_allclose(A[0], [0.1, -1, -1, -1])


def test_array_conventions_by_hand_and_focal_against_the_advantages_module():
    # hand cases (one group, rewards 1, 0, 0, 0): GRPO's population std is sqrt(3)/4, so the
    # correct rollout gets 0.75 / (sqrt(3)/4) = sqrt(3) and the others -1/sqrt(3); RLOO gives
    # 4/3 (r - mean) = 1 and -1/3; Dr.GRPO r - mean = 0.75 and -0.25
    one = np.array([[1.0, 0.0, 0.0, 0.0]])
    s3 = np.sqrt(3.0)
    np.testing.assert_allclose(
        parse_scheme("grpo").advantages(one), [[s3, -1 / s3, -1 / s3, -1 / s3]]
    )
    np.testing.assert_allclose(
        parse_scheme("rloo").advantages(one), [[1.0, -1 / 3, -1 / 3, -1 / 3]]
    )
    np.testing.assert_allclose(
        parse_scheme("dr-grpo").advantages(one), [[0.75, -0.25, -0.25, -0.25]]
    )
    # non-binary rewards: TRL's Bessel std of 0, 1, 2, 3 is sqrt(5/3), plus 1e-4
    rr = np.array([[0.0, 1.0, 2.0, 3.0]])
    ref = (rr - 1.5) / (np.sqrt(5.0 / 3.0) + 1e-4)
    np.testing.assert_allclose(parse_scheme("trl").advantages(rr), ref, rtol=1e-14)
    # focal with correctness given: the weight (1 - X/N) = 1/2 for X = 2 of 4
    A = parse_scheme("trl+focal:gamma=1").advantages(rr, correct=rr > 1.5)
    np.testing.assert_allclose(A, 0.5 * ref, rtol=1e-14)
    # focal on binary rewards against focal_advantages (its own reading of mu_hat from the pair)
    rng = np.random.default_rng(0)
    r = (rng.random((50, 6)) < 0.4).astype(float)
    for conv in ("grpo", "trl", "dr-grpo", "rloo", "trl-batch"):
        A = parse_scheme(f"{conv}+focal:gamma=0.5").advantages(r)
        B = focal_advantages(r, 0.5, conv, r_correct=1.0, r_incorrect=0.0)
        np.testing.assert_allclose(A, B, rtol=0, atol=1e-15)


def test_array_refusals():
    with pytest.raises(ValueError, match="rewards must be 0 or 1 for scheme 'maxrl'"):
        parse_scheme("maxrl").advantages([[0.5, 1.0]])
    with pytest.raises(ValueError, match="correct must be a boolean array"):
        parse_scheme("maxrl").advantages([[0.0, 1.0]], correct=[[0, 1]])
    with pytest.raises(ValueError, match="correct must be the shape of rewards"):
        parse_scheme("maxrl").advantages([[0.0, 1.0]], correct=np.array([True, False]))


def test_array_torch_matches_numpy():
    torch = pytest.importorskip("torch")
    r = np.array([[1.0, 0, 0, 1, 1, 0], [0, 0, 0, 1, 0, 0]])
    for spec in ("maxrl", "pkpo:k=3", "trl+focal:gamma=1", "nsr"):
        a = parse_scheme(spec).advantages(r)
        t = parse_scheme(spec).advantages(torch.tensor(r))
        assert isinstance(t, torch.Tensor)
        np.testing.assert_allclose(t.numpy(), a, rtol=1e-15, atol=1e-15)
    # correctness given as a torch bool tensor (or a NumPy one) next to non-binary rewards
    rr = torch.tensor([[0.2, -1.0, 0.7, 0.1]], dtype=torch.float64)
    mask = rr > 0.15
    for m in (mask, mask.numpy()):
        t = parse_scheme("maxrl").advantages(rr, correct=m)
        np.testing.assert_allclose(t.numpy(), [[1.0, -1.0, 1.0, -1.0]])


# -- the simulators' scheme field ------------------------------------------------------------


def test_sim_config_folds_convention_specs():
    from fgrpo_theory.sim import SimConfig
    from fgrpo_theory.sim.grid import config_hash

    a = SimConfig(scheme="trl+focal:gamma=1")
    b = SimConfig(advantage="trl", gamma=1.0)
    assert a == b and config_hash(a) == config_hash(b)
    assert a.scheme == "" and a.training_scheme().spec == "trl+focal:gamma=1"
    m = SimConfig(scheme="maxrl + focal:gamma=0.5")
    assert m.scheme == "maxrl+focal:gamma=0.5"
    assert config_hash(m) != config_hash(SimConfig())
    assert m.replace(seed=1).scheme == m.scheme


def test_sim_config_refuses_two_schemes():
    from fgrpo_theory.sim import SimConfig

    with pytest.raises(ValueError, match="scheme must be the only scheme of a config"):
        SimConfig(scheme="maxrl", gamma=1.0)
    with pytest.raises(ValueError, match="scheme must be the only scheme of a config"):
        SimConfig(scheme="maxrl", advantage="trl")
    with pytest.raises(ValueError, match="scheme must be one of"):
        SimConfig(scheme="nope")


def test_simulate_runs_a_scheme_and_labels_rows():
    from fgrpo_theory.sim import SimConfig, simulate

    cfg = SimConfig(K=6, correct=2, N=4, steps=20, seeds=3, scheme="maxrl", log_every=10)
    df = simulate(cfg)
    assert set(df["scheme"]) == {"maxrl"}
    assert np.all(np.isfinite(df["q_pos"]))
    legacy = simulate(SimConfig(K=6, correct=2, N=4, steps=20, seeds=3, log_every=10))
    assert set(legacy["scheme"]) == {"grpo"}
