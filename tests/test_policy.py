"""Policies (spec grammar: tests/test_spec.py): the 128,000-action start, checks, file loading."""

from __future__ import annotations

import mpmath as mp
import numpy as np
import pytest

from fgrpo_theory.policy import (
    check_policy,
    load_policy,
    paper_policy,
    policy_from_specs,
    probabilities,
    success_probability,
)


def test_paper_policy_matches_appendix_j():
    z, c = paper_policy()
    assert z.shape == c.shape == (128_000,)
    assert c.sum() == 10_000 and c[:10_000].all() and not c[10_000:].any()
    assert z[0] == 5.0 and (z[1:10_000] == 3.0).all() and (z[10_000:] == 0.0).all()
    # mu = (e^5 + 9999 e^3) / (e^5 + 9999 e^3 + 118000), 50 digits:
    # mp.dps = 50; (mp.e**5 + 9999*mp.e**3) / (mp.e**5 + 9999*mp.e**3 + 118000)
    mp.mp.dps = 50
    mu_ref = (mp.e**5 + 9999 * mp.e**3) / (mp.e**5 + 9999 * mp.e**3 + 118000)
    assert success_probability(z, c) == pytest.approx(float(mu_ref), rel=1e-13)
    assert abs(success_probability(z, c) - 0.63) < 0.001  # "Q_pos is about 0.63"
    p = probabilities(z)
    assert p.sum() == pytest.approx(1.0, abs=1e-12)


def test_policy_from_specs_puts_correct_first_and_allows_no_incorrect():
    z, c = policy_from_specs("2.0x2", "")
    np.testing.assert_array_equal(z, [2.0, 2.0])
    assert c.all()
    with pytest.raises(ValueError, match="^correct must be non-empty"):
        policy_from_specs("", "0x3")


def test_check_policy_validation():
    with pytest.raises(ValueError, match="^logits must be a finite number; got nan"):
        check_policy([0.0, np.nan], [True, False])
    with pytest.raises(ValueError, match="^correct must be a mask with at least one correct"):
        check_policy([0.0, 1.0], [False, False])
    with pytest.raises(ValueError, match="^correct must be a mask of booleans or 0/1 values"):
        check_policy([0.0, 1.0], [2, 0])
    with pytest.raises(ValueError, match="^correct must be of the logits' shape"):
        check_policy([0.0, 1.0], [True])
    z, c = check_policy([0.0, 1.0], [1, 0])
    assert c.dtype == bool and c.tolist() == [True, False]


def test_load_policy_npy_and_csv(tmp_path):
    z = np.array([1.0, 0.5, -2.0])
    np.save(tmp_path / "z.npy", z)
    np.save(tmp_path / "m.npy", np.array([True, False, True]))
    (tmp_path / "z.csv").write_text("1.0\n0.5\n-2.0\n")
    (tmp_path / "m.csv").write_text("1,0,1\n")
    for zf, mf in [("z.npy", "m.npy"), ("z.csv", "m.csv"), ("z.npy", "m.csv")]:
        zz, cc = load_policy(tmp_path / zf, tmp_path / mf)
        np.testing.assert_array_equal(zz, z)
        assert cc.tolist() == [True, False, True]
    zz, cc = load_policy(tmp_path / "z.csv", n_correct=2)
    assert cc.tolist() == [True, True, False]


