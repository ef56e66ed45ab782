"""fgrpo_theory.sim.kexp: the vectorizable replica of the C library's exp, against libm bit for bit.

The oracle is libm's ``exp`` itself: a Numba loop of ``np.exp`` (Numba calls the process's libm;
checked here against Python's ``math.exp``, which calls it too). NumPy's own ``np.exp`` is NOT the
oracle: with AVX-512 it runs its own vector routine, which differs in the last bit on ~3 % of
inputs. The replica copies glibc's x86-64 FMA variant, so the bit-for-bit tests run where that
is what libm runs (glibc >= 2.28 on x86-64, Numba's target with FMA and AVX2); elsewhere only the
self-check's verdict and the table (against mpmath) are tested.
"""

from __future__ import annotations

import math
import platform
import struct
import threading
import time

import mpmath
import numpy as np
import pytest
from numba import njit

from fgrpo_theory.sim import kexp


def _glibc_fma() -> bool:
    """Whether libm's exp here is glibc's FMA variant (the one the replica copies)."""
    from numba.core import config
    from numba.core.codegen import get_host_cpu_features

    lib, ver = platform.libc_ver()
    if lib != "glibc" or platform.machine() != "x86_64":
        return False
    if tuple(int(v) for v in ver.split(".")[:2]) < (2, 28):
        return False
    feats = config.CPU_FEATURES if config.CPU_FEATURES is not None else get_host_cpu_features()
    flags = {f.strip() for f in feats.split(",")}
    return {"+fma", "+avx2"} <= flags


def _loaded_libm() -> str | None:
    """The file of the libm this process has loaded (from /proc/self/maps), or None."""
    try:
        maps = open("/proc/self/maps").read()  # noqa: SIM115
    except OSError:
        return None
    for line in maps.splitlines():
        path = line.split()[-1]
        if "/libm.so" in path or "/libm-" in path:
            return path
    return None


needs_glibc_fma = pytest.mark.skipif(not _glibc_fma(), reason="libm's exp is not glibc's FMA one")


@njit(fastmath=False, error_model="numpy")
def _libm_exp(x, out):
    for i in range(x.size):
        out[i] = np.exp(x[i])


def _bits(f, x: np.ndarray) -> np.ndarray:
    out = np.empty_like(x)
    f(x, out)
    return out.view(np.uint64)


def _assert_libm(x: np.ndarray) -> None:
    want = _bits(_libm_exp, x)
    got = _bits(kexp.exp_array, x)
    bad = np.flatnonzero(got != want)
    assert np.array_equal(got, want), [(float(v).hex(), got[i], want[i]) for i, v in
                                       zip(bad[:5], x[bad[:5]], strict=True)]  # fmt: skip


HAND = [0.0, -0.0, 5e-324, -5e-324, 1e-310, -1e-310, 2.0**-1022, 1e-17, -1e-17, 2.0**-54,
        -(2.0**-54), 1e-16, -0.5, 1.0, -1.0, -30.0, -511.99999999999994, -512.0, 512.0,
        -708.3964185322641, -708.4, -709.0, -720.0, -740.0, -744.44007192138122,
        -745.1332191019411, -745.1332191019412, -745.2, -746.0, 709.78, 709.782712893384,
        709.7827128933841, 1000.0, -1000.0, 1024.0, -1024.0, 1e308, -1e308, np.inf, -np.inf,
        np.nan, -np.nan]  # fmt: skip
HAND = np.array(HAND)  # hand cases: zeros, tiny, the branch boundaries, subnormal results


def test_the_oracle_is_the_c_librarys_exp():
    """Numba's np.exp equals Python's math.exp (the C library's) on 30,000 inputs."""
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.uniform(-745.2, 0.0, 10_000), rng.uniform(-30.0, 0.0, 10_000),
                        rng.uniform(-700.0, 709.0, 10_000)])  # fmt: skip
    c = np.array([math.exp(v) for v in x.tolist()])
    assert np.array_equal(_bits(_libm_exp, x), c.view(np.uint64))


