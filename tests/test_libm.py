"""fgrpo_theory._libm: the C library's exp, log and pow per element (Python's math module, which
calls the C library, is the oracle), NumPy's special cases and values at the edges."""

import math

import numpy as np
import pytest

from fgrpo_theory import _libm


def _c(func, a, *args):
    return np.array([func(v, *args) for v in np.ravel(a)]).reshape(np.shape(a))


def test_each_element_is_the_c_librarys_value():
    rng = np.random.default_rng(11)
    x = rng.random((300, 70))  # 21,000 values: NumPy's AVX-512 log differs on ~0.3 % of them
    assert np.array_equal(_libm.log(x), _c(math.log, x))
    z = rng.standard_normal(20_000) * 50
    assert np.array_equal(_libm.exp(z), _c(math.exp, z))
    for k in (3, 4, 16, 1024):
        assert np.array_equal(_libm.power(x, k), _c(math.pow, x, float(k))), k


def test_numpys_special_cases_of_small_powers_and_the_edges():
    x = np.array([0.0, 1e-300, 0.3, 0.7, 1.0])
    assert np.array_equal(_libm.power(x, 1), x)
    assert np.array_equal(_libm.power(x, 2), x * x)  # NumPy computes x ** 2 as a square
    assert np.array_equal(_libm.power(x, 5)[[0, 4]], [0.0, 1.0])
    e = _libm.exp(np.array([-np.inf, -1e4, 0.0, 709.0, 710.0, np.inf, np.nan]))
    assert e[0] == 0.0 and e[1] == 0.0 and e[2] == 1.0 and e[3] == math.exp(709.0)
    assert e[4] == np.inf and e[5] == np.inf and np.isnan(e[6])
    lg = _libm.log(np.array([0.0, -1.0, np.nan, np.inf, 1.0, np.e]))
    assert lg[0] == -np.inf and np.isnan(lg[1]) and np.isnan(lg[2]) and lg[3] == np.inf
    assert lg[4] == 0.0 and lg[5] == math.log(math.e)
    assert _libm.log(np.ones((2, 0))).shape == (2, 0)


def test_power_refuses_what_it_is_not_for():
    with pytest.raises(ValueError, match=r"^k must be an integer >= 1; got 0"):
        _libm.power(np.array([0.5]), 0)
    with pytest.raises(ValueError, match=r"^k must be an integer >= 1; got 2.5"):
        _libm.power(np.array([0.5]), 2.5)
    with pytest.raises(ValueError, match=r"^x must be probabilities in \[0, 1\]; got 1.5"):
        _libm.power(np.array([0.5, 1.5]), 3)


def test_results_are_laid_out_as_numpys():
    """A ufunc's result keeps its input's memory order (order 'K'), and a later reduction's
    rounding depends on it: a transposed input gives a transposed result, as NumPy's does."""
    x = np.random.default_rng(5).random((3, 7, 5)).transpose(2, 0, 1)
    for got, numpys in ((_libm.exp(x), np.exp(x)), (_libm.log(x), np.log(x)),
                        (_libm.power(x, 1), x**1), (_libm.power(x, 2), x**2),
                        (_libm.power(x, 5), x**5)):  # fmt: skip
        assert got.strides == numpys.strides
