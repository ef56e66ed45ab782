"""The CLI's shared parsers and its error contract (one line, exit code 2, no traceback)."""

from __future__ import annotations

import json
import shutil
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


def test_table_shows_missing_values_as_empty_cells(capsys):
    """A row without an interval (None or NaN) prints an empty cell, never 'None' or 'nan'."""
    import pandas as pd

    from fgrpo_theory.cli._common import emit

    df = pd.DataFrame({"q": ["a", "b"], "lo": [None, 0.25], "hi": [np.nan, 0.75]})
    emit(df.astype({"lo": object}), "table")
    out = capsys.readouterr().out
    assert "None" not in out and "nan" not in out and "0.25" in out and "0.75" in out


def test_integers_beyond_float_precision_are_refused(cli):
    # 2**63 would wrap in an int64 cast and 1e20 is not exact in float64: refuse, do not guess
    r = cli("focal", "--N", "100000000000000000000")
    assert r.code == 2 and r.err.startswith("Error: --N must be <= 9007199254740992")
    with pytest.raises(ValueError, match="magnitude <= 2\\*\\*53"):
        from fgrpo_theory.passk import pass_at_k

        pass_at_k(2**63 - 1, 2**63 - 1, 2**63 - 1)


@pytest.mark.parametrize(
    ("args", "shown"),
    [
        (("peak", "--mu", "0.3", "--rho", "1e-330"), "--rho must be a number float64 can hold"),
        (("peak", "--mu", "1e-400", "--rho", "0.1"), "--mu must be a number float64 can hold"),
        (("peak", "--mu", "0.3", "--rho", "0.1,-1e-400"), "--rho must be a number float64 can"),
        (("peak", "--mu", "0.3", "--rho", "1e999"), "--rho must be a finite number"),
        (("lr", "--lr", "1e-400", "--optimizer", "sgd"), "--lr must be a number float64 can hold"),
        (("lr", "--lr", "1e-4000", "--optimizer", "sgd"), "--lr must be a number float64 can hold"),
        (("lr", "--lr", "1e999", "--optimizer", "sgd"), "--lr must be a number float64 can hold"),
        (("lr", "--lr", "1E+999", "--optimizer", "sgd"), "--lr must be a number float64 can hold"),
        (("mass", "--logits", "1,0", "--gamma", "-2e-999"), "--gamma must be a number float64"),
    ],
)
def test_float_text_that_reads_as_zero_or_inf_is_shown_as_typed(cli, args, shown):
    """A nonzero finite number float64 cannot hold reads as 0.0 or inf: the refusal shows the
    option's text (as for every other bad value), never the 0.0 or inf it read as."""
    r = cli(*args)
    typed = args[args.index(shown.split()[0]) + 1].split(",")[-1]
    assert (r.code, r.out) == (2, "")
    assert r.err.strip().splitlines() == [r.err.strip()]
    assert r.err.startswith(f"Error: {shown}")
    assert r.err.strip().endswith(f"; got '{typed}'")


def test_float_options_typed_zero_inf_or_nan_keep_their_messages(cli):
    """Only a number float64 cannot hold is refused by its text: 0, -0.0, inf and nan typed as
    such go on to the command's own check, as before."""
    base = ("lr", "--optimizer", "sgd", "--N", "8", "--gamma", "1", "--beta", "2,5", "--lr")
    assert cli(*base, "0e5").err.strip() == "Error: --lr must be > 0; got 0.0"
    assert cli(*base, "-0.0").err.strip() == "Error: --lr must be > 0; got -0.0"
    assert cli(*base, "nan").err.strip() == "Error: --lr must be a finite number; got nan"
    assert cli(*base, "inf").err.strip() == "Error: --lr must be a finite number; got inf"
    assert cli(*base, "1e-320").code == 0  # subnormal, not zero: accepted as before


def test_unwritable_output_is_a_one_line_error(cli):
    r = cli("lr-multiplier", "--gamma", "0", "--output", "/dev/full")
    assert r.code == 2
    assert r.err.startswith("Error: --output must be a writable path (No space left on device)")
    assert "'/dev/full'" in r.err and r.err.count("\n") == 1


# --- issue 9 item 10 / issue 10: output contract -------------------------------------------------

REPO = __import__("pathlib").Path(__file__).resolve().parents[1]


def test_no_bool_metavar_for_flags_in_any_help(cli):
    import typer.main

    from fgrpo_theory.cli import app

    group = typer.main.get_command(app)
    for name in ["", *group.commands]:
        r = cli(*([name] if name else []), "--help")
        assert r.code == 0, name
        assert "<bool>" not in r.out, name