def test_load_policy_errors(tmp_path):
    (tmp_path / "bad.csv").write_text("1.0,nan\n")
    (tmp_path / "z.csv").write_text("1.0,2.0\n")
    (tmp_path / "m.csv").write_text("0,0\n")
    (tmp_path / "short.csv").write_text("1\n")
    (tmp_path / "z.txtx").write_text("1\n")
    with pytest.raises(ValueError, match="^logits_path must be a finite number .entry 1 of"):
        load_policy(tmp_path / "bad.csv", n_correct=1)
    with pytest.raises(ValueError, match="^correct_mask_path must be a mask with at least one"):
        load_policy(tmp_path / "z.csv", tmp_path / "m.csv")
    with pytest.raises(ValueError, match="^correct_mask_path must be one value per action"):
        load_policy(tmp_path / "z.csv", tmp_path / "short.csv")
    with pytest.raises(ValueError, match="^n_correct must be >= 1; got 0"):
        load_policy(tmp_path / "z.csv", n_correct=0)
    with pytest.raises(ValueError, match="^correct_mask_path must be given alone"):
        load_policy(tmp_path / "z.csv")
    with pytest.raises(ValueError, match="^logits_path must be a .npy or .csv file"):
        load_policy(tmp_path / "z.txtx", n_correct=1)
    with pytest.raises(ValueError, match="^logits_path must be an existing file"):
        load_policy(tmp_path / "missing.npy", n_correct=1)
    with pytest.raises(ValueError, match="^logits_path must be a .npy or .csv file"):
        load_policy(tmp_path, n_correct=1)  # a folder
    (tmp_path / "bin.csv").write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ValueError, match="^logits_path must be a readable UTF-8 text file"):
        load_policy(tmp_path / "bin.csv", n_correct=1)


def test_softmax_uses_the_c_librarys_exp_and_is_within_an_ulp_of_scipys():
    """policy._softmax: scipy.special.softmax's operations with the C library's exp per element
    (Python's math.exp is the oracle), whatever exp NumPy picked for this CPU; within rounding
    of scipy's (which uses NumPy's exp)."""
    import math

    import numpy as np
    from scipy.special import softmax

    from fgrpo_theory.policy import _softmax, probabilities

    def oracle(z):
        shifted = z - z.max(axis=-1, keepdims=True)
        e = np.array([math.exp(v) for v in shifted.ravel()]).reshape(z.shape)
        return e / e.sum(axis=-1, keepdims=True)

    rng = np.random.default_rng(7)
    for shape in [(1,), (6,), (1000,), (4, 1024), (3, 5, 7)]:
        for scale in (1e-3, 1.0, 30.0, 700.0):
            z = rng.standard_normal(shape) * scale
            assert np.array_equal(_softmax(z), oracle(z)), (shape, scale)
            np.testing.assert_allclose(_softmax(z), softmax(z, axis=-1), rtol=2e-15, atol=1e-300)
    z = np.array([5.0] + [3.0] * 9999 + [0.0] * 118000)
    assert np.array_equal(probabilities(z), oracle(z))


def test_log_probabilities_use_the_c_library_and_match_mpmath():
    """log softmax: tmp - log(sum(exp(tmp))) with the C library's exp and log (the oracle:
    Python's math), and within rounding (2e-15) of a 50-digit mpmath value (hand-sized cases)."""
    import math

    import mpmath
    import numpy as np

    from fgrpo_theory.policy import log_probabilities

    rng = np.random.default_rng(3)
    for shape in [(2,), (6,), (5, 64)]:
        z = rng.standard_normal(shape) * 3.0
        tmp = z - z.max(axis=-1, keepdims=True)
        s = np.array([math.exp(v) for v in tmp.ravel()]).reshape(z.shape).sum(-1, keepdims=True)
        want = tmp - np.array([math.log(v) for v in s.ravel()]).reshape(s.shape)
        assert np.array_equal(log_probabilities(z), want)
    mpmath.mp.dps = 50
    z = [0.3, -1.7, 2.25, 0.0, -40.0]
    lse = mpmath.log(mpmath.fsum(mpmath.exp(mpmath.mpf(v)) for v in z))
    exact = np.array([float(mpmath.mpf(v) - lse) for v in z])
    np.testing.assert_allclose(log_probabilities(np.array(z)), exact, rtol=1e-15, atol=2e-15)
    assert log_probabilities(np.array([[0.0, 0.0]]))[0, 0] == -math.log(2.0)  # by hand
