"""The CLI's tables without pandas (``cli._common.Rows``) and the ``simulate`` summary built
from columns (``cli.simulate._summary_rows``).

Oracles: pandas itself (``emit`` of the DataFrame of the same values, and the summary the CLI
builds with pandas when it writes ``--out``), and exact rational arithmetic for the mean.
"""

from __future__ import annotations

import io
import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fgrpo_theory.cli._common import Rows, _json_text, _render_table, _write_csv

_FLOATS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 0.1, 1e16, 1e-5, 5e-324, 123456789.125, 1e22, 2.5e-7]),
)
_TEXT = st.text(alphabet=st.sampled_from(list("ab ,\"'+-()=.0x")), max_size=8)


@st.composite
def _tables(draw, finite: bool = False):
    """Columns of one type each (int, float or text) and 0-4 rows, as pandas holds them."""
    kinds = draw(st.lists(st.sampled_from("ift"), min_size=1, max_size=5))
    n = draw(st.integers(0, 4))
    floats = st.floats(allow_nan=False, allow_infinity=False) if finite else _FLOATS
    values = {"i": st.integers(-(2**62), 2**62), "f": floats, "t": _TEXT}
    cols = [f"{k}{j}" for j, k in enumerate(kinds)]
    rows = tuple(tuple(draw(values[k]) for k in kinds) for _ in range(n))
    return cols, kinds, rows


def _frame(cols, kinds, rows) -> pd.DataFrame:
    dtypes = {"i": np.int64, "f": np.float64, "t": object}
    return pd.DataFrame(
        {c: pd.Series([r[j] for r in rows], dtype=dtypes[k]) for j, (c, k) in
         enumerate(zip(cols, kinds, strict=True))}
    )  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(_tables())
def test_rows_csv_is_what_pandas_writes(table):
    cols, kinds, rows = table
    a, b = io.StringIO(), io.StringIO()
    _write_csv(Rows(tuple(cols), rows), a)
    _write_csv(_frame(cols, kinds, rows), b)
    assert a.getvalue() == b.getvalue()


@settings(max_examples=200, deadline=None)
@given(_tables(finite=True))
def test_rows_json_and_table_are_what_pandas_gives(table):
    cols, kinds, rows = table
    light, frame = Rows(tuple(cols), rows), _frame(cols, kinds, rows)
    assert _json_text(light) == _json_text(frame)
    a, b = io.StringIO(), io.StringIO()
    _render_table(light, "a title", a)
    _render_table(frame, "a title", b)
    assert a.getvalue() == b.getvalue()


def test_a_long_rows_table_is_cut_as_a_frame_is():
    from fgrpo_theory.cli._common import MAX_TABLE_ROWS

    rows = tuple((i, i / 7) for i in range(MAX_TABLE_ROWS + 3))
    a, b = io.StringIO(), io.StringIO()
    _render_table(Rows(("n", "x"), rows), None, a)
    _render_table(pd.DataFrame(list(rows), columns=["n", "x"]), None, b)
    assert a.getvalue() == b.getvalue()
    assert f"first {MAX_TABLE_ROWS} of {MAX_TABLE_ROWS + 3}" in a.getvalue()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.floats(-1e300, 1e300), st.just(float("nan"))), max_size=40))
def test_the_mean_over_runs_is_the_exact_sum_rounded_then_divided(values):
    from fgrpo_theory.cli.simulate import _mean_over_runs

    kept = [v for v in values if not math.isnan(v)]
    got = _mean_over_runs(np.array(values, dtype=float))
    if not kept:
        assert math.isnan(got)
        return
    exact = float(sum(Fraction(v) for v in kept))  # the correctly rounded sum
    assert got == exact / len(kept)


def test_the_mean_over_runs_of_infinities():
    from fgrpo_theory.cli.simulate import _mean_over_runs

    assert _mean_over_runs(np.array([1.0, math.inf, np.nan])) == math.inf
    assert math.isnan(_mean_over_runs(np.array([math.inf, -math.inf])))


_CASES = [
    ["--K", "1000", "--N", "8", "--steps", "300", "--seeds", "3", "--subset", "rare=1..20",
     "--pass-k", "1,4"],
    ["--K", "50", "--N", "4", "--steps", "40", "--seeds", "3", "--scheme", "maxrl"],
    ["--K", "50", "--N", "4", "--steps", "40", "--seeds", "5", "--gamma", "1", "--lr", "1e-05",
     "--optimizer", "adam"],
    ["--preset", "fig2-logprob-adam", "--N", "8", "--gamma", "1", "--steps", "3", "--seeds",
     "2"],
    ["--K", "40", "--N", "4", "--steps", "30", "--seeds", "2", "--dynamic-sampling", "dapo",
     "--precision", "float32", "--log-every", "7"],
]  # fmt: skip


@pytest.mark.parametrize("fmt", ["csv", "json", "table"])
@pytest.mark.parametrize("args", _CASES, ids=lambda a: " ".join(a[:6]))
def test_the_summary_without_pandas_is_the_pandas_one(cli, tmp_path, args, fmt):
    """One config printed (no --out): the summary from columns; with --out, the CLI builds it
    with pandas from the DataFrame. The same bytes."""
    light = cli("simulate", *args, "--format", fmt)
    assert light.code == 0, light.err
    frame = cli("simulate", *args, "--format", fmt, "--out", str(tmp_path / "log.parquet"))
    assert frame.code == 0, frame.err
    assert light.out == frame.out


@pytest.mark.parametrize("tables", [False, True])
def test_simulate_as_columns_builds_the_same_frames(tables):
    """``simulate(..., as_frame=False)``: the dicts the DataFrames are built from (pandas'
    constructor is the oracle of what they hold)."""
    from fgrpo_theory.sim import SimConfig, simulate

    cfg = SimConfig(K=40, N=4, steps=20, seeds=2, log_every=5, subsets={"top": "0..3"},
                    thresholds=(0.05,) if tables else ())  # fmt: skip
    frames = simulate(cfg, tables=tables)
    cols = simulate(cfg, tables=tables, as_frame=False)
    if not tables:
        frames, cols = (frames,), (cols,)
    for frame, col in zip(frames, cols, strict=True):
        assert isinstance(col, dict)
        pd.testing.assert_frame_equal(pd.DataFrame(col), frame)
