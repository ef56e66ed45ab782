"""Every user-facing case of issue 26's "Why" (sections 5 to 8), rerun through the CLI as a user
types it: each must be refused in one line naming the option (exit code 2), or handled as
docs/reliability.md says. Sections 1 to 4 (files, locks, forged results, the kernel cache) and
the cases that need a process, a pipe or a signal have their own tests, named in the table of
docs/reliability.md; this file is the quick rerun of the rest, in-process.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

BIG = "9" * 4400  # an integer of more than 4,300 digits (Python's own limit message)


def _npy_claiming(path, n):
    """A .npy file whose header claims ``n`` float64 values, with 64 bytes of data."""
    with open(path, "wb") as f:
        np.lib.format.write_array_header_1_0(
            f, {"descr": "<f8", "fortran_order": False, "shape": (n,)}
        )
        f.write(b"\0" * 64)
    return str(path)


def _counts(tmp_path, name, n, c):
    p = tmp_path / f"{name}.csv"
    p.write_text(f"problem,n,c\np1,{n},{c}\np2,{n},{c + 1}\n")
    return str(p)


# (case, arguments, the start of the one line on stderr)
CASES = [
    ("5 sweep grid of 400,000 configs", ["simulate", "--N", "2..200001", "--gamma", "0,0.5"],
     "Error: --N must be a list of at most 100000 values"),
    ("5 sweep grid of 2e11 values", ["simulate", "--N", "2..100000000000"],
     "Error: --N must be a list of at most"),
    ("5 mass --logits 1x50000000", ["mass", "--logits", "1x50000000", "--correct", "0"],
     "Error: --logits must be a spec of at most 10000000 actions in total"),
    ("6 --m 0 named as --m", ["compare-passk", "{a}", "{b}", "--k", "1", "--m", "0"],
     "Error: --m must be >= 1; got 0"),
    ("6 --rho 1e-320 named as --rho", ["miss-prob", "--N", "8", "--mu", "1e-10", "--rho", "1e-320"],
     "Error: --rho must be such that tau = rho * mu > 0 in float64"),
    ("6 integer of 4,400 digits", ["miss-prob", "--N", BIG, "--mu", "0.5", "--rho", "0.1"],
     "Error: --N must be an integer"),
    ("6 integer of 4,400 digits (int option)", ["compare-passk", "{a}", "{b}", "--m", BIG],
     "Error: --m must be"),
    ("5 .npy header checked first (simulate)", ["simulate", "--logits", "{npy}", "--steps", "1"],
     "Error: --logits must be a .npy file of at most"),
    ("5 .npy header checked first (mass)", ["mass", "--logits", "{npy}", "--correct", "0"],
     "Error: --logits must be a .npy file of at most 10000000 logits"),
    ("6 deeply nested TOML", ["simulate", "--config", "{deep}"], "Error: "),
]  # fmt: skip


@pytest.mark.parametrize(("case", "args", "start"), CASES, ids=[c[0] for c in CASES])
def test_refused_in_one_line_with_exit_2(cli, tmp_path, case, args, start):
    files = {
        "a": _counts(tmp_path, "a", 100, 5),
        "b": _counts(tmp_path, "b", 100, 7),
        "npy": _npy_claiming(tmp_path / "forged.npy", 10**9),
        "deep": str(tmp_path / "deep.toml"),
    }
    (tmp_path / "deep.toml").write_text("N = " + "[" * 100_000 + "]" * 100_000 + "\n")
    t0 = time.monotonic()
    r = cli(*[a.format(**files) if a.startswith("{") else a for a in args])
    assert r.code == 2, (case, r.err)
    assert r.err.startswith(start) and r.err.count("\n") == 1, (case, r.err)
    assert "Traceback" not in r.err
    assert time.monotonic() - t0 < 20, case  # refused before any work or allocation


def test_compare_passk_near_2_53_is_quick(cli, tmp_path):
    """Section 5: valid n near 2**53 ran for hours (hypergeometric pmf over arange(m + 1))."""
    n = 2**53 - 2
    t0 = time.monotonic()
    r = cli("compare-passk", _counts(tmp_path, "a", n, 5), _counts(tmp_path, "b", n, 7),
            "--k", "1", "--m", "4", "--iterations", "200")  # fmt: skip
    assert r.code == 0, r.err
    assert time.monotonic() - t0 < 20


LIBRARY = [
    ("7 datetime64 as a number", "tail_miss_probability", (np.datetime64("2020-01-01"), 0.5, 0.1),
     "^N must be a number or an array of numbers"),
    ("7 bytes as a number", "tail_miss_probability", (b"10", 0.5, 0.1),
     "^N must be a number or an array of numbers"),
    ("7 1e5 x 1e5 broadcast", "tail_miss_probability",
     (np.arange(1, 100_001)[:, None], np.full(100_000, 0.5), 0.1), "broadcast to at most"),
    ("7 shapes that do not broadcast", "tail_miss_probability",
     (np.arange(1, 4), np.full(5, 0.5), 0.1), "^N must be broadcastable"),
    ("8 peak beyond 2**53", "peak_group_size", (1 - 2**-52, 2**-60),
     "^tau must be such that the peak group size is below"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "name", "args", "match"), LIBRARY, ids=[c[0] for c in LIBRARY])
def test_library_refuses_with_a_value_error_naming_the_argument(case, name, args, match):
    import fgrpo_theory as ft

    with pytest.raises(ValueError, match=match):
        getattr(ft, name)(*args)