def test_pipe_gets_streamed_csv_by_default():
    # issue 9 "done when": `miss-prob --N 4..64 --mu 0.3 --rho 0.05 | head -1` is the CSV header
    proc = subprocess.Popen(
        [sys.executable, "-c", "from fgrpo_theory.cli import main; main()", "miss-prob"]
        + ["--N", "1..300000", "--mu", "0.3", "--rho", "0.05,0.1,0.2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**__import__("os").environ, "PYTHONPATH": str(REPO)},
    )
    first = proc.stdout.readline()
    proc.stdout.close()  # like `| head -1`
    code = proc.wait(timeout=120)
    err = proc.stderr.read().decode()
    assert first == b"N,mu,tau,rho,p_active,p_tail_miss,p_tail_miss_given_active,p_hit\n"
    assert code in (0, 141) and "Traceback" not in err and err == ""


def test_terminal_table_fits_columns(monkeypatch, capsys):
    import pandas as pd

    from fgrpo_theory.cli._common import emit

    monkeypatch.setenv("COLUMNS", "60")
    df = pd.DataFrame({f"a_long_column_name_{i}": [1.23456789e-5] for i in range(9)})
    emit(df, "table")
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 60


def test_csv_and_json_stdout_carry_nothing_but_the_table(cli):
    r = cli("miss-prob", "--N", "1..3", "--mu", "0.3", "--rho", "0.1", "--format", "csv")
    assert (
        r.out.splitlines()[0] == "N,mu,tau,rho,p_active,p_tail_miss,p_tail_miss_given_active,p_hit"
    )
    assert len(r.out.splitlines()) == 4 and r.err == ""
    r = cli("focal", "--N", "2", "--format", "json")
    json.loads(r.out)


def test_closed_stdout_is_one_line_exit_2():
    # issue 10 item 8: `... --format csv >&-` ended in an AttributeError traceback
    import os

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        f"{sys.executable} -c 'from fgrpo_theory.cli import main; main()' "
        "miss-prob --mu 0.3 --rho 0.1 --format csv >&-",
        shell=True,
        capture_output=False,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("Error: stdout must be open")


@pytest.mark.skipif(shutil.which("prlimit") is None, reason="needs prlimit")
def test_output_is_atomic_under_a_file_size_limit(tmp_path):
    # issue 10 item 2: a failing write left a CSV cut mid-row and destroyed the previous file
    import os

    target = tmp_path / "fs.csv"
    target.write_text("previous good file\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        ["prlimit", "--fsize=2000", sys.executable, "-c"]
        + ["from fgrpo_theory.cli import main; main()", "miss-prob"]
        + ["--N", "1..1000", "--mu", "0.3", "--rho", "0.1", "--output", str(target)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert "--output" in proc.stderr and str(target) in proc.stderr
    assert target.read_text() == "previous good file\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fs.csv"]  # no partial temp file


def test_atomic_writer_keeps_old_file_when_the_writer_fails(tmp_path):
    from fgrpo_theory._io import atomic_open, atomic_path, remove_stale_temps, write_atomic

    target = tmp_path / "out.csv"
    write_atomic(target, "old\n")
    with pytest.raises(RuntimeError):
        with atomic_open(target) as fh:
            fh.write("half a ro")
            raise RuntimeError("boom")
    assert target.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == ["out.csv"]
    with atomic_path(tmp_path / "fig.png") as tmp:
        assert tmp.suffix == ".png" and tmp.parent == tmp_path
        tmp.write_bytes(b"png")
    assert (tmp_path / "fig.png").read_bytes() == b"png"
    stale = tmp_path / ".out.tmp-999999999-abcd1234.csv"
    stale.write_text("x")
    assert remove_stale_temps(tmp_path, b"k" * 32) == [] and stale.exists()  # not tagged: kept


@pytest.mark.parametrize(
    ("path", "fragments"),
    [
        ("/dev/full", ["--output", "'/dev/full'", "No space left on device"]),
        ("/proc/self/x.csv", ["--output", "'/proc/self/x.csv'", "folder where files can be"]),
        ("/nonexistent-dir/x.csv", ["--output", "'/nonexistent-dir/x.csv'", "existing folder"]),
    ],
)
def test_output_errors_name_option_and_path(cli, path, fragments):
    # issue 10 item 7
    r = cli("miss-prob", "--N", "1..3", "--mu", "0.3", "--rho", "0.1", "--output", path)
    assert r.code == 2 and r.err.count("\n") == 1
    for f in fragments:
        assert f in r.err


def test_memory_error_is_one_line(cli, monkeypatch):
    import fgrpo_theory.tables as tables

    def boom(*a, **k):
        raise MemoryError

    monkeypatch.setattr(tables, "tail_miss_table", boom)
    r = cli("miss-prob", "--mu", "0.3", "--rho", "0.1")
    assert r.code == 2 and r.err.startswith("Error: out of memory") and r.err.count("\n") == 1


def test_complex_input_is_refused_by_check_array():
    # issue 10 item 10: complex arrays were truncated to their real part
    from fgrpo_theory._validate import check_array
    from fgrpo_theory.tail_miss import tail_miss_probability

    with pytest.raises(ValueError, match=r"^N must be a real number .*; got \(8\+5j\)"):
        tail_miss_probability(np.array([8 + 5j, 4]), 0.3, 0.01)
    with pytest.raises(ValueError, match="real"):
        check_array("x", [1.0 + 0j])


def test_two_d_logits_file_is_refused_by_mass(cli, tmp_path):
    f = tmp_path / "z.npy"
    np.save(f, np.zeros((2, 3)))
    r = cli("mass", "--logits", f, "--correct", "0")
    assert r.code == 2 and "1-D" in r.err and r.err.count("\n") == 1
