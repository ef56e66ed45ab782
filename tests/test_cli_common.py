"""The CLI's shared parsers and its error contract (one line, exit code 2, no traceback)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from fgrpo_theory.cli._common import parse_float_list, parse_int_list


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("4", [4]),
        ("4,8,2", [2, 4, 8]),
        ("4..8", [4, 5, 6, 7, 8]),
        ("4..20:4", [4, 8, 12, 16, 20]),
        ("1..64:x2", [1, 2, 4, 8, 16, 32, 64]),
        ("1..100:x10", [1, 10, 100]),
        ("2..10:x3", [2, 6]),
        ("1..3,2..4", [1, 2, 3, 4]),
    ],
)
def test_parse_int_list(text, expected):
    np.testing.assert_array_equal(parse_int_list(text, "--N", lo=1), expected)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("64..4", "64..4"),
        ("0..8", "got 0"),
        ("1..1e9", "1..1e9"),
        ("abc", "'abc'"),
        ("", "non-empty"),
        ("4,,8", "non-empty"),
        ("1..8:0", "step"),
        ("1..8:x1", "F > 1"),
    ],
)
def test_parse_int_list_errors_name_parameter_and_value(text, fragment):
    with pytest.raises(ValueError, match="^--N ") as info:
        parse_int_list(text, "--N", lo=1)
    assert fragment in str(info.value)
    assert "\n" not in str(info.value)


def test_parse_float_list():
    np.testing.assert_array_equal(parse_float_list("0.2, 0.5,0.8", "--mu"), [0.2, 0.5, 0.8])
    for bad in ["", "x", "nan", "0.1,,0.2"]:
        with pytest.raises(ValueError, match="^--mu "):
            parse_float_list(bad, "--mu")


def test_usage_errors_are_one_line_exit_2(cli):
    r = cli("no-such-command")
    assert r.code == 2
    assert r.err.count("\n") == 1 and r.err.startswith("Error:")


def test_console_script_has_no_traceback():
    proc = subprocess.run(
        [sys.executable, "-c", "from fgrpo_theory.cli import main; main()", "bogus"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().startswith("Error:")


def test_table_cells_are_not_read_as_rich_markup(capsys):
    import pandas as pd

    from fgrpo_theory.cli._common import emit

    emit(pd.DataFrame({"quantity": ["E[dq_pos]"], "value": [1.5]}), "table", title="[bold]x")
    out = capsys.readouterr().out
    assert "E[dq_pos]" in out and "[bold]x" in out


def test_integers_beyond_float_precision_are_refused(cli):
    # 2**63 would wrap in an int64 cast and 1e20 is not exact in float64: refuse, do not guess
    r = cli("focal", "--N", "100000000000000000000")
    assert r.code == 2 and r.err.startswith("Error: --N must be <= 9007199254740992")
    with pytest.raises(ValueError, match="magnitude <= 2\\*\\*53"):
        from fgrpo_theory.passk import pass_at_k

        pass_at_k(2**63 - 1, 2**63 - 1, 2**63 - 1)


def test_unwritable_output_is_a_one_line_error(cli):
    r = cli("lr-multiplier", "--gamma", "0", "--output", "/dev/full")
    assert r.code == 2
    assert r.err.startswith("Error: --output must be a writable path (No space left on device)")
    assert "'/dev/full'" in r.err and r.err.count("\n") == 1