def test_the_table_is_libms_and_mpmaths():
    """2^(k/128) = H (1 + tail): H and tail rounded from mpmath at 200 bits; and, where libm's
    .rodata holds glibc's table after its N/ln2 and -ln2hi/N constants, that table."""
    with mpmath.workprec(200):
        for k in range(kexp.N):
            v = mpmath.mpf(2) ** (mpmath.mpf(k) / kexp.N)
            h = float(v)
            assert kexp._TAIL[k] == float((v - h) / h), k
            assert kexp._SBITS[k] == struct.unpack("<q", struct.pack("<d", h))[0] - (k << 45)
    if not _glibc_fma():
        return
    path = _loaded_libm()
    if path is None:
        pytest.skip("the loaded libm's file was not found")
    raw = open(path, "rb").read()  # noqa: SIM115
    head = struct.pack("<dd", kexp._INVLN2N, kexp._NEGLN2HIN)
    at = raw.find(head)
    if at < 0:
        pytest.skip("glibc's exp constants not found in libm.so.6")
    start = raw.find(struct.pack("<QQ", 0, 0x3FF0000000000000), at)  # tab[0], tab[1]
    assert 0 < start - at < 256
    tab = np.frombuffer(raw, dtype="<i8", count=2 * kexp.N, offset=start)
    assert np.array_equal(tab[0::2], kexp._TAIL.view(np.int64))
    assert np.array_equal(tab[1::2], kexp._SBITS)
    # the polynomial and shift constants sit between the header and the table
    consts = np.frombuffer(raw, dtype="<f8", count=(start - at) // 8, offset=at)
    for c in (kexp._NEGLN2LON, kexp._C2, kexp._C3, kexp._C4, kexp._C5, kexp._SHIFT):
        assert c in consts


@needs_glibc_fma
def test_hand_cases():
    _assert_libm(HAND)
    got = np.array([kexp.exp_lane(v) for v in HAND])  # the scalar function, called alone
    assert np.array_equal(got.view(np.uint64), _bits(_libm_exp, HAND))
    # facts that need no oracle
    assert got[0] == 1.0 and got[1] == 1.0 and got[2] == 1.0 and got[3] == 1.0
    assert got[HAND == 709.7827128933841][0] == np.inf and got[HAND == -746.0][0] == 0.0
    assert got[HAND == -745.1332191019411][0] == 5e-324  # the smallest subnormal
    assert got[HAND == np.inf][0] == np.inf and got[HAND == -np.inf][0] == 0.0
    assert np.isnan(got[-1]) and np.isnan(got[-2])
    small = HAND[np.abs(HAND) < 512]
    with mpmath.workprec(120):  # libm's exp is within an ulp of the exact value
        for v, e in zip(small, got[np.abs(HAND) < 512], strict=True):
            exact = mpmath.exp(mpmath.mpf(float(v)))
            assert abs(e - exact) <= 2.0**-52 * exact, v


@needs_glibc_fma
def test_ten_million_logits():
    """10^7 uniform in [-745, 0] and 10^7 in [-30, 0] (logit minus max logit)."""
    rng = np.random.default_rng(20240527)
    _assert_libm(rng.uniform(-745.0, 0.0, 10_000_000))
    x = rng.uniform(-30.0, 0.0, 10_000_000)
    _assert_libm(x)


@needs_glibc_fma
def test_near_ties_of_the_reduction():
    """Arguments whose ``x N/ln2`` rounded is a half-integer: where ``k`` depends on glibc
    fusing ``x N/ln2 + Shift`` (rounding the product first flips ~0.2 % of their results)."""
    m = np.arange(-137_700, 131_100) + 0.5
    x = m / kexp._INVLN2N
    near = [x]
    for direction in (-np.inf, np.inf):
        y = x
        for _ in range(3):
            y = np.nextafter(y, direction)
            near.append(y)
    x = np.concatenate(near)
    z = x * kexp._INVLN2N
    x = x[z - np.floor(z) == 0.5]
    assert x.size > 100_000
    _assert_libm(x)


@needs_glibc_fma
def test_random_bit_patterns():
    rng = np.random.default_rng(7)
    _assert_libm(rng.integers(0, 2**64, 1 << 21, dtype=np.uint64).view(np.float64))
    # random mantissas and signs with exponents from 2^-60 to 2^11 (tiny, common, special case)
    e = rng.integers(0x3C3, 0x40A, 1 << 21, dtype=np.uint64)
    u = (rng.integers(0, 2**53, 1 << 21, dtype=np.uint64) & ((1 << 52) - 1)) | (e << 52)
    u |= rng.integers(0, 2, 1 << 21, dtype=np.uint64) << 63
    x = u.view(np.float64)
    _assert_libm(x)
    _assert_libm(rng.uniform(-511.9, 511.9, 1 << 20))


def test_self_check_is_a_cached_verdict(monkeypatch):
    first = kexp.exp_lane_matches_libm()
    assert isinstance(first, bool)
    if _glibc_fma():
        assert first
    # asked by several threads at once (the simulator's blocks of runs), it runs once
    monkeypatch.setattr(kexp, "_VERDICT", [])
    calls = []

    def slow_count(x):
        calls.append(1)
        time.sleep(0.2)
        return 0

    monkeypatch.setattr(kexp, "_libm_mismatches", slow_count)
    threads = [threading.Thread(target=kexp.exp_lane_matches_libm) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1
    assert kexp.exp_lane_matches_libm() is True and len(calls) == 1


@pytest.mark.skipif(not _glibc_fma(), reason="AVX2 target needed")
def test_a_loop_of_exp_lane_vectorizes():
    """Compiled from a strict and from a fast-math caller (``exp_lane`` keeps its own strict
    flags): vector gathers and FMAs in the loop, the same bits as libm."""
    for fastmath in (False, {"nsz", "arcp", "contract", "afn", "reassoc"}):

        @njit(fastmath=fastmath, error_model="numpy")
        def loop(x, out):
            for i in range(x.size):
                out[i] = kexp.exp_lane(x[i])

        x = np.random.default_rng(1).uniform(-745.2, 0.0, 4099)
        assert np.array_equal(_bits(loop, x), _bits(_libm_exp, x))
        asm = loop.inspect_asm(loop.signatures[0])
        assert "vgatherqpd" in asm and ("vfmadd213pd" in asm or "vfmadd231pd" in asm), fastmath
