"""fgrpo_theory._libm: the C library's exp, log and pow per element (Python's math module, which
calls the C library, is the oracle), NumPy's special cases and values at the edges."""

import math

import numpy as np
import pytest

from fgrpo_theory import _libm


def _c(func, a, *args):
    return np.array([func(v, *args) for v in np.ravel(a)]).reshape(np.shape(a))


@pytest.fixture(params=["python", "compiled"])
def path(request, monkeypatch):
    """Both loops of _libm: Python's (no array is large enough) and the compiled one (every
    array is; Numba loaded)."""
    if request.param == "compiled":
        import numba  # noqa: F401 - the compiled loop is taken only where Numba is loaded

        if not _libm._loops_available():
            pytest.skip("Numba uses SVML here: _libm keeps its Python loop")
        monkeypatch.setattr(_libm, "JIT_MIN_SIZE", 0)
        monkeypatch.setattr(_libm, "JIT_COMPILE_MIN_SIZE", 0)
    else:
        monkeypatch.setattr(_libm, "JIT_MIN_SIZE", 1 << 62)
    return request.param


def test_each_element_is_the_c_librarys_value(path):
    rng = np.random.default_rng(11)
    x = rng.random((300, 70))  # 21,000 values: NumPy's AVX-512 log differs on ~0.3 % of them
    assert np.array_equal(_libm.log(x), _c(math.log, x))
    z = rng.standard_normal(20_000) * 50
    assert np.array_equal(_libm.exp(z), _c(math.exp, z))
    for k in (3, 4, 16, 1024):
        assert np.array_equal(_libm.power(x, k), _c(math.pow, x, float(k))), k


def test_numpys_special_cases_of_small_powers_and_the_edges(path):
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


def test_results_are_laid_out_as_numpys(path):
    """A ufunc lays out its result by the input's memory order (transposed, reversed, broadcast)
    and gives a scalar for a 0-d input; a later reduction's rounding depends on the layout."""
    x = np.random.default_rng(5).random((3, 7, 5))
    inputs = [x.transpose(2, 0, 1), x[::-1, :, ::2], np.broadcast_to(x[:1], (4, 7, 5)),
              np.asarray(0.5), np.float64(0.25)]  # fmt: skip
    for a in inputs:
        for got, numpys in ((_libm.exp(a), np.exp(a)), (_libm.log(a), np.log(a)),
                            (_libm.power(a, 1), a**1), (_libm.power(a, 2), a**2),
                            (_libm.power(a, 5), a**5)):  # fmt: skip
            assert type(got) is type(numpys) and np.shape(got) == np.shape(numpys)
            assert getattr(got, "strides", None) == getattr(numpys, "strides", None)
        for got, func, more in ((_libm.exp(a), math.exp, ()), (_libm.log(a), math.log, ()),
                                (_libm.power(a, 5), math.pow, (5.0,))):  # fmt: skip
            assert np.array_equal(got, _c(func, a, *more))  # the values, element by element


def test_subnormal_and_underflowing_results_are_the_c_librarys(path):
    """Where the C library's error paths run: exp of -745..-700 (subnormal results, then 0),
    pow giving subnormals or underflowing, log of subnormals."""
    z = np.linspace(-745.2, -700.0, 40_001)
    assert np.array_equal(_libm.exp(z).view(np.int64), _c(math.exp, z).view(np.int64))
    x = np.geomspace(1e-200, 0.5, 5_001)
    for k in (3, 7, 1024, 3000):
        got, want = _libm.power(x, k), _c(math.pow, x, float(k))
        assert np.array_equal(got.view(np.int64), want.view(np.int64)), k
    t = np.geomspace(5e-324, 1e-300, 3_001)
    assert np.array_equal(_libm.log(t), _c(math.log, t))


