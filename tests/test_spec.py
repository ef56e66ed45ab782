"""The spec grammars of fgrpo_theory._spec: values by hand, one-line errors, bounded work."""

from __future__ import annotations

import numpy as np
import pytest

from fgrpo_theory._spec import (
    parse_float_list,
    parse_group,
    parse_index_set,
    parse_int_list,
    parse_logits,
    parse_pair,
)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("5.0x1,3.0x2", [5.0, 3.0, 3.0]),
        ("1.0,2.0,0.5", [1.0, 2.0, 0.5]),  # a plain list is a spec (issue 9 item 2)
        ("0", [0.0]),  # "0" is ONE action
        ("0x6", [0.0] * 6),
        (" -1.5 x 2 , 0.25 ", [-1.5, -1.5, 0.25]),
        ("1e-3X3", [1e-3] * 3),
    ],
)
def test_parse_logits(spec, expected):
    out = parse_logits(spec)
    assert out.dtype == np.float64 and out.ndim == 1
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("1.0x0", "'1.0x0'"),
        ("1.0x-3", "'1.0x-3'"),
        ("nanx2", "finite"),
        ("inf", "finite"),
        ("abc", "'abc'"),
        ("1.0x2.5", "COUNT"),
        ("1.0,,2.0", "non-empty items"),
        ("", "non-empty"),
        ("x3", "'x3'"),
        ("1x50000001", "at most 50000000"),
    ],
)
def test_parse_logits_errors_are_one_line_naming_option(spec, fragment):
    with pytest.raises(ValueError, match="^--logits must") as info:
        parse_logits(spec)
    assert fragment in str(info.value) and "\n" not in str(info.value)


def _npy_with_header(path, shape, descr="<f8"):
    """A tiny .npy whose header claims ``shape`` (its data are missing: nothing may be read)."""
    header = {"descr": descr, "fortran_order": False, "shape": shape}
    with open(path, "wb") as fh:
        np.lib.format.write_array_header_1_0(fh, header)
        fh.write(b"\0" * 16)


def test_npy_header_claiming_huge_shape_is_refused_before_allocating(tmp_path):
    f = tmp_path / "huge.npy"
    _npy_with_header(f, (4_000_000_000,))
    assert f.stat().st_size < 200
    with pytest.raises(ValueError, match="at most 50000000 logits .header: 4000000000"):
        parse_logits(str(f))


def test_logit_files_must_be_real_1d_finite(tmp_path):
    np.save(tmp_path / "ok.npy", np.array([1.0, 2.0]))
    np.testing.assert_array_equal(parse_logits(str(tmp_path / "ok.npy")), [1.0, 2.0])
    np.save(tmp_path / "two.npy", np.zeros((2, 3)))
    np.save(tmp_path / "cx.npy", np.array([1 + 2j, 3]))
    np.save(tmp_path / "nan.npy", np.array([1.0, np.nan]))
    (tmp_path / "two.csv").write_text("1,2\n3,4\n")
    (tmp_path / "col.csv").write_text("1\n2\n3\n")
    (tmp_path / "row.csv").write_text("1,2,3\n")
    (tmp_path / "cx.csv").write_text("1+2j\n")
    with pytest.raises(ValueError, match="1-D array .shape .2, 3.."):
        parse_logits(str(tmp_path / "two.npy"))
    with pytest.raises(ValueError, match="complex"):
        parse_logits(str(tmp_path / "cx.npy"))
    with pytest.raises(ValueError, match="a finite number .entry 1 of .*nan.npy'.; got nan"):
        parse_logits(str(tmp_path / "nan.npy"))
    with pytest.raises(ValueError, match="1-D list"):
        parse_logits(str(tmp_path / "two.csv"))
    with pytest.raises(ValueError, match="a number .value 1 of .*cx.csv'.; got '1.2j'"):
        parse_logits(str(tmp_path / "cx.csv"))
    with pytest.raises(ValueError, match="an existing file"):
        parse_logits(str(tmp_path / "missing.npy"))
    np.testing.assert_array_equal(parse_logits(str(tmp_path / "col.csv")), [1, 2, 3])
    np.testing.assert_array_equal(parse_logits(str(tmp_path / "row.csv")), [1, 2, 3])


def test_parse_index_set():
    assert parse_index_set("7..9,0,5,5", 10, name="--correct").tolist() == [0, 5, 7, 8, 9]
    assert parse_index_set("0..9999", name="--correct").size == 10_000
    assert parse_index_set("3", name="--correct").dtype == np.int64
    assert parse_index_set("1..9:4,0", 10, name="--correct").tolist() == [0, 1, 5, 9]
    for bad, frag in [
        ("0..10", "in [0, 9]"),
        ("-1", ">= 0"),
        ("5..2", "A <= B"),
        ("1..2:0", "step S >= 1"),
        ("1..2:x2", "step S >= 1"),
        ("a", "'a'"),
        ("", "non-empty"),
    ]:
        with pytest.raises(ValueError, match="^--correct must") as info:
            parse_index_set(bad, 10, name="--correct")
        assert frag in str(info.value)
    with pytest.raises(ValueError, match="at most 50000000 indices"):
        parse_index_set("0..99999999999", name="--correct")  # refused before expanding


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("4,8,16", [4, 8, 16]),
        ("4..8", [4, 5, 6, 7, 8]),
        ("4..16:4", [4, 8, 12, 16]),
        ("1..16:x2", [1, 2, 4, 8, 16]),
        ("1..20:x2", [1, 2, 4, 8, 16]),
        ("16,1..4", [1, 2, 3, 4, 16]),
        ("8,8", [8]),
    ],
)
def test_parse_int_list(text, expected):
    assert parse_int_list(text, name="--N", lo=1) == expected


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("0", ">= 1"),
        ("a", "'a'"),
        ("4..2", "A <= B"),
        ("4..8:0", "step S >= 1"),
        ("1..8:x1", "F > 1"),
        ("1..8:xq", "F > 1"),
        ("1..2000000", "at most 1000000 values"),
        ("1..9223372036854775807:1", "<= 9007199254740992"),
        ("", "non-empty"),
    ],
)
def test_parse_int_list_errors(text, fragment):
    with pytest.raises(ValueError, match="^--N must") as info:
        parse_int_list(text, name="--N", lo=1)
    assert fragment in str(info.value)


def test_parse_float_list_pair_and_group():
    assert parse_float_list("0.2, 0.5,1e-3", name="--mu") == [0.2, 0.5, 0.001]
    for bad in ("", "a", "nan", "1,,2", "inf"):
        with pytest.raises(ValueError, match="^--mu must"):
            parse_float_list(bad, name="--mu")
    assert parse_pair("1,-1", name="--rewards") == (1.0, -1.0)
    for bad in ("1", "1,2,3", "1,x"):
        with pytest.raises(ValueError, match="^--rewards must"):
            parse_pair(bad, name="--rewards")
    a, c = parse_group("0x3,17", 20, name="--group")
    assert a.tolist() == [0, 17] and c.tolist() == [3, 1]
    for bad, frag in [("20", "[0, 19]"), ("0x0", "COUNT >= 1"), ("ax2", "'ax2'"), ("", "")]:
        with pytest.raises(ValueError, match="^--group must") as info:
            parse_group(bad, 20, name="--group")
        assert frag in str(info.value)
