"""Every input is bounded before it is read or expanded, and every error is one line (issue 26,
causes 5-8): hypergeometric work, sweep grids, TOML files, standard input, logit counts, .npy
headers, option names in messages, library contracts, and the trusted range of the peak."""

from __future__ import annotations

import os
import time

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fgrpo_theory.cli import main


def _run(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def _one_line(code, err, *fragments):
    assert code == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    for f in fragments:
        assert f in err, err


# --- 5. unbounded work ----------------------------------------------------------------------


def test_hypergeometric_work_does_not_grow_with_n():
    """compare-passk with n near 2**53 ran for hours (SciPy's pmf costs linear time in n)."""
    import mpmath

    from fgrpo_theory.significance import _hypergeom_cdf, compare_passk

    n, c, m = 10**12, 3 * 10**11, 64
    cdf = _hypergeom_cdf(n, c, m)
    mpmath.mp.dps = 40
    exact = [mpmath.binomial(c, j) * mpmath.binomial(n - c, m - j) / mpmath.binomial(n, m)
             for j in range(m)]  # fmt: skip
    np.testing.assert_allclose(cdf, np.cumsum([float(x) for x in exact]), rtol=1e-12, atol=1e-15)
    t0 = time.monotonic()
    big = np.array([2**53 - 1, 2**53 - 7])
    res = compare_passk(big, big // 3, big, big // 2, [1, 4], m=256, iterations=200, seed=1)
    assert time.monotonic() - t0 < 20 and np.isfinite(res["difference"]).all()


def test_sweep_grid_is_counted_before_it_is_expanded(tmp_path):
    from fgrpo_theory.sim import expand_grid, load_config

    t0 = time.monotonic()
    with pytest.raises(ValueError, match=r"sweep must be a grid of at most 100000 configs"):
        expand_grid({"N": list(range(2, 1002)), "gamma": [0.1] * 1000, "seeds": [1] * 1000})
    toml = tmp_path / "big.toml"
    toml.write_text(
        "N = [" + ",".join(["4"] * 1000) + "]\nlr = [" + ",".join(["0.1"] * 1000) + "]\n"
    )
    with pytest.raises(ValueError, match="1000 x 1000 = 1000000 configs"):
        load_config(toml)
    assert time.monotonic() - t0 < 5


def test_toml_depth_and_size_are_bounded(tmp_path):
    from fgrpo_theory.sim import load_config

    deep = tmp_path / "deep.toml"
    deep.write_text("N = " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(ValueError, match="nested at most 32 levels"):
        load_config(deep)
    big = tmp_path / "big.toml"
    big.write_bytes(b"# " + b"x" * (1 << 21) + b"\n")
    with pytest.raises(ValueError, match="at most 1048576 bytes"):
        load_config(big)


def test_cli_deep_toml_is_one_line(tmp_path, capsys):
    deep = tmp_path / "deep.toml"
    deep.write_text("N = " + "[" * 100_000 + "]" * 100_000 + "\n")
    _one_line(*_run(capsys, "simulate", "--config", deep)[::2], "config", "nested")


_TOML_ATOMS = st.sampled_from(["N", "gamma", "lr", "seeds", "steps", "K", "logits", "rewards",
                               "=", "[", "]", "{", "}", ",", "1", "0", "-1", "1e400", "nan",
                               '"0x3"', "true", "\n", " ", "'", '"', "[[x]]", "\x00",
                               "é"])  # fmt: skip


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(_TOML_ATOMS, max_size=40))
def test_fuzz_toml_configs_fail_in_one_line(tmp_path, atoms):
    from fgrpo_theory.sim import load_config

    p = tmp_path / "f.toml"
    p.write_text(" ".join(atoms), encoding="utf-8")
    try:
        cfgs = load_config(p)
    except ValueError as e:
        assert "\n" not in str(e) and " must be " in str(e)
    else:
        assert len(cfgs) >= 1


class _Stdin:
    """A fake standard input: ``data`` then (``endless``) the same line forever."""

    def __init__(self, data: bytes, endless: bytes | None = None):
        self.buffer = self
        self._data = data
        self._endless = endless
        self.closed = False
        self.read_bytes = 0

    def read1(self, n: int) -> bytes:
        if self._data:
            out, self._data = self._data[:n], self._data[n:]
        elif self._endless is not None:
            out = self._endless * max(1, n // len(self._endless))
        else:
            out = b""
        self.read_bytes += len(out)
        return out


@pytest.mark.parametrize(
    "args",
    [["diagnose", "-"], ["passk", "--from-csv", "-"], ["compare-passk", "-", "x.csv"]],
)
def test_endless_stdin_is_refused_after_the_row_limit(capsys, monkeypatch, args):
    from fgrpo_theory import tables
    from fgrpo_theory.diagnose import io as dio

    monkeypatch.setattr(dio, "MAX_ROWS", 10_000)
    monkeypatch.setattr(tables, "MAX_TABLE_ROWS", 10_000)
    fake = _Stdin(b"prompt,step,n,n_correct,problem,c\n", endless=b"p,0,4,1,p,1\n")
    monkeypatch.setattr("sys.stdin", fake)
    code, _, err = _run(capsys, *args)
    _one_line(code, err, "standard input of at most 10000 rows")
    assert fake.read_bytes < 4 << 20


def test_diagnose_with_stdin_closed_is_one_line(capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", None)
    _one_line(*_run(capsys, "diagnose", "-")[::2], "LOG", "open standard input")


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=300))
def test_fuzz_stdin_logs_fail_in_one_line(data):
    import sys

    from fgrpo_theory.diagnose import read_log

    old = sys.stdin
    sys.stdin = _Stdin(data)
    try:
        groups = read_log("-")
    except ValueError as e:
        assert "\n" not in str(e) and " must be " in str(e)
    else:
        assert list(groups.columns) == ["prompt", "step", "n", "n_correct"]
    finally:
        sys.stdin = old


def test_diagnose_default_compute_respects_its_cap():
    from fgrpo_theory.diagnose import diagnose

    rng = np.random.default_rng(0)
    n = 3000
    groups = pd.DataFrame({"prompt": [f"p{i}" for i in range(20)], "step": 0, "n": n,
                           "n_correct": rng.integers(1, n, 20)})  # fmt: skip
    rep = diagnose(groups, rho=[0.1], gamma=[1.0], bootstrap=2)
    found = rep.loc[rep["quantity"].str.startswith("N_"), "value"].astype(float)
    assert (found <= 4096).all()


def test_mass_refuses_more_actions_than_it_can_hold(capsys):
    _one_line(*_run(capsys, "mass", "--logits", "1x50000000")[::2], "--logits", "10000000")


def test_correctness_npy_header_is_checked_before_loading(tmp_path):
    from numpy.lib import format as npy

    from fgrpo_theory.population.generate import _read_correctness

    p = tmp_path / "c.npy"
    with open(p, "wb") as fh:  # a header claiming 10**9 x 10**3 entries, no data
        npy.write_array_header_1_0(fh, {"descr": "|u1", "fortran_order": False,
                                        "shape": (10**9, 10**3)})  # fmt: skip
    with pytest.raises(ValueError, match=r"header says shape \(1000000000, 1000\)"):
        _read_correctness(str(p), 8, 4)


# --- 6. messages that name the option ---------------------------------------------------------


def test_messages_name_the_option_the_user_typed(tmp_path, capsys):
    a = tmp_path / "a.csv"
    a.write_text("problem,n,c\nx,10,3\ny,10,4\n")
    _one_line(*_run(capsys, "compare-passk", a, a, "--m", "0")[::2], "--m must be >= 1")
    log = tmp_path / "log.csv"
    log.write_text("prompt,step,n,n_correct\n" + "".join(f"p{i},0,8,{i % 9}\n" for i in range(30)))
    code, _, err = _run(capsys, "diagnose", log, "--rho", "1e-320", "--bootstrap", "2")
    _one_line(code, err, "--rho")
    assert "tau must" not in err
    digits = "1" * 4400
    code, _, err = _run(capsys, "passk", "--n", digits, "--c", "1")
    _one_line(code, err, "--n must be", "(4402 characters)")
    assert len(err) < 400


def test_ctrl_c_is_one_line_and_exit_130(capsys, monkeypatch):
    import fgrpo_theory.cli._entry as entry
    from fgrpo_theory.cli import _app

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(_app.app, "__call__", interrupted)
    monkeypatch.setattr(type(_app.app), "__call__", interrupted)
    code, _, err = _run(capsys, "passk", "--n", "4", "--c", "1")
    assert code == 130 and err == "fgrpo-theory: interrupted\n"
    monkeypatch.setattr("fgrpo_theory.cli.main", interrupted)
    with pytest.raises(SystemExit) as e:
        entry.main()
    assert e.value.code == 130 and capsys.readouterr().err == "fgrpo-theory: interrupted\n"


# --- 7. library contracts ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad",
    [
        np.datetime64("2020-01-01"),
        np.timedelta64(3, "D"),
        "10",
        b"10",
        ["10", "12"],
        np.array(["4"]),
        pd.Series(pd.to_datetime(["2020-01-01"])),
    ],  # fmt: skip
)
def test_dates_text_and_bytes_are_not_numbers(bad):
    from fgrpo_theory import tail_miss_probability

    with pytest.raises(ValueError, match="^N must be a number or an array of numbers"):
        tail_miss_probability(bad, 0.5, 0.1)


def test_nan_beta_parameters_negative_seeds_and_huge_broadcasts_are_refused():
    from fgrpo_theory import tail_miss_probability
    from fgrpo_theory.diagnose import beta_active_fraction
    from fgrpo_theory.mass.groups import sample_group

    with pytest.raises(ValueError, match="^a must be a finite number; got nan"):
        beta_active_fraction(np.nan, 1.0, [4])
    with pytest.raises(ValueError, match=r"^seed must be an integer in \[0, 2\*\*63\); got -1"):
        sample_group(np.zeros(4), 2, seed=-1)  # was NumPy's "expected non-negative integer"
    t0 = time.monotonic()
    with pytest.raises(ValueError, match="broadcast to at most"):
        tail_miss_probability(np.arange(1, 100_001)[:, None], np.full(100_000, 0.5), 0.1)
    with pytest.raises(ValueError, match="^N must be broadcastable"):
        tail_miss_probability(np.arange(1, 4), np.full(5, 0.5), 0.1)
    assert time.monotonic() - t0 < 5


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_boolean_counts_are_refused_alike_in_every_format(tmp_path, fmt):
    from fgrpo_theory.diagnose import read_log

    df = pd.DataFrame({"prompt": ["a", "b"], "step": [0, 0], "n": [1, 1],
                       "n_correct": [True, False]})  # fmt: skip
    p = tmp_path / f"log.{fmt}"
    if fmt == "csv":
        df.to_csv(p, index=False)
    elif fmt == "jsonl":
        df.to_json(p, orient="records", lines=True)
    else:
        df.to_parquet(p)
    with pytest.raises(ValueError, match="^n_correct must be a"):
        read_log(p)


# --- 8. the trusted range of the peak ---------------------------------------------------------


def test_peak_beyond_2_53_is_refused():
    from fgrpo_theory import peak_group_size

    with pytest.raises(ValueError, match=r"^tau must be such that the peak group size is below"):
        peak_group_size(1 - 2**-52, 2**-60)
    assert peak_group_size(0.3, 0.015).n_star == 9


# --- 6. environment, pipes and schedulers ------------------------------------------------------


def test_numba_num_threads_zero_names_the_variable(capsys, monkeypatch):
    monkeypatch.setenv("NUMBA_NUM_THREADS", "0")
    _one_line(*_run(capsys, "passk", "--n", "4", "--c", "1")[::2], "NUMBA_NUM_THREADS", "'0'")


@pytest.mark.parametrize("value", ["100000", "", " "])
def test_numba_num_threads_too_many_or_empty_is_one_line(capsys, monkeypatch, value):
    """100000 threads ended simulate in a segmentation fault (exit 139); an empty value printed
    Numba's 9-line RuntimeWarning. Both are refused before Numba reads the variable."""
    monkeypatch.setenv("NUMBA_NUM_THREADS", value)
    _one_line(
        *_run(capsys, "simulate", "--K", "10", "--steps", "1")[::2],
        "NUMBA_NUM_THREADS",
        repr(value),
    )


def test_a_table_into_a_closed_pipe_exits_141():
    """rich turned the broken pipe into SystemExit(1): exit 1, where csv and json exit 141."""
    import subprocess
    import sys

    code = "from fgrpo_theory.cli import main; main()"
    args = [sys.executable, "-c", code, "passk", "--n", "1..50", "--c", "1", "--format", "table"]
    r, w = os.pipe()
    os.close(r)  # the reader is gone before anything is written
    proc = subprocess.run(args, stdout=w, stderr=subprocess.PIPE, timeout=120)
    os.close(w)
    assert proc.returncode == 141, proc.stderr
    assert b"Traceback" not in proc.stderr


def test_unusable_tls_scheduler_is_one_line_within_the_timeout(capsys, tmp_path):
    pytest.importorskip("distributed")
    t0 = time.monotonic()
    args = ["simulate", "--steps", "2", "--seeds", "1", "--N", "2,4", "--out", tmp_path / "o"]
    code, _, err = _run(capsys, *args, "--scheduler", "tls://127.0.0.1:1")
    _one_line(code, err, "--scheduler", "reachable")
    assert time.monotonic() - t0 < 10