def test_equal_to_numpy_where_numpy_calls_the_c_library():
    """The contract: NumPy's own values on a CPU where NumPy calls the C library. In a process
    with NumPy's AVX-512 loops turned off (NPY_DISABLE_CPU_FEATURES; on a CPU without them this
    changes nothing), _libm equals np.exp, np.log and ** on 200,000 values, and the policy's
    softmax and log-softmax equal scipy.special's bit for bit."""
    import os
    import subprocess
    import sys

    code = (
        "import numpy as np\n"
        "from scipy.special import log_softmax, softmax\n"
        "from fgrpo_theory import _libm\n"
        "from fgrpo_theory.policy import _softmax, log_probabilities\n"
        "rng = np.random.default_rng(2)\n"
        "x = rng.random(200_000); z = rng.standard_normal(200_000) * 30\n"
        "assert np.array_equal(_libm.exp(z), np.exp(z))\n"
        "assert np.array_equal(_libm.log(x), np.log(x))\n"
        "for k in (1, 2, 3, 4, 16, 256):\n"
        "    assert np.array_equal(_libm.power(x, k), x**k), k\n"
        "for shape in [(6,), (4, 1024), (3, 5, 7)]:\n"
        "    w = rng.standard_normal(shape) * 5\n"
        "    assert np.array_equal(_softmax(w), softmax(w, axis=-1))\n"
        "    assert np.array_equal(log_probabilities(w), log_softmax(w, axis=-1))\n"
        "print('equal')\n"
    )
    env = dict(os.environ)
    features = [
        f for f, on in _numpy_features().items() if on and f.startswith(("AVX512", "X86_V4"))
    ]
    if features:
        env["NPY_DISABLE_CPU_FEATURES"] = " ".join(features)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       timeout=120)  # fmt: skip
    assert r.returncode == 0 and "equal" in r.stdout, r.stderr[-2000:]


def _numpy_features() -> dict[str, bool]:
    from numpy._core._multiarray_umath import __cpu_features__

    return dict(__cpu_features__)


def test_a_small_array_compiles_no_loop_but_uses_a_compiled_one(monkeypatch):
    """Below ``JIT_COMPILE_MIN_SIZE`` elements the compiled loop is taken only if calling it
    compiles nothing (loaded, or in the disk cache, which is asked only from
    ``JIT_DISK_MIN_SIZE`` elements): a first simulate at K = 1,000 paid 0.3 s to compile it for
    1,000 exps, a warm one 30 ms to ask the disk cache. The values are the C library's either
    way."""
    import numba  # noqa: F401 - the compiled loop is taken only where Numba is loaded

    from fgrpo_theory import _libm_loops as lp

    if not _libm._loops_available():
        pytest.skip("Numba uses SVML here: _libm keeps its Python loop")
    calls = []
    real = lp.exp_into
    monkeypatch.setattr(lp, "exp_into", lambda x, out: calls.append(x.size) or real(x, out))
    x = np.linspace(-5.0, 5.0, 1000)
    asked = []
    for ready, taken in ((False, []), (True, [1000])):
        calls.clear()
        monkeypatch.setattr(
            lp, "ready", lambda loop, ask_disk, r=ready: asked.append(ask_disk) or r
        )
        assert np.array_equal(_libm.exp(x), _c(math.exp, x))
        assert calls == taken
    mid = np.linspace(-5.0, 5.0, _libm.JIT_DISK_MIN_SIZE)
    assert np.array_equal(_libm.exp(mid), _c(math.exp, mid))
    assert asked == [False, False, True]  # the disk is asked about the larger array only
    monkeypatch.setattr(lp, "ready", lambda loop, ask_disk: False)
    calls.clear()
    big = np.linspace(-5.0, 5.0, _libm.JIT_COMPILE_MIN_SIZE)
    assert np.array_equal(_libm.exp(big), _c(math.exp, big))
    assert calls == [big.size]  # large enough to pay for compiling it
    monkeypatch.undo()
    assert lp.ready(lp.exp_into)  # loaded now: small arrays take it too


def test_ready_asks_the_disk_cache_once_and_only_when_told(monkeypatch):
    from fgrpo_theory import _libm_loops as lp
    from fgrpo_theory import _numba_cache

    class Unloaded:  # a loop with nothing compiled or loaded in this process
        overloads: dict = {}

    asked = []
    monkeypatch.setattr(_numba_cache, "on_disk", lambda d, sig: asked.append(sig) or True)
    monkeypatch.setattr(lp, "_on_disk", {})
    loop = Unloaded()
    assert lp.ready(loop) is False and asked == []
    assert lp.ready(loop, ask_disk=True) is True and len(asked) == 1
    assert lp.ready(loop, ask_disk=True) is True and len(asked) == 1  # remembered
